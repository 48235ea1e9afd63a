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
//   - the index holds (h -> b) iff block b holds hash h (several blocks may hold one hash);
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
#include <utility>
#include <vector>

#include "common/status.h"
#include "kv/block_hash.h"
#include "kv/block_hash_index.h"
#include "kv/kv_ids.h"
#include "kv/kv_stats.h"

namespace hinge::kv {

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

  // A cached block with this identity: hash, parent hash, token ids and KV group all equal (a
  // block whose hash collides with other content is never returned; the groups of one sequence
  // share its hashes and hold one block each), or nullopt. No side effects.
  std::optional<BlockId> lookup(BlockHash hash, BlockHash parent,
                                std::span<const int32_t> block_tokens, int32_t group = 0) const;
  // Registers full block b (ref > 0) as holding the content (hash, parent, tokens) of KV group
  // `group`. Other blocks may hold the same content (computed concurrently) or the same hash
  // with other content (a collision): all stay cached, lookups compare. Re-caching b with its
  // own content is a no-op.
  void cache_block(BlockId b, BlockHash hash, BlockHash parent,
                   std::span<const int32_t> block_tokens, int32_t group = 0);
  // Drops b's cache entry, if any (KV registered for a step that never ran).
  void uncache(BlockId b);

  int32_t ref_count(BlockId b) const { return meta(b).ref_count; }
  // Bumped each time the block is allocated: (block, generation) names one incarnation.
  uint64_t generation(BlockId b) const { return meta(b).generation; }
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
    int32_t group = 0;  // the KV group whose layers it holds, while has_hash
    uint64_t generation = 0;
    BlockHash hash;
    BlockHash parent;  // the parent block's hash (the root for a first block), while has_hash
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
  void drop_hash(BlockMeta& m, int32_t b);
  void push_tail(int32_t b);
  void unlink(int32_t b);

  int32_t block_size_tokens_;
  std::vector<BlockMeta> meta_;  // [num_blocks]
  std::vector<int32_t> tokens_;  // [num_blocks * block_size_tokens], token ids of cached blocks
  BlockHashIndex cached_;  // hash -> blocks holding it
  int32_t head_ = kNone;
  int32_t tail_ = kNone;
  int32_t num_free_ = 0;
  int32_t num_cached_free_ = 0;
  int32_t num_shared_ = 0;
  int64_t num_evictions_ = 0;
};

}  // namespace hinge::kv
