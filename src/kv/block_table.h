// BlockTable: one request's logical -> physical block map. Logical block i holds token
// positions [i * block_size, (i + 1) * block_size). Not thread-safe (engine thread only).
//
//   positions  0 .. 15 | 16 .. 31 | 32 .. 39 (partial)
//   table      [  7    ,    3     ,    12   ]
//   slot(p) = table[p / block_size] * block_size + p % block_size
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "common/status.h"
#include "kv/kv_ids.h"

namespace hinge::kv {

class BlockTable {
 public:
  int32_t num_blocks() const { return static_cast<int32_t>(blocks_.size()); }
  bool empty() const { return blocks_.empty(); }
  BlockId operator[](int32_t i) const {
    HINGE_CHECK(i >= 0 && i < num_blocks());
    return blocks_[static_cast<size_t>(i)];
  }
  BlockId back() const { return (*this)[num_blocks() - 1]; }
  std::span<const BlockId> blocks() const { return blocks_; }

  void push_back(BlockId b) { blocks_.push_back(b); }
  void set(int32_t i, BlockId b) {
    HINGE_CHECK(i >= 0 && i < num_blocks());
    blocks_[static_cast<size_t>(i)] = b;
  }
  void clear() { blocks_.clear(); }
  // Removes entries [first, first + count) (later entries move down).
  void erase(int32_t first, int32_t count) {
    HINGE_CHECK(first >= 0 && count >= 0 && first + count <= num_blocks());
    blocks_.erase(blocks_.begin() + first, blocks_.begin() + first + count);
  }
  void reserve(size_t n) { blocks_.reserve(n); }
  size_t capacity() const { return blocks_.capacity(); }

  // Physical KV slot of token position `position` (must lie inside the table).
  int64_t slot(int64_t position, int32_t block_size_tokens) const;

 private:
  std::vector<BlockId> blocks_;
};

}  // namespace hinge::kv
