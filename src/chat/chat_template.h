// Chat templates: renders a model's `tokenizer.chat_template` (GGUF metadata or
// tokenizer_config.json) into the prompt string, exactly as Hugging Face transformers does with
// Python jinja2 (ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks, loopcontrols,
// tojson = json.dumps(ensure_ascii=False), raise_exception, strftime_now).
//
// The context is a JSON object whose members become template variables: `messages`,
// `add_generation_prompt`, `bos_token`, `eos_token`, `tools` (absent = undefined, null = None),
// and any extras (`date_string`, `documents`, ...). Objects keep their member order
// (ordered_json), which tojson reproduces.
//
// Templates are hostile input: parsing bounds nesting depth, rendering bounds output size, loop
// iterations and macro recursion (Limits), and every failure is a Status, never a crash:
// syntax errors name line and column; render errors include the template's own
// raise_exception message. A ChatTemplate is immutable after parse(); render() is const and may
// run on many threads at once.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "common/status.h"

namespace hinge {

namespace jinja {
struct TemplateAst;
}

struct ChatTemplateLimits {
  size_t max_output_bytes = 16u << 20;
  int64_t max_loop_iterations = 1'000'000;
  int max_call_depth = 100;
};

class ChatTemplate {
 public:
  static StatusOr<ChatTemplate> parse(std::string_view source);

  StatusOr<std::string> render(const nlohmann::ordered_json& context,
                               const ChatTemplateLimits& limits = {}) const;

 private:
  explicit ChatTemplate(std::shared_ptr<const jinja::TemplateAst> ast) : ast_(std::move(ast)) {}
  std::shared_ptr<const jinja::TemplateAst> ast_;
};

}  // namespace hinge
