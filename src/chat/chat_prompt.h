// Rendering a conversation with a model's chat template into prompt tokens, as the server's
// /v1/chat/completions and `hinge chat` both do: the template sees `messages`,
// `add_generation_prompt`, `bos_token` and `eos_token` (the vocabulary's texts of them),
// `tools` when given, and `functions` (the tools as JSON text) and `datetime` (UTC) as
// Firefunction v2's template reads them; the rendered text is tokenized with special tokens parsed, adding BOS
// only when the template did not already write it.
//
// Thread-safety: pure functions of immutable inputs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "chat/chat_template.h"
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

// Where a rendered chat's messages start in its tokens, for --context-policy shift (which then
// keeps a system prompt and drops whole turns, sched::RequestParams).
struct ChatTurns {
  int32_t keep_tokens = 0;           // the leading system / developer messages' tokens
  std::vector<int32_t> turn_starts;  // token position where message i >= 1 starts, and where
                                     // the last one ends (the reply's header), increasing
};

// From the renders of the first 1..k messages (k <= max_messages) that are prefixes of `text`
// (the whole render, whose tokens are `tokens`), each kept when the tokens of the text up to it
// are exactly a prefix of `tokens` (a tokenizer may merge across a boundary, e.g. "|><|" without
// special tokens: that one is left out). A template that renders a prefix differently yields
// fewer or no boundaries, never a wrong one. Costs k renders and about one tokenization of
// the text.
ChatTurns chat_turns(const ChatTemplate& tmpl, const Tokenizer& tok,
                     const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools,
                     const std::string& text, std::span<const int32_t> tokens,
                     size_t max_messages = 64);

}  // namespace hinge
