// libFuzzer target: a chat template is model metadata, i.e. hostile input. The whole input is
// the template source; it is parsed and, when it parses, rendered against a fixed conversation
// with tools. Any outcome but a crash, sanitizer report, hang or unbounded memory is fine:
// errors must come back as Status.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include <nlohmann/json.hpp>

#include "chat/chat_template.h"

namespace {
const nlohmann::ordered_json& context() {
  static const nlohmann::ordered_json ctx = nlohmann::ordered_json::parse(R"({
    "messages": [
      {"role": "system", "content": "You are terse."},
      {"role": "user", "content": "Weather in Paris? \u00e9\u4e2d"},
      {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function":
        {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
      {"role": "tool", "content": "{\"t\": 21}"},
      {"role": "assistant", "content": "21 C."},
      {"role": "user", "content": [{"type": "text", "text": "Thanks"}]}
    ],
    "tools": [{"type": "function", "function": {"name": "get_weather", "description": "Now",
      "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
      "required": ["city"]}}}],
    "add_generation_prompt": true, "bos_token": "<s>", "eos_token": "</s>",
    "date_string": "29 Nov 2026"
  })");
  return ctx;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view src(reinterpret_cast<const char*>(data), size);
  auto tmpl = hinge::ChatTemplate::parse(src);
  if (!tmpl.ok()) return 0;
  hinge::ChatTemplateLimits limits;
  limits.max_output_bytes = 1 << 20;
  limits.max_loop_iterations = 100'000;
  (void)tmpl->render(context(), limits);
  return 0;
}
