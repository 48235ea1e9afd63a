// A KV block sealed for a tier (disk, Redis): encrypted and authenticated under a key only this
// server's secret derives, and self-describing, so that a block read back is provably the block
// asked for — same model and KV format, same namespace and chain — or is refused.
//
//   blob  = "HKVT" | version (1 byte) | AD length (2 bytes LE) | AD | nonce (24) | ciphertext
//   AD    = KV format fingerprint (8) | block size (4) | KV groups (4) | plaintext bytes (8) |
//           namespace digest (16) | chain hash (16) | tier group (8) |
//           expires at (8, unix seconds, 0: never) | KV dtypes (1 + n)
//   ciphertext = XChaCha20-Poly1305-IETF(plaintext, AD, nonce, key) (+16-byte tag)
//
// Keys (libsodium): two masters from the server secret with crypto_kdf (context "hingekvt",
// ids 1 and 2); a namespace's sealing key is BLAKE2b-256 of the namespace keyed by master 1,
// derived for each block and never stored. Names (file names, Redis keys) and the namespace
// digest are BLAKE2b keyed by master 2: nothing a store holds in the clear derives from a
// prompt without the secret. A different secret, model, KV format or namespace makes every
// block foreign: refused before decryption (the AD differs) or by the tag.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "common/status.h"
#include "kv/kv_tier.h"

namespace hinge::tier {

// What every block of one engine has in common (its AD's format part).
struct BlockFormat {
  uint64_t fingerprint = 0;     // KvCacheConfig::fingerprint: model + KV dtype + layout
  int32_t block_size = 0;       // tokens
  int32_t num_groups = 1;       // KV groups per block
  int64_t bytes_per_block = 0;  // plaintext bytes (all groups)
  std::string kv_dtypes;        // e.g. "f16/f16" (K/V), for a reader's error message
};

class BlockSealer {
 public:
  // secret: the server's 32-byte cache secret (--cache-secret-file).
  BlockSealer(std::span<const uint8_t, 32> secret, BlockFormat format);
  ~BlockSealer();
  BlockSealer(const BlockSealer&) = delete;
  BlockSealer& operator=(const BlockSealer&) = delete;

  const BlockFormat& format() const { return format_; }
  // The block's name in a store: 32 hex digits, keyed (no prompt-derived name).
  std::string name(const kv::TierBlockKey& key) const;
  // Seals plaintext (bytes_per_block bytes) into *blob (replaced). expires_at: unix seconds
  // after which the block must not hit (its tenant's TTL; 0: never), authenticated in the AD.
  void seal(const kv::TierBlockKey& key, std::span<const uint8_t> plaintext,
            std::vector<uint8_t>* blob, int64_t expires_at = 0) const;
  // Opens a blob sealed for `key` into *plaintext: an error names why it is refused
  // (truncated, another format / namespace / chain, failed authentication). *expires_at (when
  // given) gets the authenticated expiry; the caller checks it with expired().
  Status open(const kv::TierBlockKey& key, std::span<const uint8_t> blob,
              std::vector<uint8_t>* plaintext, int64_t* expires_at = nullptr) const;
  static bool expired(int64_t expires_at);
  // The expiry of a block written now with a TTL of ttl_s seconds (0: never).
  static int64_t expiry_after(double ttl_s);
  // 16 hex digits shared by every block of a chain (keyed digest of its first block): the
  // Redis Cluster hash tag that keeps a chain on one node.
  std::string chain_tag(const kv::TierBlockKey& key) const;
  // 16 hex digits naming a tier group (keyed): the prefix a purge deletes by.
  std::string group_tag(uint64_t group) const;
  // The tier group a blob says it belongs to (its AD; unauthenticated: for sorting a store's
  // entries at start, never for trusting them). Error: not a blob.
  static StatusOr<uint64_t> peek_group(std::span<const uint8_t> blob);
  // Total blob size for this format.
  int64_t blob_bytes() const;

 private:
  void ad(const kv::TierBlockKey& key, int64_t expires_at, std::vector<uint8_t>* out) const;
  void seal_key(const kv::CacheNamespace& ns, uint8_t* key32) const;
  // BLAKE2b of msg keyed by the name master, digest_bytes (<= 32) as hex.
  std::string keyed_hex(std::span<const uint8_t> msg, size_t digest_bytes) const;

  BlockFormat format_;
  std::array<uint8_t, 32> seal_master_{};
  std::array<uint8_t, 32> name_master_{};
};

}  // namespace hinge::tier
