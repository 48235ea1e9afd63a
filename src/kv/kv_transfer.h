// KvTransfer: a prefix's KV blocks out of the arena as bytes, and bytes back in as prefix-cache
// entries — what `hinge chat` keeps in a saved session so that a later process continues the
// conversation with its history cached instead of computing it again.
//
// Export: the full blocks of `tokens` that are cached now in the scope's namespaces, in order
// (block i holds tokens [i * bs, (i + 1) * bs)); for each block the bytes of every KV group's
// block (group 0 first), each KvArena::bytes_per_block long, exactly as the arena holds them
// (quantized K, fp8 scales and K shift are the engine's calibration, which the KV fingerprint
// names). Import: bytes exported under the same fingerprint for the same tokens are written into
// fresh blocks, which become prefix-cache entries of the scope as if computed; blocks already
// cached are kept, not written again. Nothing is ever read by a request before it is written.
//
// Sliding-window groups keep no blocks behind their window, so their KV is neither exported nor
// imported (an error says so; the conversation alone still works).
//
// Not thread-safe: the engine thread's, like the cache manager and arena it works on. Between
// steps only (a running step's blocks are never touched: import takes free blocks).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "common/status.h"
#include "kv/kv_arena.h"
#include "kv/kv_cache_manager.h"

namespace hinge {

class KvTransfer {
 public:
  KvTransfer(kv::KvCacheManager* kv, kv::KvArena* arena) : kv_(kv), arena_(arena) {}

  // Bytes one exported block takes (every group's block).
  int64_t bytes_per_token_block() const;
  // Appends the cached full blocks of `tokens` (the longest cached run from the start) to *out
  // and returns how many. 0 with the prefix cache off.
  StatusOr<int32_t> export_prefix(std::span<const int32_t> tokens, const kv::CacheScope& scope,
                                  std::vector<uint8_t>* out) const;
  // Writes the blocks in `bytes` (a whole number of exported blocks, at most the full blocks of
  // tokens) back as cache entries of `scope`; returns how many of the prefix's blocks are cached
  // afterwards (fewer than given when the pool lacks free blocks: the earliest ones are kept).
  // first_block > 0: bytes hold blocks [first_block, ...) only (a tier's continuation of a RAM
  // hit); when the cache no longer holds blocks [0, first_block) nothing is imported.
  StatusOr<int32_t> import_prefix(std::span<const int32_t> tokens, const kv::CacheScope& scope,
                                  std::span<const uint8_t> bytes, int32_t first_block = 0);
  // Evicts every cached block no request uses and zeroes the bytes of every free block (a
  // logout: nothing of the conversation stays readable in the arena). Returns the bytes zeroed.
  int64_t wipe_free_blocks();

 private:
  Status check_full_attention() const;

  kv::KvCacheManager* kv_;
  kv::KvArena* arena_;
};

}  // namespace hinge
