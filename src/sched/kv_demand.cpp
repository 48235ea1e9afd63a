#include "sched/kv_demand.h"

#include <algorithm>

#include "common/status.h"

namespace hinge::sched {

int64_t worst_case_kv_blocks(int64_t prompt_tokens, int64_t max_new_tokens, int32_t n,
                             int32_t block_size_tokens, int32_t num_groups) {
  HINGE_CHECK(prompt_tokens >= 1 && max_new_tokens >= 1 && block_size_tokens >= 1 &&
              num_groups >= 1);
  const int64_t bs = block_size_tokens;
  const int64_t max_slots = prompt_tokens + max_new_tokens - 1;
  const int64_t shared = prompt_tokens / bs;
  const int64_t per_sample = (max_slots + bs - 1) / bs - shared;
  const int64_t writers = max_new_tokens > 1 ? std::max(n, 1) : 1;
  return num_groups * (shared + writers * per_sample);
}

int64_t max_new_tokens_within(int64_t limit_blocks, int64_t prompt_tokens, int32_t n,
                              int32_t block_size_tokens, int32_t num_groups,
                              int64_t max_new_limit) {
  if (max_new_limit < 1 ||
      worst_case_kv_blocks(prompt_tokens, 1, n, block_size_tokens, num_groups) > limit_blocks)
    return 0;
  // The worst case grows with max_new_tokens: the largest that fits, by bisection.
  int64_t lo = 1, hi = max_new_limit;
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo + 1) / 2;
    if (worst_case_kv_blocks(prompt_tokens, mid, n, block_size_tokens, num_groups) <= limit_blocks)
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

}  // namespace hinge::sched
