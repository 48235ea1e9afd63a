#include "kv/kv_memory_guard.h"

#include <algorithm>

#include "common/resident_memory.h"

namespace hinge {

int64_t budget_margin_bytes(int64_t budget_bytes) {
  return (int64_t{1} << 20) + budget_bytes / 100;
}

int32_t budget_kv_limit_blocks(int64_t budget_bytes, int64_t rss_bytes, int64_t kv_resident_bytes,
                               int64_t block_bytes, int32_t total_blocks) {
  const int64_t rest = std::max<int64_t>(0, rss_bytes - kv_resident_bytes);
  const int64_t left = budget_bytes - budget_margin_bytes(budget_bytes) - rest;
  if (left <= 0 || block_bytes <= 0) return 0;
  return static_cast<int32_t>(std::min<int64_t>(left / block_bytes, total_blocks));
}

KvMemoryGuard::KvMemoryGuard(kv::KvCacheManager* kv, kv::KvArena* arena, KvReclaimer* reclaimer,
                             const KvMemoryGuardConfig& config)
    : kv_(kv), arena_(arena), reclaimer_(reclaimer), config_(config) {
  stats_.limit_blocks = kv_->pool().num_blocks();
}

void KvMemoryGuard::tick(double now, bool idle) {
  if (!active()) return;
  if (idle) {
    if (trimmed_idle_) return;  // nothing ran since the last idle reading
  } else {
    trimmed_idle_ = false;
    if (now < next_) return;
  }
  next_ = now + config_.interval_s;
  const int64_t rss = process_resident_bytes();
  const int64_t kv_resident = arena_->resident_bytes();
  ++stats_.readings;
  stats_.rss_bytes = rss;
  stats_.rss_peak_bytes = std::max(stats_.rss_peak_bytes, rss);
  stats_.kv_resident_bytes = kv_resident;
  const int32_t total = kv_->pool().num_blocks();
  const int32_t limit = budget_kv_limit_blocks(config_.budget_bytes, rss, kv_resident,
                                               arena_->bytes_per_block(), total);
  if (limit < total) ++stats_.limited_readings;
  stats_.limit_blocks = limit;
  if (limit != reclaimer_->budget_limit() &&
      !(limit >= total && reclaimer_->budget_limit() >= total))
    reclaimer_->set_budget_limit(limit);
  // Free blocks beyond those in use plus the watermark go back to the OS.
  const int64_t in_use =
      int64_t{kv_->pool().counters().num_used_blocks - kv_->num_withheld()} *
      arena_->bytes_per_block();
  const int64_t keep = in_use + config_.low_watermark_bytes;
  if (kv_resident > keep) {
    stats_.trimmed_bytes += reclaimer_->trim(keep, idle);
    stats_.kv_resident_bytes = arena_->resident_bytes();
  }
  if (idle) trimmed_idle_ = true;
}

}  // namespace hinge
