// KV tiers: where full prefix blocks go beyond RAM, and come back from on a later hit of the
// same namespace and chain.
//
//   TierBlockKey  a block's identity: its namespace and 128-bit chain hash (which already names
//                 the model's KV format and every token before it: kv/block_hash.h), plus the
//                 tier group (the tenant and permission version it belongs to, for purges)
//   KvTierStore   a store of blocks' bytes by key (tier/disk_tier.h, tier/redis_tier.h); the
//                 store seals them (tier/sealed_block.h): what leaves the process is encrypted
//                 and authenticated, and a block that fails either is a miss
//   TierLru       the size-bounded LRU bookkeeping a local store keeps (testable alone)
//
// The engine's side (engine/kv_tiering.h) writes a finished request's new full blocks to the
// store and, before scheduling a request, reads the blocks its prompt continues with beyond the
// RAM hit — both on a worker thread, never in a step.
#pragma once

#include <cstdint>
#include <list>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/status.h"
#include "kv/block_hash.h"
#include "kv/kv_ids.h"

namespace hinge::kv {

struct TierBlockKey {
  CacheNamespace ns;
  BlockHash hash;
  uint64_t group = 0;  // CacheScope::tier_group of the block (0: shared / public)
  // The chain's first block (its namespace and hash): a shared store keeps a chain together by
  // it (Redis Cluster hash tags). Not part of the block's identity.
  CacheNamespace root_ns;
  BlockHash root;
  bool operator==(const TierBlockKey& o) const {
    return ns == o.ns && hash == o.hash && group == o.group;
  }
};

// Per-store counters (monotonic, except bytes and entries).
struct KvTierCounters {
  int64_t puts = 0;            // blocks written
  int64_t put_errors = 0;      // writes that failed (I/O, store down)
  int64_t hits = 0;            // blocks read back
  int64_t misses = 0;          // lookups of blocks the store does not hold
  int64_t rejected = 0;        // blocks found but refused: tampered, truncated, foreign; removed
  int64_t get_errors = 0;      // reads that failed (I/O, store down)
  int64_t evictions = 0;       // blocks dropped for room (LRU) or expired
  int64_t purged = 0;          // blocks deleted by a purge (forget_group)
  int64_t entries = 0;         // blocks held now (a local store; -1: unknown)
  int64_t bytes = 0;           // bytes held now (a local store; -1: unknown)
  int64_t capacity_bytes = 0;  // the size limit (0: none)
  int64_t up = 1;              // 1: reachable; 0: down (a remote store; its reads and writes fail fast)
};

// A store of sealed blocks. Thread-safe: the engine's tier worker calls it, the server's admin
// routes call forget_group.
class KvTierStore {
 public:
  virtual ~KvTierStore() = default;
  // "disk", "redis": the label of its metrics.
  virtual const char* name() const = 0;
  // Stores the block's bytes (plaintext; the store seals them). ttl_s > 0: the block must not
  // hit after that many seconds (its tenant's TTL); 0: the store's default. An error leaves
  // no entry.
  virtual Status put(const TierBlockKey& key, std::span<const uint8_t> bytes, double ttl_s) = 0;
  // The block's bytes into *out: true on a hit; false on a miss (absent, or present but
  // refused: then counted as rejected and removed). An error: the store could not be asked.
  virtual StatusOr<bool> get(const TierBlockKey& key, std::vector<uint8_t>* out) = 0;
  // Whether the store may hold the block (a local index answers exactly; a remote store says
  // true and lets get() tell).
  virtual bool may_contain(const TierBlockKey& key) const = 0;
  // Deletes every block of tier group `group` and forgets its keys (a tenant purged or its
  // permission version bumped: crypto-shredding). Returns the blocks deleted.
  virtual int64_t forget_group(uint64_t group) = 0;
  virtual KvTierCounters counters() const = 0;
};

// LRU over named entries of known sizes within a byte capacity: the bookkeeping of a local
// store. Not thread-safe (its store locks).
class TierLru {
 public:
  explicit TierLru(int64_t capacity_bytes) : capacity_(capacity_bytes) {}

  // Adds (or replaces) `name` as the most recent, then evicts least recent entries until the
  // total fits; returns the names evicted (never `name` itself unless it alone exceeds the
  // capacity, in which case it is not added and returned).
  std::vector<std::string> insert(const std::string& name, int64_t bytes, uint64_t group);
  // Marks `name` most recent; false when absent.
  bool touch(const std::string& name);
  bool contains(const std::string& name) const { return index_.contains(name); }
  void erase(const std::string& name);
  // The names of every entry of `group`, removed from the index.
  std::vector<std::string> erase_group(uint64_t group);

  int64_t bytes() const { return bytes_; }
  int64_t size() const { return static_cast<int64_t>(index_.size()); }
  int64_t capacity() const { return capacity_; }
  // Least recent first.
  std::vector<std::string> names() const;

 private:
  struct Entry {
    std::string name;
    int64_t bytes;
    uint64_t group;
  };
  int64_t capacity_;
  int64_t bytes_ = 0;
  std::list<Entry> order_;  // most recent at the front
  std::unordered_map<std::string, std::list<Entry>::iterator> index_;
};

}  // namespace hinge::kv
