#include "kv/block_hash.h"

#include <xxhash.h>

#include "common/status.h"

namespace hinge::kv {

namespace {
// Separates namespace roots from any block hash seeded with a small value.
constexpr uint64_t kRootSeed = 0x6b762d726f6f7421ULL;  // "kv-root!"
}  // namespace

CacheNamespace CacheNamespace::from_string(const char* data, size_t size) {
  return CacheNamespace(XXH3_64bits(data, size));
}

BlockHash namespace_root_hash(CacheNamespace ns) {
  return BlockHash{XXH3_64bits_withSeed(&ns.value, sizeof(ns.value), kRootSeed)};
}

BlockHash hash_block_tokens(BlockHash parent, std::span<const int32_t> block_tokens) {
  return BlockHash{
      XXH3_64bits_withSeed(block_tokens.data(), block_tokens.size_bytes(), parent.value)};
}

std::vector<BlockHash> hash_full_blocks(CacheNamespace ns, std::span<const int32_t> tokens,
                                        int32_t block_size_tokens, BlockHashFn hash_fn) {
  HINGE_CHECK(block_size_tokens > 0);
  const size_t bs = static_cast<size_t>(block_size_tokens);
  std::vector<BlockHash> out;
  out.reserve(tokens.size() / bs);
  BlockHash parent = namespace_root_hash(ns);
  for (size_t i = 0; (i + 1) * bs <= tokens.size(); ++i) {
    parent = hash_fn(parent, tokens.subspan(i * bs, bs));
    out.push_back(parent);
  }
  return out;
}

}  // namespace hinge::kv
