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
  if (m.has_hash) {
    ++num_cached_free_;
    owner_push(b);
  }
}

void BlockPool::push_head(int32_t b) {
  BlockMeta& m = meta_[static_cast<size_t>(b)];
  m.prev = kNone;
  m.next = head_;
  if (head_ != kNone)
    meta_[static_cast<size_t>(head_)].prev = b;
  else
    tail_ = b;
  head_ = b;
  ++num_free_;
  if (m.has_hash) {
    ++num_cached_free_;
    owner_push(b);
  }
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
  if (m.has_hash) {
    --num_cached_free_;
    owner_unlink(b);
  }
}

BlockPool::Owner& BlockPool::owner(int32_t o) {
  HINGE_CHECK_MSG(o >= 0 && o < kMaxCacheOwners, "cache owner {} out of range", o);
  if (static_cast<size_t>(o) >= owners_.size()) owners_.resize(static_cast<size_t>(o) + 1);
  return owners_[static_cast<size_t>(o)];
}

void BlockPool::owner_push(int32_t b) {
  BlockMeta& m = meta_[static_cast<size_t>(b)];
  Owner& o = owner(m.owner);
  m.oprev = o.tail;
  m.onext = kNone;
  if (o.tail != kNone)
    meta_[static_cast<size_t>(o.tail)].onext = b;
  else
    o.head = b;
  o.tail = b;
  ++o.count;
  m.on_owner_list = true;
}

void BlockPool::owner_unlink(int32_t b) {
  BlockMeta& m = meta_[static_cast<size_t>(b)];
  if (!m.on_owner_list) return;
  Owner& o = owners_[static_cast<size_t>(m.owner)];
  if (m.oprev != kNone)
    meta_[static_cast<size_t>(m.oprev)].onext = m.onext;
  else
    o.head = m.onext;
  if (m.onext != kNone)
    meta_[static_cast<size_t>(m.onext)].oprev = m.oprev;
  else
    o.tail = m.oprev;
  m.oprev = m.onext = kNone;
  --o.count;
  m.on_owner_list = false;
}

void BlockPool::drop_free_entry(int32_t b) {
  unlink(b);
  drop_hash(meta_[static_cast<size_t>(b)], b);
  push_head(b);
}

void BlockPool::enforce_quota(int32_t o) {
  if (static_cast<size_t>(o) >= owners_.size()) return;
  while (owners_[static_cast<size_t>(o)].count > owners_[static_cast<size_t>(o)].max_cached_free) {
    drop_free_entry(owners_[static_cast<size_t>(o)].head);
    ++num_quota_evictions_;
  }
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
    if (--m.ref_count > 0) continue;
    if (m.has_hash) {
      push_tail(id.value);
      enforce_quota(m.owner);
    } else {
      push_head(id.value);  // holds nothing worth keeping: reused first
    }
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
  if (m.group == 0 && !announced(m.hash)) {
    --num_announced_;
    if (log_ != nullptr) log_->removed(external_block_hash(m.hash));
  }
}

bool BlockPool::announced(BlockHash hash) const {
  return cached_.find(hash, [&](int32_t c) { return meta_[static_cast<size_t>(c)].group == 0; }) >= 0;
}

bool BlockPool::expired(const BlockMeta& m, double now) const {
  if (static_cast<size_t>(m.owner) >= owners_.size()) return false;
  const double ttl = owners_[static_cast<size_t>(m.owner)].ttl_s;
  return ttl > 0 && now - m.cached_at > ttl;
}

std::optional<BlockId> BlockPool::lookup(BlockHash hash, BlockHash parent,
                                         std::span<const int32_t> block_tokens, int32_t group,
                                         const CacheNamespace& ns, double now) const {
  if (block_tokens.size() != static_cast<size_t>(block_size_tokens_)) return std::nullopt;
  const int32_t b = cached_.find(hash, [&](int32_t c) {
    const BlockMeta& m = meta_[static_cast<size_t>(c)];
    if (!(m.parent == parent) || m.group != group || !(m.ns == ns) || expired(m, now))
      return false;
    const auto stored = tokens_of(c);
    return std::equal(stored.begin(), stored.end(), block_tokens.begin());
  });
  if (b < 0) return std::nullopt;
  return BlockId(b);
}

bool BlockPool::cache_block(BlockId id, BlockHash hash, BlockHash parent,
                            std::span<const int32_t> block_tokens, int32_t group,
                            const CacheNamespace& ns, int32_t owner_id, double now,
                            uint64_t epoch) {
  BlockMeta& m = meta(id);
  HINGE_CHECK_MSG(m.ref_count > 0, "caching free block {}", id.value);
  HINGE_CHECK(block_tokens.size() == static_cast<size_t>(block_size_tokens_));
  if (m.has_hash) {
    HINGE_CHECK_MSG(m.hash == hash && m.parent == parent && m.group == group && m.ns == ns,
                    "block {} re-cached as different content", id.value);
    return false;
  }
  owner(owner_id);  // range check, table entry
  const bool announce = group == 0 && !announced(hash);
  if (announce) ++num_announced_;
  cached_.insert(hash, id.value);
  m.has_hash = true;
  m.group = group;
  m.owner = owner_id;
  m.cached_at = now;
  m.epoch = epoch;
  m.hash = hash;
  m.parent = parent;
  m.ns = ns;
  std::copy(block_tokens.begin(), block_tokens.end(),
            tokens_.begin() + static_cast<ptrdiff_t>(id.value) * block_size_tokens_);
  return announce;
}

void BlockPool::uncache(BlockId id) {
  BlockMeta& m = meta(id);
  if (!m.has_hash) return;
  if (m.ref_count == 0)
    drop_free_entry(id.value);
  else
    drop_hash(m, id.value);
}

void BlockPool::set_owner_policy(int32_t o, int32_t max_cached_free, double ttl_s) {
  HINGE_CHECK(max_cached_free >= 0 && ttl_s >= 0);
  Owner& w = owner(o);
  w.max_cached_free = max_cached_free;
  w.ttl_s = ttl_s;
  enforce_quota(o);
}

int32_t BlockPool::uncache_owner(int32_t o, const uint64_t* keep_epoch) {
  int32_t n = 0;
  for (int32_t b = 0; b < num_blocks(); ++b) {
    const BlockMeta& m = meta_[static_cast<size_t>(b)];
    if (!m.has_hash || m.owner != o || (keep_epoch != nullptr && m.epoch == *keep_epoch)) continue;
    uncache(BlockId(b));
    ++n;
  }
  return n;
}

int32_t BlockPool::expire(double now) {
  int32_t n = 0;
  for (int32_t b = 0; b < num_blocks(); ++b) {
    const BlockMeta& m = meta_[static_cast<size_t>(b)];
    if (!m.has_hash || !expired(m, now)) continue;
    uncache(BlockId(b));
    ++n;
  }
  num_expired_ += n;
  return n;
}

int32_t BlockPool::uncache_free() {
  int32_t n = 0;
  for (int32_t b = 0; b < num_blocks(); ++b) {
    const BlockMeta& m = meta_[static_cast<size_t>(b)];
    if (m.ref_count != 0 || !m.has_hash) continue;
    drop_free_entry(b);
    ++n;
  }
  num_evictions_ += n;
  return n;
}

int32_t BlockPool::uncache_all() {
  KvEventLog* log = std::exchange(log_, nullptr);
  int32_t n = 0;
  for (int32_t b = 0; b < num_blocks(); ++b) {
    if (!meta_[static_cast<size_t>(b)].has_hash) continue;
    uncache(BlockId(b));
    ++n;
  }
  log_ = log;
  if (log_ != nullptr) log_->all_cleared();
  return n;
}

int32_t BlockPool::owner_cached_free(int32_t o) const {
  return static_cast<size_t>(o) < owners_.size() ? owners_[static_cast<size_t>(o)].count : 0;
}

int32_t BlockPool::owner_cached(int32_t o) const {
  int32_t n = 0;
  for (const BlockMeta& m : meta_) n += m.has_hash && m.owner == o ? 1 : 0;
  return n;
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
  c.num_quota_evictions = num_quota_evictions_;
  c.num_expired = num_expired_;
  c.num_cached_hashes = num_announced_;
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
  {
    std::vector<BlockHash> group0;
    for (const BlockMeta& m : meta_)
      if (m.has_hash && m.group == 0) group0.push_back(m.hash);
    std::sort(group0.begin(), group0.end());
    const auto distinct = std::unique(group0.begin(), group0.end()) - group0.begin();
    if (distinct != num_announced_)
      return Status::Errorf("announced hashes {} != {} distinct in group 0", num_announced_, distinct);
  }
  if (shared != num_shared_) return Status::Errorf("shared count {} != {}", num_shared_, shared);
  // Each owner's list holds exactly its cached free blocks.
  int32_t listed = 0;
  for (size_t o = 0; o < owners_.size(); ++o) {
    int32_t c = 0, p = kNone;
    for (int32_t b = owners_[o].head; b != kNone; b = meta_[static_cast<size_t>(b)].onext) {
      if (b < 0 || b >= n || c > n) return Status::Errorf("owner {} list: bad link {}", o, b);
      const BlockMeta& m = meta_[static_cast<size_t>(b)];
      if (!m.on_owner_list || !m.has_hash || m.ref_count != 0 || m.owner != static_cast<int32_t>(o))
        return Status::Errorf("owner {} list: block {} is not its cached free block", o, b);
      if (m.oprev != p) return Status::Errorf("owner {} list: block {} prev {} != {}", o, b, m.oprev, p);
      p = b;
      ++c;
    }
    if (p != owners_[o].tail) return Status::Errorf("owner {} list: tail {} != last {}", o, owners_[o].tail, p);
    if (c != owners_[o].count) return Status::Errorf("owner {} list: length {} != {}", o, c, owners_[o].count);
    if (c > owners_[o].max_cached_free)
      return Status::Errorf("owner {}: {} cached free blocks over its quota {}", o, c, owners_[o].max_cached_free);
    listed += c;
  }
  if (listed != num_cached_free_)
    return Status::Errorf("owner lists hold {} blocks, {} cached free", listed, num_cached_free_);
  return Status::Ok();
}

}  // namespace hinge::kv
