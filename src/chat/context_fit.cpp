#include "chat/context_fit.h"

#include <algorithm>

#include <fmt/format.h>

namespace hinge::chat {

bool parse_chat_context_policy(const std::string& name, ChatContextPolicy* out) {
  if (name == "error") *out = ChatContextPolicy::kError;
  else if (name == "shift") *out = ChatContextPolicy::kShift;
  else if (name == "summarize") *out = ChatContextPolicy::kSummarize;
  else return false;
  return true;
}

namespace {

bool fits(const TurnPrompt& p, const FitConfig& c, double share = 1.0) {
  return static_cast<int64_t>(p.tokens.size()) + c.reply_reserve <=
         static_cast<int64_t>(c.context * share);
}

}  // namespace

StatusOr<TurnPrompt> fit_turn(Conversation* conv, const std::string& user, const FitConfig& config,
                              const Summarizer& summarize, FitReport* report) {
  *report = FitReport{};
  HINGE_ASSIGN_OR_RETURN(TurnPrompt p, conv->prompt_with(user));
  report->tokens_before = report->tokens_after = static_cast<int32_t>(p.tokens.size());
  if (fits(p, config)) return p;
  if (config.policy == ChatContextPolicy::kError)
    return Status::Errorf(
        "the conversation with this message is {} tokens and leaves no room for a {}-token reply "
        "in the {}-token context: /reset (or /save it first), or run with --context-policy shift "
        "or summarize", p.tokens.size(), config.reply_reserve, config.context);

  Conversation work = *conv;
  if (config.policy == ChatContextPolicy::kSummarize && work.num_turns() > 0) {
    // All but the latest turn, fewer while the summary request itself does not fit.
    for (int32_t n = std::max(1, work.num_turns() - 1); n >= 1; --n) {
      HINGE_ASSIGN_OR_RETURN(TurnPrompt sp, work.summary_prompt(n, config.summary_instruction));
      if (static_cast<int64_t>(sp.tokens.size()) + config.summary_tokens > config.context) continue;
      HINGE_ASSIGN_OR_RETURN(std::string summary, summarize(sp, config.summary_tokens));
      work.summarize_oldest(n, std::move(summary));
      report->summarized_turns = n;
      break;
    }
    HINGE_ASSIGN_OR_RETURN(p, work.prompt_with(user));
  }
  const double refill = std::clamp(config.refill_share, 0.1, 1.0);
  while (!fits(p, config, refill) && work.num_turns() > 0) {
    work.drop_oldest(1);
    ++report->dropped_turns;
    HINGE_ASSIGN_OR_RETURN(p, work.prompt_with(user));
  }
  if (!fits(p, config))
    return Status::Errorf(
        "this message alone is {} tokens with the system prompt{} and leaves no room for a "
        "{}-token reply in the {}-token context: send a shorter one, or raise --ctx-size",
        p.tokens.size(), work.summary().empty() ? "" : " and summary", config.reply_reserve,
        config.context);
  report->tokens_after = static_cast<int32_t>(p.tokens.size());
  *conv = std::move(work);
  return p;
}

}  // namespace hinge::chat
