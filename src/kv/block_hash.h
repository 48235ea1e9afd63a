// BlockHash: chained 64-bit XXH3 hash of full blocks of token ids.
//   H_root = XXH3(namespace)            (the cache namespace, derived from the tenant)
//   H_i    = XXH3(tokens of block i, seed = H_{i-1})
// So H_i names the whole prefix [0, (i + 1) * block_size) within one namespace. Only full blocks
// are hashed. The hash is an index, not a proof: the pool confirms every hit by comparing the
// block's token ids and its exact parent (see BlockParent, BlockPool::lookup), so a collision is
// a miss, never wrong KV. Pure functions; thread-safe.
#pragma once

#include <compare>
#include <cstdint>
#include <span>
#include <vector>

#include "kv/kv_ids.h"

namespace hinge::kv {

struct BlockHash {
  uint64_t value = 0;
  constexpr auto operator<=>(const BlockHash&) const = default;
};

// Hash of one full block given its parent's hash. Replaceable (tests inject colliding ones).
using BlockHashFn = BlockHash (*)(BlockHash parent, std::span<const int32_t> block_tokens);

// Root of the chain of a namespace.
BlockHash namespace_root_hash(CacheNamespace ns);
// The default BlockHashFn: XXH3-64 of the token ids seeded with the parent hash.
BlockHash hash_block_tokens(BlockHash parent, std::span<const int32_t> block_tokens);
// Hashes of every full block of `tokens` (tokens.size() / block_size_tokens of them).
std::vector<BlockHash> hash_full_blocks(CacheNamespace ns, std::span<const int32_t> tokens,
                                        int32_t block_size_tokens,
                                        BlockHashFn hash_fn = &hash_block_tokens);

}  // namespace hinge::kv
