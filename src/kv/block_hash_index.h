// BlockHashIndex: BlockHash -> cached block, the prefix cache's index. Open addressing with
// linear probing in one array sized once (a power of two >= 2 x the block count), so inserting
// and erasing never allocate: a steady decode step that fills a block stays allocation-free.
// Duplicate keys are allowed (vLLM's BlockHashToBlockMap): two blocks computed with the same
// content are both cached, and a hash shared by different content (a collision) is just two
// entries, told apart by the pool's token comparison. Erase uses backward shift (no
// tombstones), so probe sequences stay short. Not thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/status.h"
#include "kv/block_hash.h"

namespace hinge::kv {

class BlockHashIndex {
 public:
  // Room for max_entries entries (one per block at most).
  explicit BlockHashIndex(int32_t max_entries);

  size_t size() const { return size_; }
  // HINGE_CHECK: fewer than max_entries entries.
  void insert(BlockHash key, int32_t block);
  // Removes the entry (key, block); false when there is none.
  bool erase(BlockHash key, int32_t block);
  // The first block under `key` for which accept(block) is true, or -1.
  template <class Accept>
  int32_t find(BlockHash key, Accept&& accept) const {
    for (size_t i = home(key);; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.block < 0) return -1;
      if (s.key == key && accept(s.block)) return s.block;
    }
  }
  bool contains(BlockHash key, int32_t block) const {
    return find(key, [block](int32_t b) { return b == block; }) >= 0;
  }
  // Calls fn(key, block) for every entry (for invariant checks).
  template <class Fn>
  void for_each(Fn&& fn) const {
    for (const Slot& s : slots_)
      if (s.block >= 0) fn(s.key, s.block);
  }

 private:
  struct Slot {
    BlockHash key;
    int32_t block = -1;  // -1: empty
  };
  size_t home(BlockHash key) const { return static_cast<size_t>(key.lo) & mask_; }  // uniform

  std::vector<Slot> slots_;
  size_t mask_ = 0;
  size_t size_ = 0;
  size_t max_entries_ = 0;
};

}  // namespace hinge::kv
