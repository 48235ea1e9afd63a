#include "sched/kv_demand.h"

#include <algorithm>

#include "common/status.h"

namespace hinge::sched {

KvDemandShape KvDemandShape::full(int32_t block_size_tokens, int32_t num_groups) {
  HINGE_CHECK(num_groups >= 1);
  return KvDemandShape{block_size_tokens, std::vector<int32_t>(static_cast<size_t>(num_groups), 0),
                       1};
}

KvDemandShape KvDemandShape::of(int32_t block_size_tokens, int32_t num_groups,
                                const std::vector<int32_t>& windows, int32_t max_step_tokens) {
  KvDemandShape s = full(block_size_tokens, num_groups);
  HINGE_CHECK(windows.empty() || windows.size() == static_cast<size_t>(num_groups));
  if (!windows.empty()) s.group_windows = windows;
  s.max_step_tokens = std::max(1, max_step_tokens);
  return s;
}

int64_t worst_case_kv_blocks(int64_t prompt_tokens, int64_t max_new_tokens, int32_t n,
                             const KvDemandShape& shape) {
  HINGE_CHECK(prompt_tokens >= 1 && max_new_tokens >= 1 && shape.block_size_tokens >= 1 &&
              !shape.group_windows.empty() && shape.max_step_tokens >= 1);
  const int64_t bs = shape.block_size_tokens;
  const int64_t max_slots = prompt_tokens + max_new_tokens - 1;
  const int64_t shared = prompt_tokens / bs;
  const int64_t per_sample = (max_slots + bs - 1) / bs - shared;
  const int64_t writers = max_new_tokens > 1 ? std::max(n, 1) : 1;
  const int64_t full = shared + writers * per_sample;
  int64_t total = 0;
  for (int32_t w : shape.group_windows) {
    HINGE_CHECK(w >= 0);
    if (w == 0) {
      total += full;
    } else {
      const int64_t held = (int64_t{w} - 1 + shape.max_step_tokens + bs - 1) / bs + 1;
      total += std::min(full, writers * held);
    }
  }
  return total;
}

int64_t max_new_tokens_within(int64_t limit_blocks, int64_t prompt_tokens, int32_t n,
                              const KvDemandShape& shape, int64_t max_new_limit) {
  if (max_new_limit < 1 || worst_case_kv_blocks(prompt_tokens, 1, n, shape) > limit_blocks)
    return 0;
  // The worst case grows with max_new_tokens: the largest that fits, by bisection.
  int64_t lo = 1, hi = max_new_limit;
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo + 1) / 2;
    if (worst_case_kv_blocks(prompt_tokens, mid, n, shape) <= limit_blocks)
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

int64_t worst_case_kv_blocks(int64_t prompt_tokens, int64_t max_new_tokens, int32_t n,
                             int32_t block_size_tokens, int32_t num_groups) {
  return worst_case_kv_blocks(prompt_tokens, max_new_tokens, n,
                              KvDemandShape::full(block_size_tokens, num_groups));
}

int64_t max_new_tokens_within(int64_t limit_blocks, int64_t prompt_tokens, int32_t n,
                              int32_t block_size_tokens, int32_t num_groups,
                              int64_t max_new_limit) {
  return max_new_tokens_within(limit_blocks, prompt_tokens, n,
                               KvDemandShape::full(block_size_tokens, num_groups), max_new_limit);
}

}  // namespace hinge::sched
