// The tool parts of a chat request (server/openai_request.h): `tools`, `tool_choice` and
// `parallel_tool_calls` into the request, and the tool calls of an assistant message in the
// history. Each error is a 400 naming the field.
//
// Thread-safety: pure functions over their arguments.
#pragma once

#include <string>

#include "server/json_field.h"
#include "server/openai_request.h"

namespace hinge::server {

// tools (each {"type": "function", "function": {"name", "description"?, "parameters"?,
// "strict"?}}, names unique), tool_choice (none / auto / required / a named tool among them),
// parallel_tool_calls.
json_field::OptError parse_tools(json_field::Json& body, OpenAiRequest* r);

// An assistant message's tool_calls array (`param` names it): each {"function": {"name",
// "arguments"}} with arguments a JSON object or JSON text of one; absent arguments become "{}".
json_field::OptError check_history_tool_calls(json_field::Json& calls, const std::string& param);

}  // namespace hinge::server
