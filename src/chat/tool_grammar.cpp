#include "chat/tool_grammar.h"

#include <fmt/format.h>

#include "grammar/json_schema.h"

namespace hinge {
namespace {

using Json = nlohmann::ordered_json;
using grammar::gbnf_literal;

// One call of function `name` whose arguments are the rule `args`, in the family's syntax.
std::string call(ToolFormat f, const std::string& name, const std::string& args, size_t index) {
  const std::string q = gbnf_literal("\"" + name + "\"");
  switch (f) {
    case ToolFormat::kHermes:
      return fmt::format(R"("<tool_call>\n{{\"name\": " {} ", \"arguments\": " {} "}}\n</tool_call>")", q, args);
    case ToolFormat::kLlama3Json:
      return fmt::format(R"("{{\"name\": " {} ", \"parameters\": " {} "}}")", q, args);
    case ToolFormat::kMistral:
    case ToolFormat::kFirefunctionV2:
      return fmt::format(R"("{{\"name\": " {} ", \"arguments\": " {} "}}")", q, args);
    case ToolFormat::kFunctionaryV31:
      return fmt::format(R"("<function=" {} ">" {} "</function>")", gbnf_literal(name), args);
    case ToolFormat::kFunctionaryV32:
      return fmt::format(R"({} "\n" {})", gbnf_literal(name), args);
    case ToolFormat::kCommandR7b:
      return fmt::format(R"("{{\"tool_call_id\": \"{}\", \"tool_name\": " {} ", \"parameters\": " {} "}}")", index, q, args);
    case ToolFormat::kCommandRPlus:
      return fmt::format(R"("{{\"tool_name\": " {} ", \"parameters\": " {} "}}")", q, args);
    case ToolFormat::kDeepSeekR1:
      return fmt::format(R"("<｜tool▁call▁begin｜>function<｜tool▁sep｜>" {} "\n```json\n" {} "\n```<｜tool▁call▁end｜>")",
                         gbnf_literal(name), args);
    case ToolFormat::kNone: break;
  }
  return "";
}

}  // namespace

StatusOr<std::string> tool_call_gbnf(ToolFormat f, const Json& tools, const std::string& only,
                                     bool parallel, bool reasoning_open) {
  if (f == ToolFormat::kNone) return Status::Error("this chat template has no tool-call syntax hinge knows");
  if (!tools.is_array() || tools.empty()) return Status::Error("tool_choice needs tools");
  std::string rules, alternatives;
  size_t k = 0;
  for (const Json& t : tools) {
    const Json& fn = t["function"];
    const std::string name = fn["name"].get<std::string>();
    if (!only.empty() && name != only) continue;
    std::string args = "any-object";
    if (fn.contains("parameters") && fn["parameters"].is_object()) {
      const std::string prefix = fmt::format("tool{}-", k);
      auto r = grammar::json_schema_rules(fn["parameters"], prefix);
      if (!r.ok()) return Status::Errorf("tools[{}].function.parameters: {}", k, r.status().message());
      rules += *r;
      args = prefix + "root";
    }
    alternatives += fmt::format("{}{}", alternatives.empty() ? "" : " | ", call(f, name, args, 0));
    ++k;
  }
  if (alternatives.empty()) return Status::Errorf("no tool named '{}' is in 'tools'", only);
  // Llama 3's template takes one call per message back into the history ("This model only
  // supports single tool-calls at once!"): its replies make one.
  if (f == ToolFormat::kLlama3Json) parallel = false;
  std::string g = "one-call ::= " + alternatives + "\n";
  // The calls, and the family's wrapper around them.
  const std::string more = parallel ? "*" : "{0}";  // the group after the first call
  std::string calls;
  switch (f) {
    case ToolFormat::kHermes: calls = fmt::format(R"(one-call ("\n" one-call){})", more); break;
    case ToolFormat::kLlama3Json: calls = fmt::format(R"(one-call ("; " one-call){})", more); break;
    case ToolFormat::kMistral: calls = fmt::format(R"("[TOOL_CALLS][" one-call (", " one-call){} "]")", more); break;
    case ToolFormat::kFirefunctionV2: calls = fmt::format(R"(" functools[" one-call (", " one-call){} "]")", more); break;
    case ToolFormat::kFunctionaryV31: calls = fmt::format(R"(one-call one-call{})", parallel ? "*" : "{0}"); break;
    case ToolFormat::kFunctionaryV32: calls = fmt::format(R"(one-call (">>>" one-call){})", more); break;
    case ToolFormat::kCommandR7b:
      calls = fmt::format(R"("<|START_ACTION|>[" one-call (", " one-call){} "]<|END_ACTION|>")", more);
      break;
    case ToolFormat::kCommandRPlus:
      calls = fmt::format(R"("Action: ```json\n[" one-call (", " one-call){} "]\n```")", more);
      break;
    case ToolFormat::kDeepSeekR1:
      calls = fmt::format(R"("<｜tool▁calls▁begin｜>" one-call one-call{} "<｜tool▁calls▁end｜>")", parallel ? "*" : "{0}");
      if (reasoning_open) calls = R"([^<]* "</think>\n\n" )" + calls;
      break;
    case ToolFormat::kNone: break;
  }
  return "root ::= " + calls + "\n" + g + rules + grammar::json_primitives_gbnf();
}

}  // namespace hinge
