// ContextPolicy::kShift (Scheduler::shift_context): a sequence past the context keeps its sink
// blocks and drops whole blocks after them (whole chat turns where the server knows where they
// start); the blocks it keeps get position offsets for the attention kernels.
#include <algorithm>

#include "sched/scheduler.h"

namespace hinge::sched {

bool Scheduler::shift_context(Request& r) {
  const int32_t bs = config_.block_size_tokens;
  const int32_t window = window_tokens();
  if (r.num_tokens() <= window) return false;
  const int32_t sink_blocks = (std::max(config_.sink_tokens, r.keep_tokens_) + bs - 1) / bs;
  int32_t drop = (r.num_tokens() - window + bs - 1) / bs;
  // Validated by the engine: a window holds the sinks and two more blocks.
  HINGE_CHECK_MSG(sink_blocks + drop < window / bs, "window {} too small for {} sink blocks",
                  window, sink_blocks);
  // Whole turns when the server knows where they start: drop up to the block holding the
  // first turn start at or past the fewest blocks (that turn keeps its header; the block may
  // keep a tail of the turn before), unless that leaves less than one block of the window or
  // reaches past what is computed.
  int32_t drop_turns = window / bs - sink_blocks - 1;
  if (kv_.has_request(r.id()))
    drop_turns = std::min(drop_turns, r.num_computed_tokens_ / bs - sink_blocks);
  for (const int32_t t : r.turn_starts_) {
    if (t / bs < sink_blocks + drop) continue;
    if (t / bs - sink_blocks <= drop_turns) drop = t / bs - sink_blocks;
    break;
  }
  const int32_t first = sink_blocks * bs, n = drop * bs;
  // Turn starts now in the dropped blocks (or the kept ones before them) are gone.
  std::erase_if(r.turn_starts_, [&](int32_t t) { return t < first + n; });
  for (int32_t& t : r.turn_starts_) t -= n;
  if (kv_.has_request(r.id())) {
    HINGE_CHECK(r.num_computed_tokens_ >= first + n);
    const int32_t blocks = kv_.block_table(r.id()).num_blocks();
    r.block_offsets_.resize(static_cast<size_t>(blocks), 0);
    kv_.drop_blocks(r.id(), sink_blocks, drop);
    r.block_offsets_.erase(r.block_offsets_.begin() + sink_blocks,
                           r.block_offsets_.begin() + sink_blocks + drop);
    for (size_t b = static_cast<size_t>(sink_blocks); b < r.block_offsets_.size(); ++b)
      r.block_offsets_[b] += n;
    r.num_computed_tokens_ -= n;
  }
  r.token_ids_.erase(r.token_ids_.begin() + first, r.token_ids_.begin() + first + n);
  const int32_t kept_prompt = r.num_kept_prompt_tokens();
  r.num_dropped_prompt_tokens_ += std::clamp(kept_prompt - first, 0, n);
  r.num_dropped_tokens_ += n;
  ++r.num_shifts_;
  // Its chain hashes and cache entries described the dropped tokens' prefix: no more hits or
  // entries for it (kv_.drop_blocks stopped its publishing).
  r.block_hashes_.clear();
  r.skip_prefix_cache_ = true;
  ++num_context_shifts_;
  num_dropped_tokens_ += n;
  return true;
}

}  // namespace hinge::sched
