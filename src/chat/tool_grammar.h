// The grammar of a reply that must call a tool (tool_choice "required" or a named function):
// the family's call syntax (chat/tool_format.h) around arguments that follow each tool's
// "parameters" schema (grammar/json_schema.h; a tool without one takes any JSON object). With
// parallel calls, one or more calls; else exactly one (Llama 3: always one, as its template
// takes back no more). The reply parser (chat/reply_parser.h)
// then reads the calls back, so "required" is enforced by the sampler, not hoped for.
//
// Thread-safety: a pure function.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "chat/tool_format.h"
#include "common/status.h"

namespace hinge {

// tools: OpenAI's array ({"type": "function", "function": {"name", "parameters"}}); only: a
// function name (empty: any of them). reasoning_open: the prompt ends inside a reasoning block
// (DeepSeek R1's distills), which the reply closes first. Errors: a format without a call
// syntax, a tool schema outside the supported subset (naming the tool).
StatusOr<std::string> tool_call_gbnf(ToolFormat format, const nlohmann::ordered_json& tools,
                                     const std::string& only, bool parallel, bool reasoning_open);

}  // namespace hinge
