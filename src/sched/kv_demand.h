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
// Every KV group (kv/kv_spec.h) holds its own blocks for the same positions.
#pragma once

#include <cstdint>

namespace hinge::sched {

int64_t worst_case_kv_blocks(int64_t prompt_tokens, int64_t max_new_tokens, int32_t n,
                             int32_t block_size_tokens, int32_t num_groups);

// The largest max_new_tokens in [1, max_new_limit] whose worst case fits in limit_blocks; 0
// when not even one token does.
int64_t max_new_tokens_within(int64_t limit_blocks, int64_t prompt_tokens, int32_t n,
                              int32_t block_size_tokens, int32_t num_groups,
                              int64_t max_new_limit);

}  // namespace hinge::sched
