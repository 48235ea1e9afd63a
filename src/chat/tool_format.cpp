#include "chat/tool_format.h"

#include <array>
#include <utility>

namespace hinge {
namespace {

constexpr std::array<std::pair<ToolFormat, const char*>, 10> kNames = {{
    {ToolFormat::kNone, "none"},
    {ToolFormat::kHermes, "hermes"},
    {ToolFormat::kLlama3Json, "llama3_json"},
    {ToolFormat::kMistral, "mistral"},
    {ToolFormat::kFunctionaryV31, "functionary_v3_1"},
    {ToolFormat::kFunctionaryV32, "functionary_v3_2"},
    {ToolFormat::kCommandR7b, "command_r7b"},
    {ToolFormat::kCommandRPlus, "command_r_plus"},
    {ToolFormat::kFirefunctionV2, "firefunction_v2"},
    {ToolFormat::kDeepSeekR1, "deepseek_r1"},
}};

bool has(std::string_view s, std::string_view what) { return s.find(what) != std::string_view::npos; }

}  // namespace

const char* tool_format_name(ToolFormat f) {
  for (const auto& [k, name] : kNames)
    if (k == f) return name;
  return "none";
}

std::optional<ToolFormat> tool_format_from_name(std::string_view name) {
  for (const auto& [k, n] : kNames)
    if (name == n) return k;
  return std::nullopt;
}

ToolFormat detect_tool_format(std::string_view t) {
  // Most specific first: several of these templates are Llama 3.1 derivatives that also write
  // <|python_tag|> or <|start_header_id|>.
  if (has(t, "<｜tool▁calls▁begin｜>") || has(t, "<｜tool▁call▁begin｜>")) return ToolFormat::kDeepSeekR1;
  if (has(t, "<|START_ACTION|>")) return ToolFormat::kCommandR7b;
  if (has(t, "<|START_OF_TURN_TOKEN|>") && has(t, "Action:")) return ToolFormat::kCommandRPlus;
  if (has(t, ">>>all") || (has(t, ">>>") && has(t, "recipient"))) return ToolFormat::kFunctionaryV32;
  if (has(t, "<function=")) return ToolFormat::kFunctionaryV31;
  if (has(t, "functools[")) return ToolFormat::kFirefunctionV2;
  if (has(t, "[TOOL_CALLS]")) return ToolFormat::kMistral;
  if (has(t, "<tool_call>")) return ToolFormat::kHermes;
  if (has(t, "<|start_header_id|>") && (has(t, "<|python_tag|>") || has(t, "ipython")) &&
      has(t, "tools"))
    return ToolFormat::kLlama3Json;
  if (has(t, "<think>") || has(t, "</think>")) return ToolFormat::kDeepSeekR1;  // reasoning only
  return ToolFormat::kNone;
}

bool tool_format_has_reasoning(ToolFormat f) {
  return f == ToolFormat::kDeepSeekR1 || f == ToolFormat::kCommandR7b;
}

}  // namespace hinge
