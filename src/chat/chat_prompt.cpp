#include "chat/chat_prompt.h"

#include <algorithm>
#include <ctime>

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
  // Firefunction v2's template reads the tools as JSON text and the date (llama.cpp's names).
  ctx["functions"] = tools.is_array() ? tools.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace)
                                      : std::string("[]");
  char date[64];
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  std::strftime(date, sizeof date, "%b %d %Y %H:%M:%S GMT", &tm);
  ctx["datetime"] = date;
  return tmpl.render(ctx);
}

std::vector<int32_t> encode_rendered_chat(const Tokenizer& tok, const std::string& text) {
  const std::string bos = bos_token_text(tok);
  const bool has_bos = !bos.empty() && text.rfind(bos, 0) == 0;
  return tok.encode(text, /*add_special=*/!has_bos, /*parse_special=*/true);
}

ChatTurns chat_turns(const ChatTemplate& tmpl, const Tokenizer& tok,
                     const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools,
                     const std::string& text, std::span<const int32_t> tokens,
                     size_t max_messages) {
  ChatTurns out;
  if (!messages.is_array()) return out;
  const size_t m = std::min(messages.size(), max_messages);
  size_t system_messages = 0;
  while (system_messages < messages.size()) {
    const auto& msg = messages[system_messages];
    const auto role = msg.is_object() && msg.contains("role") && msg["role"].is_string()
                          ? msg["role"].get<std::string>() : std::string();
    if (role != "system" && role != "developer") break;
    ++system_messages;
  }
  const std::string eos = eos_token_text(tok);
  size_t chars = 0, at = 0;  // text and tokens up to the last boundary found
  nlohmann::ordered_json prefix = nlohmann::ordered_json::array();
  for (size_t i = 0; i < m; ++i) {
    prefix.push_back(messages[i]);
    auto r = render_chat(tmpl, tok, prefix, tools, /*add_generation_prompt=*/false);
    if (!r.ok()) continue;
    std::string head = std::move(r).value();
    // Templates that close a conversation without a generation prompt with EOS (Phi-3).
    if (!eos.empty() && head.ends_with(eos) && text.compare(0, head.size(), head) != 0)
      head.resize(head.size() - eos.size());
    if (head.size() <= chars || head.size() > text.size() || text.compare(0, head.size(), head) != 0)
      continue;
    const std::string piece = head.substr(chars);
    const std::vector<int32_t> ids = chars == 0 ? encode_rendered_chat(tok, piece)
                                                : tok.encode(piece, /*add_special=*/false,
                                                             /*parse_special=*/true);
    if (at + ids.size() > tokens.size() ||
        !std::equal(ids.begin(), ids.end(), tokens.begin() + static_cast<ptrdiff_t>(at)))
      continue;  // merged across this boundary: the next piece starts at the last good one
    chars = head.size();
    at += ids.size();
    if (at >= tokens.size()) break;
    if (i + 1 == system_messages) out.keep_tokens = static_cast<int32_t>(at);
    out.turn_starts.push_back(static_cast<int32_t>(at));
  }
  return out;
}

}  // namespace hinge
