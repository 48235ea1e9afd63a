// KV cache events: what the prefix cache announces to the world outside the process (a router
// scoring replicas by cached prefix, an indexer), in the shape of vLLM's KV events:
//   stored(block_hashes, parent, token_ids)  full blocks became prefix-cache entries
//   removed(block_hashes)                    entries were evicted, purged or expired
//   all_cleared()                            every entry is gone (start, reset)
// The pool and the manager record into one KvEventLog (BlockPool::set_event_log); the engine
// hands the log to a KvEventSink at the end of each step (cluster/kv_event_publisher.h puts it
// on the wire). Recording is off until a log is attached, and a log reuses its buffers, so a
// step that records events does not allocate once the buffers have grown.
//
// What is announced: the identity of a cache entry of KV group 0 (every group of a request
// shares the chain hashes), once per distinct hash — a second block computed with the same
// content is not announced again, and the hash is removed when the last block holding it loses
// its entry. So a consumer that applies the events in order holds exactly the set of hashes the
// pool holds (BlockPool::num_announced()). A stored block's parent (the block before it in its
// chain) was announced before it and is still cached then; the first block of a chain has no
// parent.
//
// Hashes on the wire (external_block_hash): the low 63 bits of the 128-bit chain hash, never 0
// (a 0 becomes 1), so they fit int64 and uint64 consumers alike. They name the block's whole
// prefix within its namespace (kv/block_hash.h): the same prompt of two tenants has different
// hashes. Not thread-safe: owned by the engine thread; a sink takes its contents over.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "kv/block_hash.h"

namespace hinge::kv {

// The id a cached block has in events: non-zero, below 2^63.
uint64_t external_block_hash(const BlockHash& h);

enum class KvEventKind : uint8_t { kStored, kRemoved, kAllCleared };

struct KvEvent {
  KvEventKind kind = KvEventKind::kStored;
  uint64_t parent = 0;  // kStored: external hash of the block before the first one, 0 = none
  uint32_t first_hash = 0;  // hashes [first_hash, first_hash + num_hashes) of KvEventLog
  uint32_t num_hashes = 0;
  uint32_t first_token = 0;  // kStored: token ids [first_token, first_token + num_tokens)
  uint32_t num_tokens = 0;
};

class KvEventLog {
 public:
  // Full block `hash` (external) with `tokens`, following `parent` (0: first of its chain). A
  // block that continues the previous stored event's chain joins that event, as vLLM batches
  // the blocks one request stored in a step.
  void stored(uint64_t hash, uint64_t parent, std::span<const int32_t> tokens);
  void removed(uint64_t hash);  // consecutive removals form one event
  // Drops what was recorded before (a consumer applying it would clear anyway) and records
  // the clear.
  void all_cleared();

  bool empty() const { return events_.empty(); }
  void clear();
  std::span<const KvEvent> events() const { return events_; }
  std::span<const uint64_t> hashes(const KvEvent& e) const {
    return std::span<const uint64_t>(hashes_).subspan(e.first_hash, e.num_hashes);
  }
  std::span<const int32_t> tokens(const KvEvent& e) const {
    return std::span<const int32_t>(tokens_).subspan(e.first_token, e.num_tokens);
  }
  // Exchanges contents and buffers (a sink takes the events and leaves an empty log whose
  // buffers it recycled).
  void swap(KvEventLog& other) noexcept;

 private:
  std::vector<KvEvent> events_;
  std::vector<uint64_t> hashes_;
  std::vector<int32_t> tokens_;
};

// Where the engine sends each step's events. publish() is called on the engine thread with a
// non-empty log; it takes the events (log->swap) and must not block on I/O.
class KvEventSink {
 public:
  virtual ~KvEventSink() = default;
  virtual void publish(KvEventLog* log) = 0;
};

}  // namespace hinge::kv
