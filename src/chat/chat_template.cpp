// ChatTemplate: the Status-returning boundary around the Jinja lexer/parser/interpreter.
#include "chat/chat_template.h"

#include "jinja/interpreter.h"
#include "jinja/parser.h"

namespace hinge {

StatusOr<ChatTemplate> ChatTemplate::parse(std::string_view source) {
  try {
    auto ast = std::make_shared<jinja::TemplateAst>(jinja::parse_template(source));
    return ChatTemplate(std::move(ast));
  } catch (const jinja::Error& e) {
    return Status::Error("chat template syntax error: " + e.message);
  } catch (const std::bad_alloc&) {
    return Status::Error("chat template: out of memory while parsing");
  }
}

StatusOr<std::string> ChatTemplate::render(const nlohmann::ordered_json& context,
                                           const ChatTemplateLimits& limits) const {
  if (!context.is_object()) return Status::Error("chat template context must be a JSON object");
  jinja::Limits l;
  l.max_output_bytes = limits.max_output_bytes;
  l.max_loop_iterations = limits.max_loop_iterations;
  l.max_call_depth = limits.max_call_depth;
  try {
    jinja::Interpreter interpreter(l);
    return interpreter.render(*ast_, jinja::from_json(context));
  } catch (const jinja::Error& e) {
    return Status::Error("chat template error: " + e.message);
  } catch (const std::bad_alloc&) {
    return Status::Error("chat template: out of memory while rendering");
  }
}

}  // namespace hinge
