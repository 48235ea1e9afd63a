// Fitting a chat's next turn into the context (`hinge chat --context-policy`), at turn
// boundaries — a turn is never cut in half:
//   error      the turn is refused with what to do (nothing changes)
//   shift      the oldest turns are dropped until the prompt and a reply fit in refill_share of
//              the context; the system prompt (and a summary) always stay
//   summarize  the oldest turns (all but the latest) are replaced by a summary the model writes
//              itself (FitConfig::summary_instruction, at most summary_tokens), rolling: the
//              previous summary is part of what is summarized; when that cannot make room
//              (the summary request itself does not fit, or the latest turn alone is too long)
//              the oldest turns are dropped as with shift
// Rewriting the history costs prefix-cache hits (the blocks after the system prompt no longer
// match); FitReport says what was done so the caller can show it.
//
// Pure bookkeeping over Conversation; the summary is written by a callback (the engine in
// `hinge chat`, a fake in tests).
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "chat/conversation.h"
#include "common/status.h"

namespace hinge::chat {

enum class ChatContextPolicy { kError, kShift, kSummarize };
// "error", "shift", "summarize"; false for anything else.
bool parse_chat_context_policy(const std::string& name, ChatContextPolicy* out);

struct FitConfig {
  ChatContextPolicy policy = ChatContextPolicy::kError;
  int32_t context = 0;        // tokens the model's window holds
  int32_t reply_reserve = 0;  // room a reply needs at least, in tokens
  std::string summary_instruction =
      "Summarize our conversation so far in a few sentences: the facts, names and decisions "
      "that matter for what comes next.";
  int32_t summary_tokens = 128;
  // A rewrite makes the prompt and reply_reserve fit in this share of the context, not just in
  // all of it, so that the next turns do not each rewrite again (every rewrite costs the cache
  // hits after the system prompt; see bench/chat-context).
  double refill_share = 0.75;
};

struct FitReport {
  int32_t dropped_turns = 0;
  int32_t summarized_turns = 0;
  int32_t tokens_before = 0;  // the prompt as it would have been
  int32_t tokens_after = 0;   // the prompt that fits
  bool rewrote() const { return dropped_turns > 0 || summarized_turns > 0; }
};

// Writes a summary: given the summary request's prompt and a token budget, returns its text.
using Summarizer = std::function<StatusOr<std::string>(const TurnPrompt& prompt, int32_t max_tokens)>;

// The prompt for `user` after making room under config.policy. On error `conv` is unchanged
// (the message says why and what to do); on success it holds the rewritten history.
StatusOr<TurnPrompt> fit_turn(Conversation* conv, const std::string& user, const FitConfig& config,
                              const Summarizer& summarize, FitReport* report);

}  // namespace hinge::chat
