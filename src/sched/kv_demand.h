// The one worst-case KV formula: the most blocks a request can ever hold. Used by the
// scheduler (a request that cannot fit even alone is refused), by admission control (its
// reservation) and by the server (the default max_tokens that still fits). Pure functions.
//
// The last sampled token is never computed, so one sequence holds at most
// prompt + max_new_tokens - 1 slots. With n parallel samples the prompt's full blocks are
// shared; each sample writes its own copy of the partial last prompt block and its output,
// except with max_new_tokens == 1, where nothing is written after the fork:
//   shared     = prompt / bs
//   per_sample = ceil((prompt + max_new - 1) / bs) - shared
//   blocks     = groups * (shared + (max_new > 1 ? n : 1) * per_sample)
// Every KV group (kv/kv_spec.h) holds its own blocks for the same positions. A sliding-window
// group (window W) releases the blocks behind its window after every step and adopts none on
// a prefix hit (kv::KvCacheManager), so while a step computes C tokens of one sequence it holds
// at most ceil((W - 1 + C) / bs) + 1 blocks: such a group counts
//   min(the formula above, writers * (ceil((W - 1 + C) / bs) + 1))
// with C the most tokens a sequence computes in one step (the prefill chunk).
#pragma once

#include <cstdint>
#include <vector>

namespace hinge::sched {

// The KV groups a worst case runs over.
struct KvDemandShape {
  int32_t block_size_tokens = 16;
  std::vector<int32_t> group_windows = {0};  // one entry per group: window in tokens, 0 = full
  int32_t max_step_tokens = 1;                // tokens of one sequence per step, at most
  // `num_groups` full-attention groups.
  static KvDemandShape full(int32_t block_size_tokens, int32_t num_groups);
  // num_groups groups with these windows (empty: all full), max_step_tokens per step.
  static KvDemandShape of(int32_t block_size_tokens, int32_t num_groups,
                          const std::vector<int32_t>& windows, int32_t max_step_tokens);
};

int64_t worst_case_kv_blocks(int64_t prompt_tokens, int64_t max_new_tokens, int32_t n,
                             const KvDemandShape& shape);
int64_t max_new_tokens_within(int64_t limit_blocks, int64_t prompt_tokens, int32_t n,
                              const KvDemandShape& shape, int64_t max_new_limit);

// The same over num_groups full-attention groups.

int64_t worst_case_kv_blocks(int64_t prompt_tokens, int64_t max_new_tokens, int32_t n,
                             int32_t block_size_tokens, int32_t num_groups);

// The largest max_new_tokens in [1, max_new_limit] whose worst case fits in limit_blocks; 0
// when not even one token does.
int64_t max_new_tokens_within(int64_t limit_blocks, int64_t prompt_tokens, int32_t n,
                              int32_t block_size_tokens, int32_t num_groups,
                              int64_t max_new_limit);

}  // namespace hinge::sched
