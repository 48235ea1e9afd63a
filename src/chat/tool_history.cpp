#include "chat/tool_history.h"

namespace hinge {

nlohmann::ordered_json shape_tool_history(const nlohmann::ordered_json& messages, ToolFormat f) {
  const bool as_text = f == ToolFormat::kFunctionaryV31 || f == ToolFormat::kFunctionaryV32 ||
                       f == ToolFormat::kFirefunctionV2 || f == ToolFormat::kDeepSeekR1;
  nlohmann::ordered_json out = messages;
  for (auto& m : out) {
    if (!m.is_object()) continue;
    if (f == ToolFormat::kCommandRPlus && m.contains("content") && m["content"].is_null()) m["content"] = "";
    auto calls = m.find("tool_calls");
    if (calls == m.end() || !calls->is_array()) continue;
    for (auto& c : *calls) {
      if (!c.is_object() || !c.contains("function") || !c["function"].is_object()) continue;
      auto& args = c["function"]["arguments"];
      if (as_text && args.is_object()) {
        args = args.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
      } else if (!as_text && args.is_string()) {
        auto parsed = nlohmann::ordered_json::parse(args.get<std::string>(), nullptr, false);
        if (!parsed.is_discarded() && parsed.is_object()) args = std::move(parsed);
      }
    }
  }
  return out;
}


}  // namespace hinge
