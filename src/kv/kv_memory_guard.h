// KvMemoryGuard: the memory budget held while running, not only sized at start. Between steps
// (at most every interval, and once when the engine goes idle) it reads the process's RSS and
// the KV arena's resident bytes, and:
//   1. limits the KV blocks usable to what the budget leaves beside everything else resident
//      (RSS - KV resident): the arena was sized for the budget at start, so this bites only
//      when the rest grew past its reserve (heap, connections, mapped weight pages read back).
//      The limit withholds free blocks (holding nothing first, then cached ones least recently
//      used: the prefix cache shrinks first) and returns their pages; when requests hold more
//      than the limit, the scheduler cannot allocate and preempts by recompute (lowest priority,
//      latest arrival) instead of growing (KvReclaimer::set_budget_limit);
//   2. returns to the OS the pages of free blocks beyond the blocks in use plus a low watermark
//      (blocks holding nothing at any time; cached blocks too once no request is left), so RSS
//      follows use rather than the peak.
// Inactive without a budget.
//
//   limit = floor((budget - margin - (RSS - KV resident)) / block bytes)
//   margin = 1 MiB + 1 % of the budget     (what the rest may grow by between two readings)
//
// Not thread-safe: the engine thread's, like the reclaimer and arena it works on.
#pragma once

#include <cstdint>

#include "kv/kv_arena.h"
#include "kv/kv_cache_manager.h"
#include "kv/kv_reclaimer.h"

namespace hinge {

struct KvMemoryGuardConfig {
  int64_t budget_bytes = 0;         // 0: the guard does nothing
  int64_t low_watermark_bytes = 0;  // free KV kept resident beyond the blocks in use
  double interval_s = 0.05;         // between readings while requests run
};

struct KvMemoryGuardStats {
  int64_t rss_bytes = 0;            // at the last reading
  int64_t rss_peak_bytes = 0;       // the highest reading
  int64_t kv_resident_bytes = 0;    // at the last reading
  int32_t limit_blocks = 0;         // the budget's limit now (the total: none)
  int64_t limited_readings = 0;     // readings whose limit was below the total
  int64_t trimmed_bytes = 0;        // advised back to the OS beyond the low watermark
  int64_t readings = 0;
  int64_t overshoots = 0;           // steps the engine raised the limit so one request goes on
};

// The blocks the budget leaves to the KV arena, clamped to [0, total_blocks].
int32_t budget_kv_limit_blocks(int64_t budget_bytes, int64_t rss_bytes, int64_t kv_resident_bytes,
                               int64_t block_bytes, int32_t total_blocks);
int64_t budget_margin_bytes(int64_t budget_bytes);

class KvMemoryGuard {
 public:
  KvMemoryGuard(kv::KvCacheManager* kv, kv::KvArena* arena, KvReclaimer* reclaimer,
                const KvMemoryGuardConfig& config);

  bool active() const { return config_.budget_bytes > 0; }
  // A reading when `now` (seconds, any steady clock) is past the interval, or at once when
  // `idle` (no request left: cached blocks beyond the watermark go too).
  void tick(double now, bool idle);
  const KvMemoryGuardStats& stats() const { return stats_; }
  void count_overshoot() { ++stats_.overshoots; }
  const KvMemoryGuardConfig& config() const { return config_; }

 private:
  kv::KvCacheManager* kv_;
  kv::KvArena* arena_;
  KvReclaimer* reclaimer_;
  KvMemoryGuardConfig config_;
  KvMemoryGuardStats stats_;
  double next_ = 0;
  bool trimmed_idle_ = false;  // an idle reading trimmed already, nothing ran since
};

}  // namespace hinge
