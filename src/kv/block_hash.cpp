#include "kv/block_hash.h"

#include <sodium.h>

#include <bit>
#include <cstring>

#include "common/little_endian.h"
#include "common/sodium_init.h"
#include "common/status.h"

namespace hinge::kv {

namespace {

constexpr char kRootTag[] = "hinge-kv-root-v1";

void put_u64(uint8_t* out, uint64_t v) { store_le(out, v); }

BlockHash from_bytes(const uint8_t* b) {
  BlockHash h;
  h.lo = load_le<uint64_t>(b);
  h.hi = load_le<uint64_t>(b + 8);
  return h;
}

}  // namespace

CacheNamespace CacheNamespace::from_string(const char* data, size_t size) {
  ensure_sodium();
  uint8_t out[32];
  crypto_generichash(out, sizeof out, reinterpret_cast<const unsigned char*>(data), size, nullptr, 0);
  return from_bytes(out);
}

CacheNamespace CacheNamespace::from_bytes(const uint8_t* b) {
  CacheNamespace ns;
  for (size_t w = 0; w < 4; ++w)
    for (size_t i = 0; i < 8; ++i) ns.words[w] |= static_cast<uint64_t>(b[8 * w + i]) << (8 * i);
  return ns;
}

namespace {

// B(tag, fingerprint, ns[, last]): the fixed-size fields make the encoding unambiguous.
BlockHash root_like(const char* tag, size_t tag_size, const CacheNamespace& ns,
                    uint64_t fingerprint, const BlockHash* last) {
  ensure_sodium();
  uint8_t in[32 + 8 + 32 + 16];
  HINGE_CHECK(tag_size <= 32);
  std::memset(in, 0, sizeof in);
  std::memcpy(in, tag, tag_size);
  put_u64(in + 32, fingerprint);
  for (size_t w = 0; w < 4; ++w) put_u64(in + 40 + 8 * w, ns.words[w]);
  size_t n = 72;
  if (last != nullptr) {
    put_u64(in + 72, last->lo);
    put_u64(in + 80, last->hi);
    n = 88;
  }
  uint8_t out[16];
  crypto_generichash(out, sizeof out, in, n, nullptr, 0);
  return from_bytes(out);
}

constexpr char kRebaseTag[] = "hinge-kv-rebase-v1";

}  // namespace

BlockHash namespace_root_hash(const CacheNamespace& ns, uint64_t fingerprint) {
  return root_like(kRootTag, sizeof kRootTag, ns, fingerprint, nullptr);
}

BlockHash rebase_hash(BlockHash last, const CacheNamespace& ns, uint64_t fingerprint) {
  return root_like(kRebaseTag, sizeof kRebaseTag, ns, fingerprint, &last);
}

BlockHash chain_parent(const CacheScope& scope, size_t i, std::span<const BlockHash> hashes,
                       uint64_t fingerprint) {
  const size_t p = static_cast<size_t>(scope.public_blocks);
  if (i == 0) return namespace_root_hash(p > 0 ? scope.public_ns : scope.ns, fingerprint);
  if (i == p) return rebase_hash(hashes[i - 1], scope.ns, fingerprint);
  return hashes[i - 1];
}

BlockHash hash_block_tokens(BlockHash parent, std::span<const int32_t> block_tokens) {
  static_assert(std::endian::native == std::endian::little, "token ids are hashed little-endian");
  ensure_sodium();
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

std::vector<BlockHash> hash_full_blocks(const CacheScope& scope, std::span<const int32_t> tokens,
                                        int32_t block_size_tokens, uint64_t fingerprint,
                                        BlockHashFn hash_fn) {
  HINGE_CHECK(block_size_tokens > 0);
  const size_t bs = static_cast<size_t>(block_size_tokens);
  std::vector<BlockHash> out;
  out.reserve(tokens.size() / bs);
  for (size_t i = 0; (i + 1) * bs <= tokens.size(); ++i)
    out.push_back(hash_fn(chain_parent(scope, i, out, fingerprint), tokens.subspan(i * bs, bs)));
  return out;
}

}  // namespace hinge::kv
