#include "server/tenancy.h"

#include <sodium.h>

#include <cstring>

#include "common/little_endian.h"
#include "common/sodium_init.h"

namespace hinge::server {

namespace {

void put_u64(std::string* out, uint64_t v) { append_le(out, v); }

void put_field(std::string* out, std::string_view s) {
  put_u64(out, s.size());
  out->append(s);
}

void put_optional(std::string* out, const std::optional<std::string>& s) {
  out->push_back(s ? '\1' : '\0');
  put_field(out, s ? std::string_view(*s) : std::string_view());
}

kv::CacheNamespace keyed_namespace(const CacheSecret& secret, const std::string& message) {
  ensure_sodium();
  uint8_t out[32];
  crypto_generichash(out, sizeof out, reinterpret_cast<const unsigned char*>(message.data()),
                     message.size(), secret.data(), secret.size());
  return kv::CacheNamespace::from_bytes(out);
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;  // uppercase too: the digests are lowercase by contract
}

}  // namespace

KeyDigest key_digest(std::string_view key) {
  ensure_sodium();
  KeyDigest d;
  crypto_hash_sha256(d.data(), reinterpret_cast<const unsigned char*>(key.data()), key.size());
  return d;
}

std::string digest_hex(const KeyDigest& d) {
  char hex[65];
  sodium_bin2hex(hex, sizeof hex, d.data(), d.size());
  return std::string(hex, 64);
}

std::optional<KeyDigest> parse_digest_hex(std::string_view hex) {
  if (hex.size() != 64) return std::nullopt;
  KeyDigest d;
  for (size_t i = 0; i < 32; ++i) {
    const int hi = hex_value(hex[2 * i]), lo = hex_value(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return std::nullopt;
    d[i] = static_cast<uint8_t>(hi * 16 + lo);
  }
  return d;
}

std::string new_api_key() {
  ensure_sodium();
  uint8_t raw[32];
  randombytes_buf(raw, sizeof raw);
  char b64[sodium_base64_ENCODED_LEN(32, sodium_base64_VARIANT_URLSAFE_NO_PADDING)];
  sodium_bin2base64(b64, sizeof b64, raw, sizeof raw, sodium_base64_VARIANT_URLSAFE_NO_PADDING);
  sodium_memzero(raw, sizeof raw);
  return std::string("hk-") + b64;
}

CacheSecret random_cache_secret() {
  ensure_sodium();
  CacheSecret s;
  randombytes_buf(s.data(), s.size());
  return s;
}

StatusOr<CacheSecret> parse_cache_secret(std::string_view bytes) {
  CacheSecret s;
  if (bytes.size() == 32) {
    std::memcpy(s.data(), bytes.data(), 32);
    return s;
  }
  std::string_view t = bytes;
  while (!t.empty() && (t.back() == '\n' || t.back() == '\r')) t.remove_suffix(1);
  if (auto d = parse_digest_hex(t)) return *d;
  return Status::Error(
      "the cache secret file must hold 32 raw bytes or 64 lowercase hex digits (e.g. `head -c 32 "
      "/dev/urandom > FILE`)");
}

kv::CacheNamespace derive_namespace(const CacheSecret& secret, std::string_view tenant_id,
                                    int64_t permission_version,
                                    const std::optional<std::string>& cache_salt,
                                    const std::optional<std::string>& prompt_cache_key) {
  std::string m = "hinge-cache-ns-v1";
  put_field(&m, tenant_id);
  put_u64(&m, static_cast<uint64_t>(permission_version));
  put_optional(&m, cache_salt);
  put_optional(&m, prompt_cache_key);
  return keyed_namespace(secret, m);
}

uint64_t tier_group(const CacheSecret& secret, std::string_view tenant_id, int64_t permission_version) {
  std::string m = "hinge-kv-tier-group-v1";
  put_field(&m, tenant_id);
  put_u64(&m, static_cast<uint64_t>(permission_version));
  const uint64_t g = keyed_namespace(secret, m).words[0];
  return g == 0 ? 1 : g;
}

kv::CacheNamespace public_prefix_namespace(const CacheSecret& secret, std::string_view prefix_id) {
  std::string m = "hinge-cache-public-v1";
  put_field(&m, prefix_id);
  return keyed_namespace(secret, m);
}

Principal authenticate(const TenantsConfig& config, std::string_view key) {
  Principal p;
  if (key.empty()) return p;
  const KeyDigest d = key_digest(key);
  // Every digest is compared (sodium_memcmp is constant-time) and the outcome is selected
  // without branching on which one matched.
  uint32_t found_admin = 0;
  uint32_t found_tenant = 0;
  size_t index = 0;
  for (const KeyDigest& a : config.admin_digests)
    found_admin |= static_cast<uint32_t>(sodium_memcmp(a.data(), d.data(), 32) == 0);
  for (size_t t = 0; t < config.tenants.size(); ++t) {
    for (const KeyDigest& k : config.tenants[t].key_digests) {
      const uint32_t eq = static_cast<uint32_t>(sodium_memcmp(k.data(), d.data(), 32) == 0);
      const size_t mask = static_cast<size_t>(0) - static_cast<size_t>(eq);
      index = (index & ~mask) | (t & mask);
      found_tenant |= eq;
    }
  }
  if (found_admin) p.kind = Principal::Kind::kAdmin;
  if (found_tenant) {
    p.kind = Principal::Kind::kTenant;
    p.tenant_index = index;
  }
  return p;
}

std::string_view bearer_key(std::string_view h) {
  while (!h.empty() && h.front() == ' ') h.remove_prefix(1);
  if (h.size() < 7) return {};
  static constexpr char kScheme[] = "bearer ";
  for (size_t i = 0; i < 7; ++i) {
    const char c = h[i];
    if ((c >= 'A' && c <= 'Z' ? static_cast<char>(c + 32) : c) != kScheme[i]) return {};
  }
  h.remove_prefix(7);
  while (!h.empty() && h.front() == ' ') h.remove_prefix(1);
  while (!h.empty() && (h.back() == ' ' || h.back() == '\t')) h.remove_suffix(1);
  return h;
}

}  // namespace hinge::server
