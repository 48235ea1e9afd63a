#include "server/openai_tools.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <vector>

namespace hinge::server {

using namespace json_field;  // NOLINT: this file is one of its users

namespace {

bool valid_function_name(const std::string& n) {
  if (n.empty() || n.size() > 64) return false;
  for (char c : n)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-')) return false;
  return true;
}

}  // namespace

OptError parse_tools(Json& body, OpenAiRequest* r) {
  using TC = OpenAiRequest::ToolChoice;
  std::vector<std::string> names;
  if (auto it = body.find("tools"); it != body.end() && !it->is_null()) {
    if (!it->is_array()) return type_error("tools", "an array of tool objects", *it);
    for (size_t i = 0; i < it->size(); ++i) {
      const std::string tp = fmt::format("tools[{}]", i);
      const Json& t = (*it)[i];
      if (!t.is_object()) return type_error(tp, "a tool object", t);
      const Json* type = field(t, "type");
      if (!type || !type->is_string() || type->get_ref<const std::string&>() != "function")
        return value_error(tp + ".type", "only tools of type 'function' are supported.");
      const Json* fn = field(t, "function");
      if (!fn || !fn->is_object())
        return ApiError::invalid_request(tp + ".function",
                                         fmt::format("'{}.function' is required.", tp));
      const Json* name = field(*fn, "name");
      if (!name || !name->is_string() || !valid_function_name(name->get<std::string>()))
        return value_error(tp + ".function.name",
                           "a function name of 1 to 64 letters, digits, '_' or '-' is required.");
      if (std::find(names.begin(), names.end(), name->get<std::string>()) != names.end())
        return value_error(tp + ".function.name", "two tools have this name.");
      names.push_back(name->get<std::string>());
      if (const Json* d = field(*fn, "description"); d && !d->is_string())
        return type_error(tp + ".function.description", "a string", *d);
      if (const Json* ps = field(*fn, "parameters"); ps && !ps->is_object())
        return type_error(tp + ".function.parameters", "a JSON Schema object", *ps);
      if (const Json* st = field(*fn, "strict"); st && !st->is_boolean())
        return type_error(tp + ".function.strict", "a boolean", *st);
    }
    r->tools = std::move(*it);
  }
  if (auto it = body.find("tool_choice"); it != body.end() && !it->is_null()) {
    const Json& c = *it;
    if (c.is_string()) {
      const std::string& v = c.get_ref<const std::string&>();
      if (v == "none")
        r->tool_choice_mode = TC::kNone;
      else if (v == "auto")
        r->tool_choice_mode = TC::kAuto;
      else if (v == "required")
        r->tool_choice_mode = TC::kRequired;
      else
        return value_error("tool_choice",
                           "expected 'none', 'auto', 'required' or {\"type\": \"function\", "
                           "\"function\": {\"name\": ...}}.");
    } else if (c.is_object()) {
      const Json* fn = field(c, "function");
      const Json* name = fn && fn->is_object() ? field(*fn, "name") : nullptr;
      if (!name || !name->is_string())
        return ApiError::invalid_request(
            "tool_choice.function.name",
            "a named tool_choice needs {\"type\": \"function\", \"function\": {\"name\": ...}}.");
      r->tool_choice_mode = TC::kFunction;
      r->tool_choice_function = name->get<std::string>();
      if (std::find(names.begin(), names.end(), r->tool_choice_function) == names.end())
        return value_error(
            "tool_choice.function.name",
            fmt::format("no tool named '{}' is in 'tools'.", r->tool_choice_function));
    } else {
      return type_error("tool_choice", "a string or an object", c);
    }
    if (names.empty() && r->tool_choice_mode != TC::kNone && r->tool_choice_mode != TC::kAuto)
      return value_error("tool_choice", "tool_choice needs 'tools'.");
    r->tool_choice = std::move(*it);
  }
  if (const Json* ptc = field(body, "parallel_tool_calls")) {
    if (!ptc->is_boolean()) return type_error("parallel_tool_calls", "a boolean", *ptc);
    r->parallel_tool_calls = ptc->get<bool>();
  }
  return std::nullopt;
}

OptError check_history_tool_calls(Json& calls, const std::string& param) {
  for (size_t k = 0; k < calls.size(); ++k) {
    const std::string cp = fmt::format("{}[{}]", param, k);
    Json& call = calls[k];
    if (!call.is_object()) return type_error(cp, "a tool call object", call);
    if (const Json* id = field(call, "id"); id && !id->is_string())
      return type_error(cp + ".id", "a string", *id);
    auto fit = call.find("function");
    if (fit == call.end() || !fit->is_object())
      return ApiError::invalid_request(
          cp + ".function",
          fmt::format("'{}.function' is required: {{\"name\", \"arguments\"}}.", cp));
    const Json* fname = field(*fit, "name");
    if (!fname || !fname->is_string())
      return ApiError::invalid_request(cp + ".function.name",
                                       "a function name (a string) is required.");
    auto ait = fit->find("arguments");
    if (ait == fit->end() || ait->is_null()) {
      (*fit)["arguments"] = "{}";
    } else if (ait->is_string()) {
      // OpenAI's shape: JSON text (the server hands each template the shape it reads).
      Json parsed = Json::parse(ait->get_ref<const std::string&>(), nullptr, false);
      if (parsed.is_discarded() || !parsed.is_object())
        return value_error(cp + ".function.arguments",
                           "expected a JSON object encoded as a string.");
    } else if (!ait->is_object()) {
      return type_error(cp + ".function.arguments", "a JSON object encoded as a string", *ait);
    }
  }
  return std::nullopt;
}

}  // namespace hinge::server
