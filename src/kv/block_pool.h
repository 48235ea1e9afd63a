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
// appends cached blocks to the tail in the order given and puts blocks holding nothing (no
// hash) at the head, to be reused first. Callers free a request's blocks last-to-first, so the
// tail of a sequence is evicted first and shared heads live longest. ref() of a cached free
// block (a prefix hit) unlinks it in O(1). Blocks whose cache entry is dropped while free
// (purge, TTL, a tenant's quota) move to the head too.
//
// Ownership (kv_ids.h: CacheNamespace, owner): every cached block records its namespace, which
// a hit must match, its owner and when it was cached. Per owner (set_owner_policy):
//   - a TTL: a block cached more than ttl_s ago never hits again (expire() reclaims it);
//   - a quota on its cached free blocks: past it, that owner's own least recently freed
//     cached block loses its entry (a second, per-owner LRU list), never another owner's.
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
#include "kv/kv_events.h"
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
  // The namespace must match too, and the entry must not have outlived its owner's TTL at
  // `now` (seconds on the caller's clock, the one cache_block got).
  std::optional<BlockId> lookup(BlockHash hash, BlockHash parent,
                                std::span<const int32_t> block_tokens, int32_t group = 0,
                                const CacheNamespace& ns = {}, double now = 0) const;
  // Registers full block b (ref > 0) as holding the content (hash, parent, tokens) of KV group
  // `group`. Other blocks may hold the same content (computed concurrently) or the same hash
  // with other content (a collision): all stay cached, lookups compare. Re-caching b with its
  // own content is a no-op. Returns true when b is now the only block of group 0 holding the
  // hash (an entry to announce: kv_events.h).
  bool cache_block(BlockId b, BlockHash hash, BlockHash parent,
                   std::span<const int32_t> block_tokens, int32_t group = 0,
                   const CacheNamespace& ns = {}, int32_t owner = kSharedOwner, double now = 0,
                   uint64_t epoch = 0);
  // Drops b's cache entry, if any (KV registered for a step that never ran). A free block
  // moves to the head of the free list.
  void uncache(BlockId b);

  // Owner policy: at most max_cached_free of its blocks cached while free (INT32_MAX: no cap;
  // lowering it evicts at once), entries older than ttl_s (0: forever) miss. owner in
  // [0, kMaxCacheOwners).
  void set_owner_policy(int32_t owner, int32_t max_cached_free, double ttl_s);
  // The owner's TTL (0: none, also for an owner never given a policy).
  double owner_ttl(int32_t owner) const {
    return owner >= 0 && static_cast<size_t>(owner) < owners_.size()
               ? owners_[static_cast<size_t>(owner)].ttl_s
               : 0.0;
  }
  // Drops every cache entry of `owner` (free and in use) whose epoch is not *keep_epoch (all
  // of them when keep_epoch is nullptr). Returns how many.
  int32_t uncache_owner(int32_t owner, const uint64_t* keep_epoch = nullptr);
  // Drops the entries past their owner's TTL at `now`. Returns how many.
  int32_t expire(double now);
  // Drops the entry of every free cached block (they move to the head of the free list): the
  // prefix cache shrinks to the blocks in use. Returns how many (memory pressure).
  int32_t uncache_free();
  // Drops every entry, free and in use, recording one all_cleared() instead of the removals.
  // Returns how many.
  int32_t uncache_all();
  // Removals of announced hashes (the last group-0 block holding one lost its entry) are
  // recorded into *log from now on (nullptr: not recorded). The log must outlive the pool.
  void set_event_log(KvEventLog* log) { log_ = log; }
  // Distinct hashes held by group-0 blocks: the set a consumer of the events holds.
  int32_t num_announced() const { return num_announced_; }
  // Whether a group-0 block holds the hash.
  bool announced(BlockHash hash) const;
  int32_t owner_cached_free(int32_t owner) const;
  // Blocks holding an entry of `owner`, free or in use.
  int32_t owner_cached(int32_t owner) const;

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
    bool on_owner_list = false;  // cached and free: linked in its owner's list
    int32_t group = 0;  // the KV group whose layers it holds, while has_hash
    int32_t owner = 0;  // while has_hash
    int32_t oprev = kNone;  // owner-list links
    int32_t onext = kNone;
    double cached_at = 0;  // when cache_block registered it
    uint64_t epoch = 0;    // its owner's permission version then
    uint64_t generation = 0;
    BlockHash hash;
    BlockHash parent;  // the parent block's hash (the root for a first block), while has_hash
    CacheNamespace ns;  // while has_hash
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
  struct Owner {
    int32_t head = kNone;  // its cached free blocks, least recently freed first
    int32_t tail = kNone;
    int32_t count = 0;
    int32_t max_cached_free = INT32_MAX;
    double ttl_s = 0;
  };
  bool expired(const BlockMeta& m, double now) const;
  Owner& owner(int32_t o);
  void drop_hash(BlockMeta& m, int32_t b);
  void drop_free_entry(int32_t b);  // a free cached block loses its entry and goes to the head
  void push_tail(int32_t b);
  void push_head(int32_t b);
  void unlink(int32_t b);
  void owner_push(int32_t b);
  void owner_unlink(int32_t b);
  void enforce_quota(int32_t o);

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
  int64_t num_quota_evictions_ = 0;
  int64_t num_expired_ = 0;
  std::vector<Owner> owners_;  // grown on demand
  KvEventLog* log_ = nullptr;
  int32_t num_announced_ = 0;
};

}  // namespace hinge::kv
