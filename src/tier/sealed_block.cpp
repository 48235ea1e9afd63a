#include "tier/sealed_block.h"

#include <sodium.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <ctime>

namespace hinge::tier {

namespace {

constexpr char kMagic[4] = {'H', 'K', 'V', 'T'};
constexpr uint8_t kVersion = 2;
constexpr size_t kHeader = 4 + 1 + 2;
constexpr size_t kNonce = crypto_aead_xchacha20poly1305_ietf_NPUBBYTES;
constexpr size_t kTag = crypto_aead_xchacha20poly1305_ietf_ABYTES;
constexpr char kKdfContext[crypto_kdf_CONTEXTBYTES + 1] = "hingekvt";

template <class T>
void put_le(std::vector<uint8_t>* out, T v) {
  for (size_t i = 0; i < sizeof(T); ++i) out->push_back(static_cast<uint8_t>(uint64_t(v) >> (8 * i)));
}

void ns_bytes(const kv::CacheNamespace& ns, uint8_t* out32) {
  for (size_t w = 0; w < 4; ++w)
    for (size_t i = 0; i < 8; ++i) out32[w * 8 + i] = static_cast<uint8_t>(ns.words[w] >> (8 * i));
}

// The 48 bytes naming a block: its namespace and chain hash, little-endian.
void block_message(const kv::CacheNamespace& ns, const kv::BlockHash& h, uint8_t* out48) {
  ns_bytes(ns, out48);
  for (size_t i = 0; i < 8; ++i) {
    out48[32 + i] = static_cast<uint8_t>(h.lo >> (8 * i));
    out48[40 + i] = static_cast<uint8_t>(h.hi >> (8 * i));
  }
}

// Offsets of the group and expiry fields within the AD.
constexpr size_t kGroupOffset = 8 + 4 + 4 + 8 + 16 + 16;
constexpr size_t kExpiryOffset = kGroupOffset + 8;

uint64_t get_le64(const uint8_t* p) {
  uint64_t v = 0;
  for (size_t i = 0; i < 8; ++i) v |= uint64_t{p[i]} << (8 * i);
  return v;
}

}  // namespace

BlockSealer::BlockSealer(std::span<const uint8_t, 32> secret, BlockFormat format)
    : format_(std::move(format)) {
  HINGE_CHECK(sodium_init() >= 0);
  crypto_kdf_derive_from_key(seal_master_.data(), seal_master_.size(), 1, kKdfContext, secret.data());
  crypto_kdf_derive_from_key(name_master_.data(), name_master_.size(), 2, kKdfContext, secret.data());
}

BlockSealer::~BlockSealer() {
  sodium_memzero(seal_master_.data(), seal_master_.size());
  sodium_memzero(name_master_.data(), name_master_.size());
}

std::string BlockSealer::keyed_hex(std::span<const uint8_t> msg, size_t digest_bytes) const {
  uint8_t digest[32];
  crypto_generichash(digest, digest_bytes, msg.data(), msg.size(), name_master_.data(), name_master_.size());
  char hex[65];
  sodium_bin2hex(hex, sizeof hex, digest, digest_bytes);
  return std::string(hex, 2 * digest_bytes);
}

std::string BlockSealer::name(const kv::TierBlockKey& key) const {
  uint8_t msg[48];
  block_message(key.ns, key.hash, msg);
  return keyed_hex(msg, 16);
}

void BlockSealer::seal_key(const kv::CacheNamespace& ns, uint8_t* key32) const {
  uint8_t msg[32];
  ns_bytes(ns, msg);
  crypto_generichash(key32, 32, msg, sizeof msg, seal_master_.data(), seal_master_.size());
}

void BlockSealer::ad(const kv::TierBlockKey& key, int64_t expires_at,
                     std::vector<uint8_t>* out) const {
  out->clear();
  put_le(out, format_.fingerprint);
  put_le(out, static_cast<uint32_t>(format_.block_size));
  put_le(out, static_cast<uint32_t>(format_.num_groups));
  put_le(out, static_cast<uint64_t>(format_.bytes_per_block));
  uint8_t ns[32];
  ns_bytes(key.ns, ns);
  uint8_t digest[16];
  // The namespace's digest (a different message length from name()'s: never equal).
  crypto_generichash(digest, sizeof digest, ns, sizeof ns, name_master_.data(), name_master_.size());
  out->insert(out->end(), digest, digest + sizeof digest);
  put_le(out, key.hash.lo);
  put_le(out, key.hash.hi);
  put_le(out, key.group);
  put_le(out, static_cast<uint64_t>(expires_at));
  const size_t n = std::min<size_t>(format_.kv_dtypes.size(), 255);
  out->push_back(static_cast<uint8_t>(n));
  out->insert(out->end(), format_.kv_dtypes.begin(), format_.kv_dtypes.begin() + static_cast<ptrdiff_t>(n));
}

int64_t BlockSealer::blob_bytes() const {
  std::vector<uint8_t> a;
  ad({}, 0, &a);
  return static_cast<int64_t>(kHeader + a.size() + kNonce + kTag) + format_.bytes_per_block;
}

void BlockSealer::seal(const kv::TierBlockKey& key, std::span<const uint8_t> plaintext,
                       std::vector<uint8_t>* blob, int64_t expires_at) const {
  std::vector<uint8_t> a;
  ad(key, std::max<int64_t>(expires_at, 0), &a);
  blob->clear();
  blob->reserve(kHeader + a.size() + kNonce + plaintext.size() + kTag);
  for (const char m : kMagic) blob->push_back(static_cast<uint8_t>(m));
  blob->push_back(kVersion);
  put_le(blob, static_cast<uint16_t>(a.size()));
  blob->insert(blob->end(), a.begin(), a.end());
  const size_t nonce_at = blob->size();
  blob->resize(nonce_at + kNonce);
  randombytes_buf(blob->data() + nonce_at, kNonce);
  const size_t ct_at = blob->size();
  blob->resize(ct_at + plaintext.size() + kTag);
  uint8_t k[32];
  seal_key(key.ns, k);
  unsigned long long clen = 0;
  crypto_aead_xchacha20poly1305_ietf_encrypt(blob->data() + ct_at, &clen, plaintext.data(),
                                             plaintext.size(), a.data(), a.size(), nullptr,
                                             blob->data() + nonce_at, k);
  sodium_memzero(k, sizeof k);
}

Status BlockSealer::open(const kv::TierBlockKey& key, std::span<const uint8_t> blob,
                         std::vector<uint8_t>* plaintext, int64_t* expires_at) const {
  if (blob.size() < kHeader || std::memcmp(blob.data(), kMagic, 4) != 0)
    return Status::Error("not a sealed KV block");
  if (blob[4] != kVersion) return Status::Errorf("sealed KV block version {}", blob[4]);
  const size_t ad_len = size_t{blob[5]} | size_t{blob[6]} << 8;
  if (blob.size() < kHeader + ad_len + kNonce + kTag || ad_len < kExpiryOffset + 8)
    return Status::Error("truncated");
  // The expiry the blob states: authenticated with the rest of the AD below.
  const auto expiry = static_cast<int64_t>(get_le64(blob.data() + kHeader + kExpiryOffset));
  std::vector<uint8_t> want;
  ad(key, expiry, &want);
  if (ad_len != want.size() || std::memcmp(blob.data() + kHeader, want.data(), ad_len) != 0)
    return Status::Error("another model, KV format, namespace or chain (foreign block)");
  const size_t ct_at = kHeader + ad_len + kNonce;
  const size_t n = blob.size() - ct_at - kTag;
  if (static_cast<int64_t>(n) != format_.bytes_per_block) return Status::Error("truncated");
  plaintext->resize(n);
  uint8_t k[32];
  seal_key(key.ns, k);
  unsigned long long mlen = 0;
  const int rc = crypto_aead_xchacha20poly1305_ietf_decrypt(
      plaintext->data(), &mlen, nullptr, blob.data() + ct_at, n + kTag, want.data(), want.size(),
      blob.data() + kHeader + ad_len, k);
  sodium_memzero(k, sizeof k);
  if (rc != 0) {
    plaintext->clear();
    return Status::Error("authentication failed (tampered or sealed under another secret)");
  }
  if (expires_at) *expires_at = expiry;
  return Status::Ok();
}

StatusOr<uint64_t> BlockSealer::peek_group(std::span<const uint8_t> blob) {
  if (blob.size() < kHeader || std::memcmp(blob.data(), kMagic, 4) != 0 || blob[4] != kVersion)
    return Status::Error("not a sealed KV block");
  const size_t ad_len = size_t{blob[5]} | size_t{blob[6]} << 8;
  if (ad_len < kGroupOffset + 8 || blob.size() < kHeader + ad_len) return Status::Error("truncated");
  return get_le64(blob.data() + kHeader + kGroupOffset);
}

bool BlockSealer::expired(int64_t expires_at) {
  return expires_at > 0 && static_cast<int64_t>(std::time(nullptr)) >= expires_at;
}

int64_t BlockSealer::expiry_after(double ttl_s) {
  if (!(ttl_s > 0)) return 0;
  return static_cast<int64_t>(std::time(nullptr)) + static_cast<int64_t>(std::ceil(ttl_s));
}

std::string BlockSealer::chain_tag(const kv::TierBlockKey& key) const {
  // Keyed like name() over the chain's first block, with an 8-byte digest (BLAKE2b's output
  // length is a parameter: never one of name()'s values), so a chain's blocks share the tag and
  // nothing about it is readable without the secret.
  uint8_t msg[48];
  block_message(key.root_ns, key.root, msg);
  return keyed_hex(msg, 8);
}

std::string BlockSealer::group_tag(uint64_t group) const {
  uint8_t msg[8];
  for (size_t i = 0; i < 8; ++i) msg[i] = static_cast<uint8_t>(group >> (8 * i));
  return keyed_hex(msg, 8);
}

}  // namespace hinge::tier
