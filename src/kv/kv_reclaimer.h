// KvReclaimer: the engine's side of memory pressure. It keeps at most `limit` blocks of the KV
// arena usable by withholding the rest from the block pool (kv::KvCacheManager::withhold) and
// returning their pages to the OS (kv::KvArena::release_pages), so RSS really falls; blocks a
// request holds are never taken: when the limit is below what is in use, blocks are withheld as
// requests free them (reconcile() each step). shrink() evicts the prefix cache's unused blocks
// and returns the pages of every free block.
//
// Not thread-safe: the engine thread's, like the cache manager and arena it works on.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "kv/kv_arena.h"
#include "kv/kv_cache_manager.h"

namespace hinge {

class KvReclaimer {
 public:
  KvReclaimer(kv::KvCacheManager* kv, kv::KvArena* arena) : kv_(kv), arena_(arena) {}

  // At most `blocks` usable (clamped to [0, total]); applies at once as far as free blocks
  // allow. The total means no limit.
  void set_limit(int32_t blocks);
  // The memory budget's limit (kv/kv_memory_guard.h), kept apart from the pressure level's:
  // the lower of the two is in force. Same clamping and effect as set_limit.
  void set_budget_limit(int32_t blocks);
  int32_t budget_limit() const { return budget_limit_; }
  int32_t limit() const { return std::min(limit_, budget_limit_); }
  bool limited() const { return limit() < kv_->pool().num_blocks(); }
  // Withholds free blocks toward the limit, or gives back what is above it (cheap when met).
  void reconcile();
  // Evicts every cached block no request uses and returns the pages of every free block.
  // Returns the bytes RSS fell by.
  int64_t shrink();
  // Returns the pages of free blocks while the arena has more than keep_bytes resident:
  // blocks holding nothing first (nothing is lost), then, with `cached`, cached blocks least
  // recently used first (their prefix-cache entries dropped: their bytes read as zero after).
  // Blocks a request holds or that are withheld are not touched. Returns the bytes advised.
  int64_t trim(int64_t keep_bytes, bool cached);
  // What RSS fell by across the releases so far (measured around each madvise; other threads'
  // allocations at the same moment can only make it smaller), and the page-rounded bytes
  // advised (pages never touched, or released twice, count there too).
  int64_t bytes_released() const { return bytes_released_; }
  int64_t bytes_advised() const { return bytes_advised_; }

 private:
  int64_t release(std::span<const kv::BlockId> blocks);

  kv::KvCacheManager* kv_;
  kv::KvArena* arena_;
  int32_t limit_ = INT32_MAX;
  int32_t budget_limit_ = INT32_MAX;
  std::vector<uint8_t> resident_;  // trim's per-block flags (KvArena::resident_bytes)
  std::vector<kv::BlockId> picked_;
  int64_t bytes_released_ = 0;
  int64_t bytes_advised_ = 0;
};

}  // namespace hinge
