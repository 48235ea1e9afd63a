// Conversation: one person's chat as `hinge chat` keeps it — an optional system prompt, a rolling
// summary of turns that no longer fit, the turns (user text, assistant reply), and the token
// history the model has seen (the last prompt and its reply), so that each new prompt is that
// history followed by the new turn's tokens and the prefix cache holds all of it.
//
// Rendering: with the model's chat template (chat/chat_prompt.h: BOS only when the template
// does not write it, special tokens parsed); a template that refuses a system message gets the
// system prompt and summary at the head of the first user message instead. Without a template,
// the plain format: every text on its own line, the reply starting after a newline.
//
// Reuse: when the conversation so far renders as a prefix of the new prompt's text (what chat
// templates do, turn after turn), the new prompt is the history's tokens plus the tokens of the
// rest of the text, so the history's KV blocks are all hits; otherwise (the history was cut,
// summarized, or the template rewrites earlier turns) the whole text is tokenized again and
// the cache hits whatever leading blocks still match.
//
// Not thread-safe; a plain value (copyable).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "chat/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace hinge::chat {

struct Turn {
  std::string user;
  std::string assistant;
};

struct TurnPrompt {
  std::vector<int32_t> tokens;   // the whole prompt
  std::string text;              // what it renders (tokens[reused:] encode text[consumed:])
  int32_t reused_tokens = 0;     // leading tokens taken from the history as they were
};

class Conversation {
 public:
  // tmpl may be null (plain format); tok and tmpl must outlive the conversation.
  Conversation(const Tokenizer* tok, const ChatTemplate* tmpl, std::string system_prompt = "");

  // The prompt for a new user turn after the conversation so far.
  StatusOr<TurnPrompt> prompt_with(const std::string& user) const;
  // Records a finished turn: its prompt (from prompt_with) and the reply's tokens and text.
  void add_turn(const std::string& user, TurnPrompt prompt, std::span<const int32_t> reply_tokens,
                const std::string& reply_text);

  // The prompt asking the model to summarize the oldest n turns (with the summary so far):
  // the system prompt, those turns, then `instruction` as a user message.
  StatusOr<TurnPrompt> summary_prompt(int32_t n, const std::string& instruction) const;
  // Replaces the oldest n turns (and the summary so far) by `summary`.
  void summarize_oldest(int32_t n, std::string summary);
  // Forgets the oldest n turns (the system prompt and summary stay).
  void drop_oldest(int32_t n);
  // Tokens of the conversation's fixed head (system prompt and summary, without any turn),
  // what a context shift keeps. 0 when there is neither.
  StatusOr<int32_t> head_tokens() const;
  // Where each message of `prompt` (prompt_with(user)'s) starts in its tokens, increasing, for
  // a context shift inside the reply that drops whole turns (chat_turns in chat_prompt.h: only
  // exact boundaries). Empty in the plain format or when the template gives none.
  std::vector<int32_t> turn_starts(const std::string& user, const TurnPrompt& prompt) const;
  void reset();  // no turns, no summary, no history (the system prompt stays)

  int32_t num_turns() const { return static_cast<int32_t>(turns_.size()); }
  const std::vector<Turn>& turns() const { return turns_; }
  const std::string& system_prompt() const { return system_; }
  const std::string& summary() const { return summary_; }
  // Tokens the model has seen: the last prompt and its reply (empty after a reset, a drop or a
  // summary, until the next turn).
  const std::vector<int32_t>& history() const { return history_; }

  // Everything above as JSON (a saved session's conversation), and back. from_json checks every
  // field (types, token ids within the vocabulary) and fails with a message naming it.
  nlohmann::ordered_json to_json() const;
  Status load_json(const nlohmann::ordered_json& j);

 private:
  // The messages array: system (system prompt + summary), the turns, then `extra` user
  // messages; head_in_user puts the system text at the head of the first user message.
  nlohmann::ordered_json messages(int32_t first_turn, int32_t end_turn,
                                  const std::vector<std::string>& extra, bool head_in_user) const;
  StatusOr<std::string> render(int32_t first_turn, int32_t end_turn,
                               const std::vector<std::string>& extra, bool generation) const;
  std::vector<int32_t> encode_full(const std::string& text) const;
  std::string head_text() const;

  const Tokenizer* tok_;
  const ChatTemplate* tmpl_;
  std::string system_;
  std::string summary_;
  std::vector<Turn> turns_;
  std::vector<int32_t> history_;
  std::string history_text_;  // what history_ renders: the last prompt's text + its reply
};

}  // namespace hinge::chat
