#include "kv/block_hash.h"

#include <sodium.h>
#include <xxhash.h>

#include <bit>
#include <cstring>

#include "common/status.h"

namespace hinge::kv {

namespace {

constexpr char kRootTag[] = "hinge-kv-root-v1";

void init_sodium() {
  // Picks the fastest BLAKE2b implementation for this CPU; safe to call from any thread.
  static const bool ok = sodium_init() >= 0;
  HINGE_CHECK_MSG(ok, "libsodium failed to initialise");
}

void put_u64(uint8_t* out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out[i] = static_cast<uint8_t>(v >> (8 * i));
}

BlockHash from_bytes(const uint8_t* b) {
  BlockHash h;
  for (int i = 0; i < 8; ++i) {
    h.lo |= static_cast<uint64_t>(b[i]) << (8 * i);
    h.hi |= static_cast<uint64_t>(b[8 + i]) << (8 * i);
  }
  return h;
}

}  // namespace

CacheNamespace CacheNamespace::from_string(const char* data, size_t size) {
  return CacheNamespace(XXH3_64bits(data, size));
}

BlockHash namespace_root_hash(CacheNamespace ns, uint64_t fingerprint) {
  init_sodium();
  uint8_t in[sizeof kRootTag + 16];
  std::memcpy(in, kRootTag, sizeof kRootTag);
  put_u64(in + sizeof kRootTag, fingerprint);
  put_u64(in + sizeof kRootTag + 8, ns.value);
  uint8_t out[16];
  crypto_generichash(out, sizeof out, in, sizeof in, nullptr, 0);
  return from_bytes(out);
}

BlockHash hash_block_tokens(BlockHash parent, std::span<const int32_t> block_tokens) {
  static_assert(std::endian::native == std::endian::little, "token ids are hashed little-endian");
  init_sodium();
  uint8_t p[16];
  put_u64(p, parent.lo);
  put_u64(p + 8, parent.hi);
  crypto_generichash_state st;
  crypto_generichash_init(&st, nullptr, 0, 16);
  crypto_generichash_update(&st, p, sizeof p);
  crypto_generichash_update(&st, reinterpret_cast<const unsigned char*>(block_tokens.data()),
                            block_tokens.size_bytes());
  uint8_t out[16];
  crypto_generichash_final(&st, out, sizeof out);
  return from_bytes(out);
}

std::vector<BlockHash> hash_full_blocks(CacheNamespace ns, std::span<const int32_t> tokens,
                                        int32_t block_size_tokens, uint64_t fingerprint,
                                        BlockHashFn hash_fn) {
  HINGE_CHECK(block_size_tokens > 0);
  const size_t bs = static_cast<size_t>(block_size_tokens);
  std::vector<BlockHash> out;
  out.reserve(tokens.size() / bs);
  BlockHash parent = namespace_root_hash(ns, fingerprint);
  for (size_t i = 0; (i + 1) * bs <= tokens.size(); ++i) {
    parent = hash_fn(parent, tokens.subspan(i * bs, bs));
    out.push_back(parent);
  }
  return out;
}

}  // namespace hinge::kv
