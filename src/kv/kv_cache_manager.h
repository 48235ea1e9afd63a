// KvCacheManager: per-request paged KV bookkeeping over one BlockPool, with automatic prefix
// caching (tenant-namespaced, chained block hashes), fork and copy-on-write, for every KV group
// (kv_spec.h): a request holds one block table per group, all of the same length, with blocks
// of its own from the shared pool; a sliding-window group releases the blocks behind its window
// (their entries become kReleasedBlock). The groups share the
// chain hashes; a group's cached block is told apart by its group (BlockPool::lookup), and a
// prefix hit counts only blocks every group holds.
// Not thread-safe: owned and used by the engine thread only. Pure bookkeeping (no KV bytes).
//
// Life of a request (what the scheduler calls, in order):
//   add_request(id, ns)
//   hit = get_computed_blocks(prompt, ns)        // query only, no side effects
//   alloc = allocate_slots(id, n, &hit)          // nullopt: does not fit, nothing changed;
//                                                // success adopts the hit and counts the query
//   cache_full_blocks(id, tokens, n)             // blocks full once the step ran become
//                                                // prefix-cache entries at once, so requests
//                                                // admitted in the same step share them
//   ... the runner computes tokens, writing KV to slot(id, p) ...
//   allocate_slots(id, 1) ... (decode)           // each step
//   uncache_uncomputed(id, num_computed)         // only when a step failed: drops what it
//                                                // registered but never wrote
//   free(id)                                     // blocks return tail-first
//
// Per request, token positions against blocks:
//   | cached (prefix hit) | computed | new (this step) | unused tail of last block |
//   0                     hit        computed          num_tokens
// num_tokens (slots reserved) only grows; table size == ceil(num_tokens / block_size).
//
// Copy-on-write: after fork() parent and child share every block. Full blocks are immutable;
// a partial last block shared by several requests is copied on the first allocate_slots that
// would write into it: the writer gets a fresh block and the result names (src, dst) for the
// runner to copy before the forward pass.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/status.h"
#include "kv/block_hash.h"
#include "kv/block_pool.h"
#include "kv/block_table.h"
#include "kv/kv_events.h"
#include "kv/kv_ids.h"

namespace hinge::kv {

struct KvCacheConfig {
  int32_t num_blocks = 0;
  int32_t block_size_tokens = 16;
  bool enable_prefix_cache = true;  // false: --no-prefix-cache (no hashing, no hits)
  // What the KV bytes depend on besides the tokens (model, KV dtypes, layout, calibration):
  // the root of every block hash, so KV of another format never hits (see block_hash.h).
  uint64_t fingerprint = 0;
  int32_t num_groups = 1;  // KvSpec::num_groups()
  // Per group: its sliding window in tokens (0 = full attention); empty = every group full.
  std::vector<int32_t> group_windows = {};
};

// A block-table entry released behind a sliding window (never read again).
inline constexpr BlockId kReleasedBlock{-1};

// Longest cached prefix of a prompt, n = hashes.size() blocks in each group:
// blocks[g * n + i] is group g's block holding tokens [i * bs, (i + 1) * bs), or kReleasedBlock in a
// sliding-window group for a block wholly behind the window of position n * bs (not needed).
struct ComputedBlocks {
  std::vector<BlockId> blocks;
  std::vector<BlockHash> hashes;  // hashes[i] of block i (the same in every group)
  int32_t num_cached_tokens = 0;  // n * block_size, always < prompt length
  int32_t num_query_tokens = 0;   // prompt length looked up (counted when adopted)
  int32_t num_public_blocks = 0;  // of the hit blocks, those of a public prefix
  int32_t num_hit_blocks() const { return static_cast<int32_t>(hashes.size()); }
};

struct BlockCopy {
  BlockId src;
  BlockId dst;
  bool operator==(const BlockCopy&) const = default;
};

// Views of the manager's scratch, valid until its next allocate_slots.
struct SlotAllocation {
  // Appended to the tables (copy-on-write dsts excluded), group-major: each group's
  // new_blocks.size() / num_groups, in table order.
  std::span<const BlockId> new_blocks;
  // Copy-on-write the runner must perform first, at most one per group.
  std::span<const BlockCopy> copies;
};

// True when HINGE_KV_DEBUG=1: the engine then prints debug_string() each step.
bool kv_debug_enabled();

class KvCacheManager {
 public:
  // hash_fn is replaceable for tests (forced collisions).
  explicit KvCacheManager(const KvCacheConfig& config, BlockHashFn hash_fn = &hash_block_tokens);
  // Not copyable or movable: the pool records into the manager's event log.
  KvCacheManager(const KvCacheManager&) = delete;
  KvCacheManager& operator=(const KvCacheManager&) = delete;

  int32_t block_size_tokens() const { return config_.block_size_tokens; }
  int32_t num_groups() const { return config_.num_groups; }
  bool prefix_cache_enabled() const { return config_.enable_prefix_cache; }
  const BlockPool& pool() const { return pool_; }

  // Starts tracking a request (no blocks yet). HINGE_CHECK: id not live.
  // max_tokens (optional): the most tokens the request can reach, so its table and hashes are
  // sized once and decode steps do not allocate.
  // `scope`: the request's namespace and owner (kv_ids.h), fixed for its life.
  void add_request(RequestId id, const CacheScope& scope, int32_t max_tokens = 0);
  bool has_request(RequestId id) const { return requests_.contains(id); }

  // Longest prefix of `prompt` made of full cached blocks of namespace ns, leaving at least one
  // token to compute (a 100-token prompt with bs 16 hits at most 96 tokens; a 32-token one 16).
  // No side effects (the counters move when allocate_slots adopts the result). Empty (no
  // blocks, num_query_tokens still set) when prefix caching is off.
  // Only blocks of the scope's namespaces (and not past their owner's TTL) hit.
  ComputedBlocks get_computed_blocks(std::span<const int32_t> prompt, const CacheScope& scope) const;
  // The same with the prompt's chain hashes known (extend_block_hashes): nothing is hashed.
  // hashes must cover at least the full blocks of prompt[0, size - 1).
  ComputedBlocks get_computed_blocks(std::span<const int32_t> prompt, const CacheScope& scope,
                                     std::span<const BlockHash> hashes) const;
  // Appends to *hashes the chain hashes of the full blocks of `tokens` (of namespace ns) it
  // does not hold yet, so a request hashes each block once however often it is looked up
  // (sched::Request keeps them). Nothing when prefix caching is off.
  void extend_block_hashes(std::span<const int32_t> tokens, const CacheScope& scope,
                           std::vector<BlockHash>* hashes) const;

  // Reserves slots for num_new_tokens more tokens of request id. `computed` (only at the
  // request's first allocation, HINGE_CHECK) adopts a prefix lookup: its blocks are referenced,
  // its tokens count as already present, and its query/hit tokens are added to the counters.
  // Returns nullopt, changing nothing (counters included), when the pool lacks blocks.
  std::optional<SlotAllocation> allocate_slots(RequestId id, int32_t num_new_tokens,
                                               const ComputedBlocks* computed = nullptr);

  // Registers the full blocks within tokens [0, num_tokens) not registered yet as prefix-cache
  // entries. `tokens` are the request's tokens (at least num_tokens), num_tokens at most the
  // slots reserved. Called at scheduling time for the tokens the step will have computed: the
  // forward pass writes every token's KV of a layer before any attention of that layer reads,
  // so a request admitted later in the same step may already hit them.
  // `known` (optional): chain hashes of the first blocks already computed (extend_block_hashes).
  void cache_full_blocks(RequestId id, std::span<const int32_t> tokens, int32_t num_tokens,
                         std::span<const BlockHash> known = {});
  // Drops the cache entries of the request's blocks past num_computed_tokens (registered for a
  // step whose forward pass failed: their KV was never written).
  void uncache_uncomputed(RequestId id, int32_t num_computed_tokens);
  // Speculative decoding: gives back the slots past num_tokens, reserved for draft tokens the
  // target rejected. The sequence length moves back and the blocks wholly past it return to
  // the pool, tail-first; no KV is copied. Those blocks were never cached: only accepted
  // tokens are (cache_full_blocks is given real tokens only), so a block that became full
  // only through rejected drafts never enters the prefix cache. num_tokens may not fall below
  // the registered full blocks.
  void trim_slots(RequestId id, int32_t num_tokens);

  // The clock of TTLs (seconds, any origin, never going back): entries are stamped with it
  // when cached and checked against it on lookups. The engine sets it each step.
  void set_now(double now) { now_ = now; }
  double now() const { return now_; }
  // Retention and quota of an owner's entries (BlockPool::set_owner_policy).
  void set_owner_policy(int32_t owner, int32_t max_cached_free_blocks, double ttl_s) {
    pool_.set_owner_policy(owner, max_cached_free_blocks, ttl_s);
  }
  // The owner's TTL (0: none).
  double owner_ttl(int32_t owner) const { return pool_.owner_ttl(owner); }
  // Drops every cache entry of `owner` now (free blocks go to the head of the free list) and
  // stops its live requests from publishing more. Returns the entries dropped.
  int32_t purge_owner(int32_t owner);
  // The owner's epoch (permission version) is now `current`: every entry of it made under
  // another epoch is dropped, and its live requests of another epoch publish no more.
  // Returns the entries dropped.
  // The owner's current epoch is kept: a request of another epoch that starts later (queued,
  // or preempted and re-added) publishes nothing either.
  int32_t retire_owner_epochs(int32_t owner, uint64_t current);
  // purge_owner, and the owner never publishes again (a tenant removed from the server).
  int32_t retire_owner(int32_t owner);
  // Drops every entry (free and in use; vLLM's reset_prefix_cache), live requests publish no
  // more. Recorded as one all_cleared(). Returns the entries dropped.
  int32_t reset_prefix_cache();
  // KV events (kv_events.h): from now on, entries announced and removed are recorded into
  // event_log(), starting with an all_cleared(). The engine drains it each step.
  void enable_events();
  bool events_enabled() const { return events_on_; }
  KvEventLog& event_log() { return events_; }
  // Drops entries past their owner's TTL at now() (so they are reused first).
  int32_t expire_entries() { return pool_.expire(now_); }

  // Memory pressure: withhold(n) takes up to n blocks no request references out of the pool
  // (free ones holding nothing first, then cached ones least recently used first, whose
  // entries are evicted) so that no request can use them; the engine returns their pages to
  // the OS. Returns the blocks newly withheld (valid until the next call). restore(n) gives the
  // n most recently withheld back to the pool (as free blocks holding nothing). Withheld
  // blocks count as used in the pool's counters and as num_withheld_blocks in stats().
  std::span<const BlockId> withhold(int32_t n);
  int32_t restore(int32_t n);
  int32_t num_withheld() const { return static_cast<int32_t>(withheld_.size()); }
  // Evicts every cached block no request uses (BlockPool::uncache_free). Returns how many.
  int32_t drop_cached_free() { return pool_.uncache_free(); }
  // Drops the prefix-cache entry of one free block (its pages are about to be returned to the
  // OS); it moves to the head of the free list.
  void uncache_free_block(BlockId b) { pool_.uncache(b); }

  // New request `child` sharing all of parent's blocks (refcount + 1 each), same token count.
  void fork(RequestId parent, RequestId child);

  // Releases the request's blocks last-to-first and forgets it.
  void free(RequestId id);

  // Sliding-window groups: drops the request's references to the blocks that lie wholly
  // before the window of its next query (position num_computed_tokens), so a local group keeps
  // at most ceil((window - 1) / block_size) + 1 blocks of computed tokens. Their table entries
  // become kReleasedBlock; a released block that is cached stays in the prefix cache until
  // evicted. Returns the blocks released. Nothing for full-attention groups.
  int32_t release_behind_window(RequestId id, int32_t num_computed_tokens);
  // The shift context policy: removes logical blocks [first, first + count) from every group's
  // table (their references dropped; later blocks move down, so their positions fall by count x
  // block_size) and num_tokens falls by as much. The request publishes no more cache entries
  // from then on: its later blocks hold KV computed at other positions than a fresh prefill of
  // the same tokens would. A sliding-window group drops the same entries (those already
  // released behind its window need nothing freed), so every group keeps the same positions.
  void drop_blocks(RequestId id, int32_t first, int32_t count);
  // Blocks request id holds in group g (released entries excluded).
  int32_t num_held_blocks(RequestId id, int32_t group) const;
  // The first block of group g that a query at position num_computed_tokens reads (0 for a
  // full-attention group).
  int32_t first_window_block(int32_t group, int32_t num_computed_tokens) const;
  int32_t group_window(int32_t group) const {
    return config_.group_windows.empty() ? 0 : config_.group_windows[static_cast<size_t>(group)];
  }

  int32_t num_tokens(RequestId id) const { return state(id).num_tokens; }
  // Request id's block table of KV group `group`.
  const BlockTable& block_table(RequestId id, int32_t group = 0) const {
    return state(id).tables[static_cast<size_t>(group)];
  }
  // Physical slot of token position p of request id in KV group `group`.
  int64_t slot(RequestId id, int64_t position, int32_t group = 0) const {
    return block_table(id, group).slot(position, config_.block_size_tokens);
  }

  KvCacheStats stats() const;
  // Pool invariants plus: each block's refcount == number of table references to it; each
  // group's table has ceil(num_tokens / block_size) blocks; hashes recorded per request match.
  Status check_invariants() const;
  // Counters line and the block map (see BlockPool::render_map).
  std::string debug_string(int32_t blocks_per_line = 64) const;

 private:
  struct RequestState {
    CacheScope scope;
    bool publish = true;  // false after a purge or retirement of its owner's entries
    std::vector<BlockTable> tables;  // one per KV group, all of one length
    std::vector<int32_t> released;   // per group: entries [0, released) are kReleasedBlock
    int32_t num_tokens = 0;  // slots reserved
    // The chain hash of each of the first hashes.size() (full, registered) blocks of every group.
    std::vector<BlockHash> hashes;
  };
  const RequestState& state(RequestId id) const {
    auto it = requests_.find(id);
    HINGE_CHECK_MSG(it != requests_.end(), "unknown request {}", id.value);
    return it->second;
  }
  RequestState& state(RequestId id) {
    return const_cast<RequestState&>(std::as_const(*this).state(id));
  }
  int32_t blocks_for(int64_t num_tokens) const {
    return static_cast<int32_t>((num_tokens + config_.block_size_tokens - 1) /
                                config_.block_size_tokens);
  }

  KvCacheConfig config_;
  BlockHashFn hash_fn_;
  BlockPool pool_;
  std::unordered_map<RequestId, RequestState> requests_;
  std::vector<BlockId> scratch_;  // tables tail-first for free()
  std::vector<BlockId> allocated_;  // blocks just taken from the pool (capacity kept)
  std::vector<BlockId> one_;        // a copy-on-write dst
  std::vector<BlockId> withheld_;   // withhold(): out of the pool, ref 1 each
  std::vector<BlockCopy> copies_;   // copies of the last allocate_slots
  int64_t num_prefix_query_tokens_ = 0;
  int64_t num_prefix_hit_tokens_ = 0;
  int64_t num_prefix_public_hit_tokens_ = 0;
  double now_ = 0;
  // Whether a request of `scope` may cache its blocks: its owner is not retired and, when the
  // owner's epoch is known, the scope has it.
  bool may_publish(const CacheScope& scope) const;
  std::unordered_map<int32_t, uint64_t> owner_epoch_;  // set by retire_owner_epochs
  std::unordered_map<int32_t, bool> retired_owners_;   // set by retire_owner
  int64_t num_cow_copies_ = 0;
  int64_t num_window_released_ = 0;
  bool events_on_ = false;
  KvEventLog events_;
};

}  // namespace hinge::kv
