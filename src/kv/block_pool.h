// BlockPool: the physical KV blocks of the arena, their reference counts, the LRU free list and
// the prefix cache index (hash -> block). Pure bookkeeping: no KV bytes live here.
// Not thread-safe: owned and used by the engine thread only.
//
// Block states (one char each in render_map()):
//   '.' free      ref 0, no hash              on the free list
//   'c' cached    ref 0, holds a cached hash  on the free list, in the hash map (revivable)
//   '#' used      ref 1
//   'S' shared    ref > 1 (prefix hit or fork)
// A used/shared block may also hold a hash (a full, cached block of a live request).
//
// Invariants (check_invariants()):
//   - the free list holds exactly the blocks with ref 0, each once; num_free_blocks() is its
//     length; prev/next links agree;
//   - the hash map holds (h -> b) iff block b holds hash h;
//   - num_cached_free / num_shared counters match a recount.
//
// Free list order is LRU: allocate() takes from the head (evicting a cached hash there), free()
// appends to the tail in the order given. Callers free a request's blocks last-to-first, so the
// tail of a sequence is evicted first and shared heads live longest. ref() of a cached free
// block (a prefix hit) unlinks it in O(1).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/status.h"
#include "kv/block_hash.h"
#include "kv/kv_ids.h"

namespace hinge::kv {

// What a cached block's KV depends on besides its own token ids: the exact incarnation of its
// parent block, or the namespace for the first block of a sequence. A lookup compares it and the
// token ids, so a hit is exact by induction from the first block: a hash collision (even a forced
// one) can only cause a miss, never wrong KV.
struct BlockParent {
  int32_t block = -1;  // parent block index; -1 for the first block of a sequence
  uint64_t tag = 0;    // the parent's generation, or the namespace value when block == -1
  bool operator==(const BlockParent&) const = default;
  static BlockParent root(CacheNamespace ns) { return BlockParent{-1, ns.value}; }
};

struct BlockPoolCounters {
  int32_t num_total_blocks = 0;
  int32_t num_free_blocks = 0;         // ref 0 (includes cached-free)
  int32_t num_used_blocks = 0;         // ref > 0
  int32_t num_cached_free_blocks = 0;  // ref 0 and holding a hash: evictable prefix cache
  int32_t num_shared_blocks = 0;       // ref > 1
  int64_t num_evictions = 0;           // cached hashes dropped to reuse a block
};

class BlockPool {
 public:
  // All blocks start free, on the free list in id order (0 is allocated first).
  BlockPool(int32_t num_blocks, int32_t block_size_tokens);

  int32_t num_blocks() const { return static_cast<int32_t>(meta_.size()); }
  int32_t block_size_tokens() const { return block_size_tokens_; }
  int32_t num_free_blocks() const { return num_free_; }
  bool can_allocate(int32_t n) const { return n >= 0 && n <= num_free_; }

  // Takes n blocks from the LRU head (ref 0 -> 1), evicting their cached hashes.
  // HINGE_CHECK(can_allocate(n)). Appends to *out.
  void allocate(int32_t n, std::vector<BlockId>* out);
  std::vector<BlockId> allocate(int32_t n);
  // Drops one reference of each block, in order; blocks reaching 0 go to the free-list tail
  // (keeping their hash, so a later prefix hit can revive them).
  void free(std::span<const BlockId> blocks);
  // Adds a reference; a block with ref 0 leaves the free list (O(1)).
  void ref(BlockId b);

  // The cached block under `hash` whose parent and token ids equal the given ones, or nullopt
  // (a miss, or a collision rejected by the comparison). No side effects.
  std::optional<BlockId> lookup(BlockHash hash, const BlockParent& parent,
                                std::span<const int32_t> block_tokens) const;
  // Registers full block b (ref > 0) under `hash`. Returns the block that now holds this
  // content in the cache: b itself; or another block already cached with the same hash, parent
  // and tokens (a duplicate computed concurrently; b stays uncached); or nullopt when the hash
  // is taken by different content (a collision; b stays uncached). Re-caching b is a no-op.
  std::optional<BlockId> cache_block(BlockId b, BlockHash hash, const BlockParent& parent,
                                     std::span<const int32_t> block_tokens);

  int32_t ref_count(BlockId b) const { return meta(b).ref_count; }
  // Bumped each time the block is allocated: (block, generation) names one incarnation.
  uint64_t generation(BlockId b) const { return meta(b).generation; }
  BlockParent as_parent(BlockId b) const { return BlockParent{b.value, meta(b).generation}; }
  std::optional<BlockHash> cached_hash(BlockId b) const;
  // Free list from head (next to be allocated) to tail.
  std::vector<BlockId> free_list() const;
  BlockPoolCounters counters() const;

  // One char per block (see the legend above), blocks_per_line per line, each line '\n'-ended.
  std::string render_map(int32_t blocks_per_line = 64) const;
  Status check_invariants() const;

 private:
  static constexpr int32_t kNone = -1;
  struct BlockMeta {
    int32_t ref_count = 0;
    int32_t prev = kNone;  // free-list links, meaningful only while ref_count == 0
    int32_t next = kNone;
    bool has_hash = false;
    uint64_t generation = 0;
    BlockHash hash;
    BlockParent parent;  // valid while has_hash
  };

  const BlockMeta& meta(BlockId b) const {
    HINGE_CHECK_MSG(b.value >= 0 && b.value < num_blocks(), "block id {} out of range", b.value);
    return meta_[static_cast<size_t>(b.value)];
  }
  BlockMeta& meta(BlockId b) { return const_cast<BlockMeta&>(std::as_const(*this).meta(b)); }
  std::span<const int32_t> tokens_of(int32_t b) const {
    return {tokens_.data() + static_cast<size_t>(b) * block_size_tokens_,
            static_cast<size_t>(block_size_tokens_)};
  }
  void push_tail(int32_t b);
  void unlink(int32_t b);

  int32_t block_size_tokens_;
  std::vector<BlockMeta> meta_;  // [num_blocks]
  std::vector<int32_t> tokens_;  // [num_blocks * block_size_tokens], token ids of cached blocks
  std::unordered_map<uint64_t, int32_t> cached_;  // hash value -> block index
  int32_t head_ = kNone;
  int32_t tail_ = kNone;
  int32_t num_free_ = 0;
  int32_t num_cached_free_ = 0;
  int32_t num_shared_ = 0;
  int64_t num_evictions_ = 0;
};

}  // namespace hinge::kv
