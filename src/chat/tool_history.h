// Tool calls in a conversation's history, in the shape each family's template reads: the
// arguments of an assistant message's tool_calls as an object (Qwen 2.5, Llama 3, Mistral,
// Command R) or as JSON text (Functionary, Firefunction, DeepSeek; OpenAI's own shape), and
// Command R+'s null content as "" (its template would print "None"). Hermes reads either.
// tests/data/tool_calls/README.md has what each template reads.
//
// Thread-safety: a pure function.
#pragma once

#include <nlohmann/json.hpp>

#include "chat/tool_format.h"

namespace hinge {

nlohmann::ordered_json shape_tool_history(const nlohmann::ordered_json& messages, ToolFormat format);

}  // namespace hinge
