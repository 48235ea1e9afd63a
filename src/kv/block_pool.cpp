#include "kv/block_pool.h"

#include <algorithm>
#include <utility>

namespace hinge::kv {

BlockPool::BlockPool(int32_t num_blocks, int32_t block_size_tokens)
    : block_size_tokens_(block_size_tokens),
      meta_(static_cast<size_t>(num_blocks)),
      tokens_(static_cast<size_t>(num_blocks) * static_cast<size_t>(block_size_tokens)),
      cached_(num_blocks) {
  HINGE_CHECK(num_blocks >= 0 && block_size_tokens > 0);
  for (int32_t b = 0; b < num_blocks; ++b) push_tail(b);
}

void BlockPool::push_tail(int32_t b) {
  BlockMeta& m = meta_[static_cast<size_t>(b)];
  m.prev = tail_;
  m.next = kNone;
  if (tail_ != kNone)
    meta_[static_cast<size_t>(tail_)].next = b;
  else
    head_ = b;
  tail_ = b;
  ++num_free_;
  if (m.has_hash) ++num_cached_free_;
}

void BlockPool::unlink(int32_t b) {
  BlockMeta& m = meta_[static_cast<size_t>(b)];
  if (m.prev != kNone)
    meta_[static_cast<size_t>(m.prev)].next = m.next;
  else
    head_ = m.next;
  if (m.next != kNone)
    meta_[static_cast<size_t>(m.next)].prev = m.prev;
  else
    tail_ = m.prev;
  m.prev = m.next = kNone;
  --num_free_;
  if (m.has_hash) --num_cached_free_;
}

void BlockPool::allocate(int32_t n, std::vector<BlockId>* out) {
  HINGE_CHECK_MSG(can_allocate(n), "allocate({}) with {} free blocks", n, num_free_);
  for (int32_t i = 0; i < n; ++i) {
    const int32_t b = head_;
    unlink(b);
    BlockMeta& m = meta_[static_cast<size_t>(b)];
    if (m.has_hash) {
      drop_hash(m, b);
      ++num_evictions_;
    }
    m.ref_count = 1;
    ++m.generation;
    out->push_back(BlockId(b));
  }
}

std::vector<BlockId> BlockPool::allocate(int32_t n) {
  std::vector<BlockId> out;
  out.reserve(static_cast<size_t>(std::max(n, 0)));
  allocate(n, &out);
  return out;
}

void BlockPool::free(std::span<const BlockId> blocks) {
  for (BlockId id : blocks) {
    BlockMeta& m = meta(id);
    HINGE_CHECK_MSG(m.ref_count > 0, "free of free block {}", id.value);
    if (m.ref_count == 2) --num_shared_;
    if (--m.ref_count == 0) push_tail(id.value);
  }
}

void BlockPool::ref(BlockId id) {
  BlockMeta& m = meta(id);
  if (m.ref_count == 0) unlink(id.value);
  if (m.ref_count == 1) ++num_shared_;
  ++m.ref_count;
}

void BlockPool::drop_hash(BlockMeta& m, int32_t b) {
  const bool erased = cached_.erase(m.hash, b);
  HINGE_CHECK(erased);
  m.has_hash = false;
}

std::optional<BlockId> BlockPool::lookup(BlockHash hash, BlockHash parent,
                                         std::span<const int32_t> block_tokens,
                                         int32_t group) const {
  if (block_tokens.size() != static_cast<size_t>(block_size_tokens_)) return std::nullopt;
  const int32_t b = cached_.find(hash, [&](int32_t c) {
    const BlockMeta& m = meta_[static_cast<size_t>(c)];
    if (!(m.parent == parent) || m.group != group) return false;
    const auto stored = tokens_of(c);
    return std::equal(stored.begin(), stored.end(), block_tokens.begin());
  });
  if (b < 0) return std::nullopt;
  return BlockId(b);
}

void BlockPool::cache_block(BlockId id, BlockHash hash, BlockHash parent,
                            std::span<const int32_t> block_tokens, int32_t group) {
  BlockMeta& m = meta(id);
  HINGE_CHECK_MSG(m.ref_count > 0, "caching free block {}", id.value);
  HINGE_CHECK(block_tokens.size() == static_cast<size_t>(block_size_tokens_));
  if (m.has_hash) {
    HINGE_CHECK_MSG(m.hash == hash && m.parent == parent && m.group == group,
                    "block {} re-cached as different content", id.value);
    return;
  }
  cached_.insert(hash, id.value);
  m.has_hash = true;
  m.group = group;
  m.hash = hash;
  m.parent = parent;
  std::copy(block_tokens.begin(), block_tokens.end(),
            tokens_.begin() + static_cast<ptrdiff_t>(id.value) * block_size_tokens_);
}

void BlockPool::uncache(BlockId id) {
  BlockMeta& m = meta(id);
  if (!m.has_hash) return;
  if (m.ref_count == 0) --num_cached_free_;
  drop_hash(m, id.value);
}

std::optional<BlockHash> BlockPool::cached_hash(BlockId id) const {
  const BlockMeta& m = meta(id);
  if (!m.has_hash) return std::nullopt;
  return m.hash;
}

std::vector<BlockId> BlockPool::free_list() const {
  std::vector<BlockId> out;
  out.reserve(static_cast<size_t>(num_free_));
  for (int32_t b = head_; b != kNone; b = meta_[static_cast<size_t>(b)].next)
    out.push_back(BlockId(b));
  return out;
}

BlockPoolCounters BlockPool::counters() const {
  BlockPoolCounters c;
  c.num_total_blocks = num_blocks();
  c.num_free_blocks = num_free_;
  c.num_used_blocks = num_blocks() - num_free_;
  c.num_cached_free_blocks = num_cached_free_;
  c.num_shared_blocks = num_shared_;
  c.num_evictions = num_evictions_;
  return c;
}

std::string BlockPool::render_map(int32_t blocks_per_line) const {
  HINGE_CHECK(blocks_per_line > 0);
  std::string out;
  for (int32_t b = 0; b < num_blocks(); ++b) {
    const BlockMeta& m = meta_[static_cast<size_t>(b)];
    char c = '#';
    if (m.ref_count == 0)
      c = m.has_hash ? 'c' : '.';
    else if (m.ref_count > 1)
      c = 'S';
    out.push_back(c);
    if ((b + 1) % blocks_per_line == 0 || b + 1 == num_blocks()) out.push_back('\n');
  }
  return out;
}

Status BlockPool::check_invariants() const {
  const int32_t n = num_blocks();
  std::vector<char> on_list(static_cast<size_t>(n), 0);
  int32_t count = 0;
  int32_t prev = kNone;
  for (int32_t b = head_; b != kNone; b = meta_[static_cast<size_t>(b)].next) {
    if (b < 0 || b >= n) return Status::Errorf("free list: bad index {}", b);
    if (on_list[static_cast<size_t>(b)]) return Status::Errorf("free list: cycle at {}", b);
    on_list[static_cast<size_t>(b)] = 1;
    const BlockMeta& m = meta_[static_cast<size_t>(b)];
    if (m.prev != prev) return Status::Errorf("free list: block {} prev {} != {}", b, m.prev, prev);
    if (m.ref_count != 0) return Status::Errorf("free list: block {} has ref {}", b, m.ref_count);
    prev = b;
    ++count;
  }
  if (prev != tail_) return Status::Errorf("free list: tail {} != last {}", tail_, prev);
  if (count != num_free_) return Status::Errorf("free list: length {} != {}", count, num_free_);
  int32_t cached_free = 0, shared = 0, with_hash = 0;
  for (int32_t b = 0; b < n; ++b) {
    const BlockMeta& m = meta_[static_cast<size_t>(b)];
    if (m.ref_count < 0) return Status::Errorf("block {}: ref {}", b, m.ref_count);
    if (m.ref_count == 0 && !on_list[static_cast<size_t>(b)])
      return Status::Errorf("block {}: ref 0 but not on the free list", b);
    if (m.ref_count > 1) ++shared;
    if (m.has_hash) {
      ++with_hash;
      if (m.ref_count == 0) ++cached_free;
      if (!cached_.contains(m.hash, b))
        return Status::Errorf("block {}: hash {:x} not indexed for it", b, m.hash.lo);
    }
  }
  Status bad = Status::Ok();
  cached_.for_each([&](BlockHash h, int32_t b) {
    if (!bad.ok()) return;
    if (b < 0 || b >= n) {
      bad = Status::Errorf("hash index: bad block {}", b);
      return;
    }
    const BlockMeta& m = meta_[static_cast<size_t>(b)];
    if (!m.has_hash || !(m.hash == h))
      bad = Status::Errorf("hash index: {:x} -> block {} which does not hold it", h.lo, b);
  });
  HINGE_RETURN_IF_ERROR(bad);
  if (with_hash != static_cast<int32_t>(cached_.size()))
    return Status::Errorf("hash index size {} != hashed blocks {}", cached_.size(), with_hash);
  if (cached_free != num_cached_free_)
    return Status::Errorf("cached-free count {} != {}", num_cached_free_, cached_free);
  if (shared != num_shared_) return Status::Errorf("shared count {} != {}", num_shared_, shared);
  return Status::Ok();
}

}  // namespace hinge::kv
