// BlockHash: the content identity of a full KV block, a 128-bit chained hash (BLAKE2b-128).
//   H_root = B(tag, fingerprint, namespace)   fingerprint: model, KV dtypes and layout, KV
//                                             calibration (KvCacheConfig::fingerprint)
//   H_i    = B(H_{i-1}, tokens of block i)
//   after a public prefix of P blocks (kv_ids.h, CacheScope): blocks [0, P) chain from the public
//   namespace's root, block P's parent is rebase_hash(H_{P-1}, tenant namespace)
// So H_i names the whole prefix [0, (i + 1) * block_size) of one namespace under one KV format:
// the same prompt has the same block hashes in every process and on every tier (disk, Redis),
// and nothing ties a cached block to the physical block that first held it. Token ids are
// hashed as little-endian int32 (the byte order of every machine hinge builds for).
//
// A hit is never taken on the hash alone: the pool compares the block's token ids and its
// parent's hash too (BlockPool::lookup). BLAKE2b-128 makes a crafted collision cost ~2^64 work
// (an XXH3 collision is cheap to craft), so one client cannot plant KV under another prompt's
// identity within a namespace. Only full blocks are hashed. Pure functions; thread-safe.
#pragma once

#include <compare>
#include <cstdint>
#include <span>
#include <vector>

#include "kv/kv_ids.h"

namespace hinge::kv {

struct BlockHash {
  uint64_t lo = 0;
  uint64_t hi = 0;
  constexpr auto operator<=>(const BlockHash&) const = default;
};

// Hash of one full block given its parent's hash. Replaceable (tests inject colliding ones).
using BlockHashFn = BlockHash (*)(BlockHash parent, std::span<const int32_t> block_tokens);

// Root of the chain of a namespace under a KV format fingerprint.
BlockHash namespace_root_hash(const CacheNamespace& ns, uint64_t fingerprint = 0);
// The parent of the first block after a public prefix whose last block hashed to `last`: the
// chain moves into namespace ns (H = B(tag, fingerprint, ns, last)), so a tenant's blocks after
// a shared system prompt never chain from the public namespace alone.
BlockHash rebase_hash(BlockHash last, const CacheNamespace& ns, uint64_t fingerprint = 0);
// The parent hash of full block i of a request of `scope`, given the hashes of blocks [0, i).
BlockHash chain_parent(const CacheScope& scope, size_t i, std::span<const BlockHash> hashes,
                       uint64_t fingerprint);
// The default BlockHashFn: BLAKE2b-128 of the parent hash and the token ids.
BlockHash hash_block_tokens(BlockHash parent, std::span<const int32_t> block_tokens);
// Hashes of every full block of `tokens` (tokens.size() / block_size_tokens of them).
std::vector<BlockHash> hash_full_blocks(const CacheScope& scope, std::span<const int32_t> tokens,
                                        int32_t block_size_tokens, uint64_t fingerprint = 0,
                                        BlockHashFn hash_fn = &hash_block_tokens);

}  // namespace hinge::kv
