// Counters of the KV block pool and cache manager, shared with the public Engine API
// (EngineStats::kv). Plain data.
#pragma once

#include <cstdint>

namespace hinge::kv {

struct BlockPoolCounters {
  int32_t num_total_blocks = 0;
  int32_t num_free_blocks = 0;         // ref 0 (includes cached-free)
  int32_t num_used_blocks = 0;         // ref > 0
  int32_t num_cached_free_blocks = 0;  // ref 0 and holding a hash: evictable prefix cache
  int32_t num_shared_blocks = 0;       // ref > 1
  int64_t num_evictions = 0;           // cached hashes dropped to reuse a block
  int64_t num_quota_evictions = 0;     // dropped because their owner was over its quota
  int64_t num_expired = 0;             // dropped by expire() past their owner's TTL
  int32_t num_cached_hashes = 0;       // distinct block hashes cached (KV events' set, group 0)
};

struct KvCacheStats {
  BlockPoolCounters pool;
  int32_t num_requests = 0;
  // Prefix cache queries, counted once per admission: when allocate_slots adopts the
  // ComputedBlocks of get_computed_blocks (hit or miss). A lookup whose allocation fails (the
  // request waits and looks up again later) counts nothing. A request re-admitted after a
  // preemption is a new admission and counts again (prompt + output so far).
  int64_t num_prefix_query_tokens = 0;  // tokens looked up and adopted
  int64_t num_prefix_hit_tokens = 0;    // of which found cached
  int64_t num_prefix_public_hit_tokens = 0;  // of which in public-prefix blocks
  int64_t num_cow_copies = 0;
  int64_t num_window_released_blocks = 0;  // released behind sliding windows
  int32_t num_withheld_blocks = 0;  // taken out of use under memory pressure (in num_used)
};

}  // namespace hinge::kv
