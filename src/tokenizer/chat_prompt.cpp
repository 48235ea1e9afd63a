#include "tokenizer/chat_prompt.h"

namespace hinge {

namespace {

std::string token_text(const Tokenizer& tok, int32_t id) {
  const auto& spec = tok.spec();
  return id >= 0 && id < static_cast<int32_t>(spec.tokens.size())
             ? spec.tokens[static_cast<size_t>(id)] : "";
}

}  // namespace

std::string bos_token_text(const Tokenizer& tok) { return token_text(tok, tok.spec().bos); }
std::string eos_token_text(const Tokenizer& tok) { return token_text(tok, tok.spec().eos); }

StatusOr<std::string> render_chat(const ChatTemplate& tmpl, const Tokenizer& tok,
                                  const nlohmann::ordered_json& messages,
                                  const nlohmann::ordered_json& tools,
                                  bool add_generation_prompt) {
  nlohmann::ordered_json ctx = nlohmann::ordered_json::object();
  ctx["messages"] = messages;
  ctx["add_generation_prompt"] = add_generation_prompt;
  ctx["bos_token"] = bos_token_text(tok);
  ctx["eos_token"] = eos_token_text(tok);
  if (tools.is_array()) ctx["tools"] = tools;
  return tmpl.render(ctx);
}

std::vector<int32_t> encode_rendered_chat(const Tokenizer& tok, const std::string& text) {
  const std::string bos = bos_token_text(tok);
  const bool has_bos = !bos.empty() && text.rfind(bos, 0) == 0;
  return tok.encode(text, /*add_special=*/!has_bos, /*parse_special=*/true);
}

}  // namespace hinge
