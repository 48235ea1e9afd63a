#include "kv/kv_reclaimer.h"

#include <algorithm>
#include <vector>

#include "common/resident_memory.h"

namespace hinge {

void KvReclaimer::set_limit(int32_t blocks) {
  limit_ = std::clamp(blocks, 0, kv_->pool().num_blocks());
  reconcile();
}

void KvReclaimer::set_budget_limit(int32_t blocks) {
  budget_limit_ = std::clamp(blocks, 0, kv_->pool().num_blocks());
  reconcile();
}

void KvReclaimer::reconcile() {
  const int32_t total = kv_->pool().num_blocks();
  const int32_t target = total - std::min(limit(), total);  // blocks to withhold
  const int32_t have = kv_->num_withheld();
  if (have < target && kv_->pool().num_free_blocks() > 0) {
    const std::span<const kv::BlockId> taken = kv_->withhold(target - have);
    release(taken);
  } else if (have > target) {
    kv_->restore(have - target);
  }
}

int64_t KvReclaimer::shrink() {
  kv_->drop_cached_free();
  const std::vector<kv::BlockId> free = kv_->pool().free_list();
  return release(free);
}

int64_t KvReclaimer::trim(int64_t keep_bytes, bool cached) {
  int64_t resident = arena_->resident_bytes(&resident_);
  if (resident <= keep_bytes) return 0;
  const int64_t block = arena_->bytes_per_block();
  picked_.clear();
  // The free list runs from blocks holding nothing (the head) to the most recently freed
  // cached block (the tail).
  for (kv::BlockId b : kv_->pool().free_list()) {
    if (resident <= keep_bytes) break;
    if (!resident_[static_cast<size_t>(b.value)]) continue;
    if (kv_->pool().cached_hash(b).has_value()) {
      if (!cached) continue;
      kv_->uncache_free_block(b);
    }
    picked_.push_back(b);
    resident -= block;
  }
  if (picked_.empty()) return 0;
  const int64_t advised = arena_->release_pages(picked_);
  bytes_advised_ += advised;
  return advised;
}

int64_t KvReclaimer::release(std::span<const kv::BlockId> blocks) {
  if (blocks.empty()) return 0;
  const int64_t before = process_resident_bytes();
  bytes_advised_ += arena_->release_pages(blocks);
  const int64_t fell = std::max<int64_t>(0, before - process_resident_bytes());
  bytes_released_ += fell;
  return fell;
}

}  // namespace hinge
