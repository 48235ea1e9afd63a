#include "chat/conversation.h"

#include <utility>

#include "chat/chat_prompt.h"

namespace hinge::chat {

using OJson = nlohmann::ordered_json;

Conversation::Conversation(const Tokenizer* tok, const ChatTemplate* tmpl,
                           std::string system_prompt)
    : tok_(tok), tmpl_(tmpl), system_(std::move(system_prompt)) {}

std::string Conversation::head_text() const {
  if (summary_.empty()) return system_;
  const std::string s = "Summary of the conversation so far: " + summary_;
  return system_.empty() ? s : system_ + "\n\n" + s;
}

OJson Conversation::messages(int32_t first_turn, int32_t end_turn,
                             const std::vector<std::string>& extra, bool head_in_user) const {
  OJson m = OJson::array();
  const std::string head = head_text();
  std::string pending_head = head;
  if (!head.empty() && !head_in_user) {
    m.push_back({{"role", "system"}, {"content", head}});
    pending_head.clear();
  }
  auto user = [&](const std::string& text) {
    if (pending_head.empty()) {
      m.push_back({{"role", "user"}, {"content", text}});
    } else {
      m.push_back({{"role", "user"}, {"content", pending_head + "\n\n" + text}});
      pending_head.clear();
    }
  };
  for (int32_t i = first_turn; i < end_turn; ++i) {
    user(turns_[static_cast<size_t>(i)].user);
    m.push_back({{"role", "assistant"}, {"content", turns_[static_cast<size_t>(i)].assistant}});
  }
  for (const std::string& e : extra) user(e);
  return m;
}

StatusOr<std::string> Conversation::render(int32_t first_turn, int32_t end_turn,
                                           const std::vector<std::string>& extra,
                                           bool generation) const {
  if (tmpl_ == nullptr) {
    std::string text = head_text();
    auto line = [&](const std::string& s) {
      if (!text.empty()) text += '\n';
      text += s;
    };
    for (int32_t i = first_turn; i < end_turn; ++i) {
      line(turns_[static_cast<size_t>(i)].user);
      line(turns_[static_cast<size_t>(i)].assistant);
    }
    for (const std::string& e : extra) line(e);
    if (generation) text += '\n';
    return text;
  }
  auto r = render_chat(*tmpl_, *tok_, messages(first_turn, end_turn, extra, false), nullptr,
                       generation);
  if (!r.ok() && !head_text().empty()) {
    // A template that refuses a system message (Gemma's): the head goes into the first user
    // message instead.
    auto again = render_chat(*tmpl_, *tok_, messages(first_turn, end_turn, extra, true), nullptr,
                             generation);
    if (again.ok()) return again;
  }
  if (!r.ok())
    return r.status().with_context("the chat template could not render the conversation");
  return r;
}

std::vector<int32_t> Conversation::turn_starts(const std::string& user,
                                               const TurnPrompt& prompt) const {
  if (tmpl_ == nullptr) return {};
  // The same messages render() used: the head as a system message unless the template refuses.
  const bool head_in_user =
      !head_text().empty() &&
      !render_chat(*tmpl_, *tok_, messages(0, num_turns(), {user}, false), nullptr, true).ok();
  return chat_turns(*tmpl_, *tok_, messages(0, num_turns(), {user}, head_in_user),
                    OJson::array(), prompt.text, prompt.tokens)
      .turn_starts;
}

std::vector<int32_t> Conversation::encode_full(const std::string& text) const {
  if (tmpl_ != nullptr) return encode_rendered_chat(*tok_, text);
  std::vector<int32_t> ids = tok_->encode(text, /*add_special=*/true, /*parse_special=*/false);
  if (ids.empty() && tok_->bos() >= 0) ids.push_back(tok_->bos());
  return ids;
}

StatusOr<TurnPrompt> Conversation::prompt_with(const std::string& user) const {
  HINGE_ASSIGN_OR_RETURN(std::string text, render(0, num_turns(), {user}, true));
  TurnPrompt p;
  if (!history_.empty() && text.size() > history_text_.size() &&
      text.compare(0, history_text_.size(), history_text_) == 0) {
    p.tokens = history_;
    const std::vector<int32_t> rest =
        tok_->encode(std::string_view(text).substr(history_text_.size()), /*add_special=*/false,
                     /*parse_special=*/tmpl_ != nullptr);
    p.tokens.insert(p.tokens.end(), rest.begin(), rest.end());
    p.reused_tokens = static_cast<int32_t>(history_.size());
  } else {
    p.tokens = encode_full(text);
  }
  p.text = std::move(text);
  return p;
}

void Conversation::add_turn(const std::string& user, TurnPrompt prompt,
                            std::span<const int32_t> reply_tokens, const std::string& reply_text) {
  turns_.push_back({user, reply_text});
  history_ = std::move(prompt.tokens);
  history_.insert(history_.end(), reply_tokens.begin(), reply_tokens.end());
  history_text_ = std::move(prompt.text) + reply_text;
}

StatusOr<TurnPrompt> Conversation::summary_prompt(int32_t n, const std::string& instruction) const {
  HINGE_CHECK(n >= 0 && n <= num_turns());
  HINGE_ASSIGN_OR_RETURN(std::string text, render(0, n, {instruction}, true));
  TurnPrompt p;
  p.tokens = encode_full(text);
  p.text = std::move(text);
  return p;
}

void Conversation::summarize_oldest(int32_t n, std::string summary) {
  HINGE_CHECK(n >= 0 && n <= num_turns());
  turns_.erase(turns_.begin(), turns_.begin() + n);
  summary_ = std::move(summary);
  history_.clear();
  history_text_.clear();
}

void Conversation::drop_oldest(int32_t n) {
  HINGE_CHECK(n >= 0 && n <= num_turns());
  turns_.erase(turns_.begin(), turns_.begin() + n);
  history_.clear();
  history_text_.clear();
}

StatusOr<int32_t> Conversation::head_tokens() const {
  if (head_text().empty()) return 0;
  if (tmpl_ == nullptr) return static_cast<int32_t>(encode_full(head_text() + "\n").size());
  auto r = render(0, 0, {}, false);
  if (!r.ok()) return 0;  // a template that needs a user message: nothing to keep apart
  return static_cast<int32_t>(encode_full(*r).size());
}

void Conversation::reset() {
  turns_.clear();
  summary_.clear();
  history_.clear();
  history_text_.clear();
}

OJson Conversation::to_json() const {
  OJson j = OJson::object();
  j["format"] = 1;
  j["system"] = system_;
  j["summary"] = summary_;
  OJson turns = OJson::array();
  for (const Turn& t : turns_) turns.push_back(OJson::array({t.user, t.assistant}));
  j["turns"] = std::move(turns);
  j["history"] = history_;
  j["history_text"] = history_text_;
  return j;
}

Status Conversation::load_json(const OJson& j) {
  auto str = [&](const char* key) -> StatusOr<std::string> {
    if (!j.contains(key) || !j[key].is_string())
      return Status::Errorf("conversation: '{}' must be a string", key);
    return j[key].get<std::string>();
  };
  if (!j.is_object()) return Status::Error("conversation: not a JSON object");
  if (!j.contains("format") || !j["format"].is_number_integer() || j["format"].get<int64_t>() != 1)
    return Status::Error("conversation: unknown format (this hinge reads format 1)");
  HINGE_ASSIGN_OR_RETURN(std::string system, str("system"));
  HINGE_ASSIGN_OR_RETURN(std::string summary, str("summary"));
  HINGE_ASSIGN_OR_RETURN(std::string history_text, str("history_text"));
  if (!j.contains("turns") || !j["turns"].is_array())
    return Status::Error("conversation: 'turns' must be an array");
  std::vector<Turn> turns;
  for (const OJson& t : j["turns"]) {
    if (!t.is_array() || t.size() != 2 || !t[0].is_string() || !t[1].is_string())
      return Status::Error("conversation: each turn must be [user, assistant] strings");
    turns.push_back({t[0].get<std::string>(), t[1].get<std::string>()});
  }
  if (!j.contains("history") || !j["history"].is_array())
    return Status::Error("conversation: 'history' must be an array of token ids");
  const int64_t vocab = static_cast<int64_t>(tok_->spec().tokens.size());
  std::vector<int32_t> history;
  history.reserve(j["history"].size());
  for (const OJson& id : j["history"]) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= vocab)
      return Status::Errorf("conversation: a history token id is outside the vocabulary (0..{})",
                            vocab - 1);
    history.push_back(static_cast<int32_t>(id.get<int64_t>()));
  }
  system_ = std::move(system);
  summary_ = std::move(summary);
  turns_ = std::move(turns);
  history_ = std::move(history);
  history_text_ = std::move(history_text);
  return Status::Ok();
}

}  // namespace hinge::chat
