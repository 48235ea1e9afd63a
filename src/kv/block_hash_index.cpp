#include "kv/block_hash_index.h"

#include <algorithm>
#include <bit>

namespace hinge::kv {

BlockHashIndex::BlockHashIndex(int32_t max_entries) {
  HINGE_CHECK(max_entries >= 0);
  max_entries_ = static_cast<size_t>(max_entries);
  // At most half full: probe sequences stay short, and one slot is always empty (find ends).
  const size_t cap = std::bit_ceil(std::max<size_t>(2, 2 * max_entries_));
  slots_.resize(cap);
  mask_ = cap - 1;
}

void BlockHashIndex::insert(BlockHash key, int32_t block) {
  HINGE_CHECK_MSG(size_ < max_entries_, "block hash index full ({} entries)", size_);
  HINGE_CHECK(block >= 0);
  size_t i = home(key);
  while (slots_[i].block >= 0) i = (i + 1) & mask_;
  slots_[i] = Slot{key, block};
  ++size_;
}

bool BlockHashIndex::erase(BlockHash key, int32_t block) {
  size_t i = home(key);
  for (;; i = (i + 1) & mask_) {
    if (slots_[i].block < 0) return false;
    if (slots_[i].key == key && slots_[i].block == block) break;
  }
  // Backward shift: pull later entries of the cluster into the hole when their home allows.
  size_t hole = i;
  for (size_t j = (hole + 1) & mask_; slots_[j].block >= 0; j = (j + 1) & mask_) {
    const size_t h = home(slots_[j].key);
    // Entry j may move to the hole iff its home is not in the cyclic range (hole, j].
    const bool home_after_hole = ((j - h) & mask_) < ((j - hole) & mask_);
    if (home_after_hole) continue;
    slots_[hole] = slots_[j];
    hole = j;
  }
  slots_[hole] = Slot{};
  --size_;
  return true;
}

}  // namespace hinge::kv
