#include "kv/kv_reclaimer.h"

#include <algorithm>
#include <vector>

#include "common/resident_memory.h"

namespace hinge {

void KvReclaimer::set_limit(int32_t blocks) {
  limit_ = std::clamp(blocks, 0, kv_->pool().num_blocks());
  reconcile();
}

void KvReclaimer::reconcile() {
  const int32_t total = kv_->pool().num_blocks();
  const int32_t target = total - std::min(limit_, total);  // blocks to withhold
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

int64_t KvReclaimer::release(std::span<const kv::BlockId> blocks) {
  if (blocks.empty()) return 0;
  const int64_t before = process_resident_bytes();
  bytes_advised_ += arena_->release_pages(blocks);
  const int64_t fell = std::max<int64_t>(0, before - process_resident_bytes());
  bytes_released_ += fell;
  return fell;
}

}  // namespace hinge
