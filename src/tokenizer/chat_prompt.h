// Rendering a conversation with a model's chat template into prompt tokens, as the server's
// /v1/chat/completions and `hinge chat` both do: the template sees `messages`,
// `add_generation_prompt`, `bos_token` and `eos_token` (the vocabulary's texts of them), and
// `tools` when given; the rendered text is tokenized with special tokens parsed, adding BOS
// only when the template did not already write it.
//
// Thread-safety: pure functions of immutable inputs.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace hinge {

// The vocabulary's text of its BOS / EOS token ("" when it has none).
std::string bos_token_text(const Tokenizer& tok);
std::string eos_token_text(const Tokenizer& tok);

// Renders messages (an array of {role, content, ...}); tools: an array or null.
StatusOr<std::string> render_chat(const ChatTemplate& tmpl, const Tokenizer& tok,
                                  const nlohmann::ordered_json& messages,
                                  const nlohmann::ordered_json& tools,
                                  bool add_generation_prompt);

// Tokens of a rendered chat text: special tokens parsed, BOS added unless the text starts with
// the BOS token's text.
std::vector<int32_t> encode_rendered_chat(const Tokenizer& tok, const std::string& text);

}  // namespace hinge
