// KvTiering: the engine's side of a KV tier (kv/kv_tier.h). One worker thread talks to the
// store; the engine thread never waits on it during a step.
//
//   write_back   a finished request's full blocks, cached in RAM now and not written before,
//                are copied out of the arena (on the engine thread: a memcpy per block) and
//                queued; the worker seals and stores them. The queue is bounded in bytes: what
//                does not fit is dropped and counted (the blocks stay in RAM).
//   start_fetch  a new request whose prompt continues beyond its RAM hit with blocks the store
//                may hold waits (the engine keeps it out of the scheduler) while the worker
//                reads those blocks, in chain order up to the first miss;
//   poll         at the start of each step, reads that completed are imported into free blocks
//                as prefix-cache entries (KvTransfer::import_prefix), and their requests are
//                handed to the scheduler, whose lookup then hits them as cached tokens.
// A store that fails (down, slow, full) costs hits, never a request: a failed read is a miss.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <span>
#include <thread>
#include <unordered_map>
#include <vector>

#include "kv/kv_arena.h"
#include "kv/kv_cache_manager.h"
#include "kv/kv_tier.h"
#include "kv/kv_transfer.h"

namespace hinge {

struct KvTieringStats {
  int64_t fetches = 0;          // requests that waited for a read of the tier
  int64_t restored_blocks = 0;  // blocks brought back into RAM
  int64_t written_blocks = 0;   // blocks handed to the store (successful puts)
  int64_t dropped_writes = 0;   // blocks not queued (queue full)
  int64_t queued_bytes = 0;     // waiting to be written now
  double fetch_wait_seconds = 0;  // total time requests waited for reads
};

class KvTiering {
 public:
  KvTiering(kv::KvCacheManager* kv, kv::KvArena* arena, KvTransfer* transfer,
            kv::KvTierStore* store, int64_t max_queued_bytes = int64_t{256} << 20);
  ~KvTiering();  // stops the worker; writes still queued are dropped
  KvTiering(const KvTiering&) = delete;
  KvTiering& operator=(const KvTiering&) = delete;

  // Engine thread. True when request `id` must wait for a read (then poll() returns it; the
  // engine ignores ids it no longer holds, e.g. aborted while waiting).
  bool start_fetch(kv::RequestId id, std::span<const int32_t> prompt, const kv::CacheScope& scope);
  // Engine thread: imports finished reads; appends the requests now ready to *ready.
  void poll(std::vector<kv::RequestId>* ready);
  bool has_pending() const { return pending_ > 0; }
  // Waits up to max_s for a read to finish (the engine has nothing else to run).
  void wait(double max_s);
  // Engine thread: queues the full blocks of tokens[0, num_tokens) cached in RAM now.
  void write_back(std::span<const int32_t> tokens, const kv::CacheScope& scope);
  // Waits until every queued write reached the store (tests, shutdown of a tool).
  void flush();

  KvTieringStats stats() const;

 private:
  struct Fetch {
    kv::RequestId id;
    std::vector<int32_t> tokens;  // the prompt's full blocks
    kv::CacheScope scope;
    std::vector<kv::TierBlockKey> keys;  // blocks [first, first + keys.size())
    int32_t first = 0;
    std::vector<uint8_t> bytes;  // read: blocks [first, first + num_read)
    int32_t num_read = 0;
    double started = 0;
  };
  struct Write {
    kv::TierBlockKey key;
    std::vector<uint8_t> bytes;
    double ttl_s = 0;  // the owner's TTL (0: the store's default)
  };
  // The key of full block i (hashes_ holds the chain's hashes from block 0).
  kv::TierBlockKey key_of(const kv::CacheScope& scope, size_t i, const kv::BlockHash& h) const;
  void run();

  kv::KvCacheManager* kv_;
  kv::KvArena* arena_;
  KvTransfer* transfer_;
  kv::KvTierStore* store_;
  int64_t max_queued_bytes_;

  // Engine thread only.
  // Blocks written lately (tag -> when): not written again within kRewriteAfterS (a shared
  // store may have expired or lost them since: after that a finished request writes them again,
  // which also renews their TTL). Bounded.
  std::unordered_map<uint64_t, double> written_;
  static constexpr double kRewriteAfterS = 30;
  int32_t pending_ = 0;                   // fetches started, not polled yet
  std::vector<kv::BlockHash> hashes_;
  std::vector<int32_t> probe_;

  mutable std::mutex mu_;
  std::condition_variable cv_;       // work for the worker
  std::condition_variable done_cv_;  // a fetch finished / the write queue drained
  std::deque<Fetch> fetches_;        // guarded by mu_: waiting for the worker
  std::deque<Fetch> fetched_;        // guarded by mu_: read, waiting for poll()
  std::deque<Write> writes_;         // guarded by mu_
  bool writing_ = false;             // guarded by mu_: the worker holds a write
  bool stop_ = false;                // guarded by mu_
  KvTieringStats stats_;             // guarded by mu_
  std::thread worker_;
};

}  // namespace hinge
