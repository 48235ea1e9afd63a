// How a model family writes tool calls and reasoning in its reply, chosen from its chat template
// (docs/tool-calls.md has the table). The server parses a reply with the format of the template
// it renders (chat/reply_parser.h); `hinge serve --tool-format NAME` overrides the detection.
//
//   hermes            Hermes 2 Pro / 3, Qwen 2.5: <tool_call>{"name", "arguments"}</tool_call>
//   llama3_json       Llama 3.1 / 3.2 / 3.3: a reply that is {"name", "parameters"} (";"
//                     between several), or <|python_tag|> before it or a built-in's
//                     name.call(key="value")
//   mistral           Mistral (Nemo): [TOOL_CALLS][{"name", "arguments", "id"}], or
//                     [TOOL_CALLS]name[ARGS]{...}
//   functionary_v3_1  <function=NAME>{...}</function>, <|python_tag|>code
//   functionary_v3_2  >>>NAME\n{...} segments; >>>all\n is text
//   command_r7b       <|START_THINKING|>..., <|START_ACTION|>[{"tool_name", "parameters"}]
//                     <|END_ACTION|>, <|START_RESPONSE|>text<|END_RESPONSE|>
//   command_r_plus    Action: ```json [{"tool_name", "parameters"}] ```
//   firefunction_v2   functools[{"name", "arguments"}]
//   deepseek_r1       <think>reasoning</think>, <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>
//                     function<｜tool▁sep｜>NAME\n```json\n{...}\n```<｜tool▁call▁end｜>...
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace hinge {

enum class ToolFormat : uint8_t {
  kNone,  // the template has no tool syntax hinge knows: replies are text
  kHermes,
  kLlama3Json,
  kMistral,
  kFunctionaryV31,
  kFunctionaryV32,
  kCommandR7b,
  kCommandRPlus,
  kFirefunctionV2,
  kDeepSeekR1,
};

const char* tool_format_name(ToolFormat f);
// "hermes", "llama3_json", ... (and "none"); nullopt for an unknown name.
std::optional<ToolFormat> tool_format_from_name(std::string_view name);

// The format a chat template's source asks its model for (the distinctive markers the template
// writes into its prompt or history), kNone when it names none.
ToolFormat detect_tool_format(std::string_view template_source);

// Whether the format's replies carry reasoning apart from the answer (<think>, thinking blocks).
bool tool_format_has_reasoning(ToolFormat f);

}  // namespace hinge
