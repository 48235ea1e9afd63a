// What `hinge route` knows of one replica's prefix cache, learned from its KV events
// (cluster/kv_event_wire.h), and the llm-d-style score of a request against it. Pure
// bookkeeping (no sockets), tested alone.
//
// A replica's event hashes depend on things the router cannot recompute (the tenant's
// namespace, the KV format): the index keys blocks by *content* instead — a chain hash of the
// token ids the events carry (content_chain(): XXH3-64 of each block's ids seeded by its
// parent's hash) — and maps each event hash to it, so BlockRemoved and parent references
// resolve. A request's prompt ids (from the replica's /v1/*/render) give the same chain, and
// its score on a replica is the run of consecutive blocks from the first that the replica
// holds (llm-d's precise prefix-cache scorer).
//
// The index is a placement hint only: a replica hits a block only within the request's own
// namespace, so two tenants' identical prompts look alike here and still never share a block.
//
// Routed-but-not-yet-announced: note_routed() records the blocks of a request just sent to the
// replica for a few seconds, so the next request with the same prefix follows it before the
// replica's events arrive (llm-d's approximate scorer does the same with its routing history).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

namespace hinge::route {

// The content chain of tokens' full blocks: out[i] = XXH3-64(block i's ids, seed out[i-1]),
// seed 0 for block 0 (never 0: a 0 becomes 1).
void content_chain(std::span<const int32_t> tokens, int32_t block_size, std::vector<uint64_t>* out);

class PrefixIndex {
 public:
  // BlockStored: hashes[i] holds tokens[i*block_size, (i+1)*block_size); parent is the event
  // hash of hashes[0]'s parent (none: a chain's first block). A parent the index does not know
  // (events missed) drops the event's blocks: false (counted in orphans()).
  bool block_stored(std::span<const int64_t> hashes, std::optional<int64_t> parent,
                    std::span<const int32_t> tokens, int32_t block_size);
  void block_removed(std::span<const int64_t> hashes);
  void clear();  // AllBlocksCleared, a replica restarted or its events lost

  // Consecutive blocks of `chain` from the first that the replica holds or was just sent.
  int32_t matched_blocks(std::span<const uint64_t> chain, double now) const;
  // Records chain as sent to this replica until now + ttl_s.
  void note_routed(std::span<const uint64_t> chain, double now, double ttl_s);

  int64_t blocks() const { return static_cast<int64_t>(cached_.size()); }
  int64_t orphans() const { return orphans_; }

 private:
  std::unordered_map<int64_t, uint64_t> by_event_;  // event hash -> content hash
  std::unordered_map<uint64_t, int32_t> cached_;    // content hash -> event hashes holding it
  std::unordered_map<uint64_t, double> routed_;     // content hash -> until
  int64_t orphans_ = 0;
};

}  // namespace hinge::route
