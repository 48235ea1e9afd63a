// Tenancy: who may call the server and which prefix-cache namespace each request lives in.
// Pure (no I/O, no clock): the tenants file's text in, immutable values out; tenant_registry.h
// holds the live configuration and reloads it.
//
// A cache is a copy of someone's data and inherits its boundaries. The namespace of a request
// is derived by the server, never chosen by the client:
//
//   ns = BLAKE2b-256(key = server secret,
//                    "hinge-cache-ns-v1" | u64 len | tenant id | i64 permission version |
//                    u8 has_salt | u64 len | cache_salt | u8 has_key | u64 len | prompt_cache_key)
//
// (u64/i64 little-endian, every variable field length-prefixed: no two different tuples encode
// alike). `cache_salt` (vLLM's) and `prompt_cache_key` (OpenAI's) only split a tenant's own
// cache; `user`, headers and every other field have no say. The secret comes from
// --cache-secret-file or is random at start (nothing persists across restarts by accident).
// A permission version change gives the tenant a new namespace: its old entries miss at once.
//
// API keys are stored as lowercase hex SHA-256 digests of the key's UTF-8 bytes; the key a
// request presents is hashed and compared against every digest in constant time (all of them,
// no early exit), so neither timing nor the file reveals a key.
//
// The tenants file (JSON, UTF-8; strict: unknown fields, duplicate keys, wrong types and bad
// values are errors naming the line and the field, e.g. "line 7: tenants[0].cache_share: must
// be in (0, 1], got 1.5"):
//   {"tenants": [{"id": "acme",                      1-64 of [A-Za-z0-9._-], unique
//                 "api_keys_sha256": ["<64 hex>"],   at least one; unique across the file
//                 "permission_version": 3,           integer >= 0 (default 0)
//                 "cache_ttl_s": 3600,               >= 0 seconds, 0: no limit (default: --cache-ttl)
//                 "cache_share": 0.25,               (0, 1] of the KV pool (default 1)
//                 "max_concurrent": 8,               queued + running, 0: no cap (default 0)
//                 "max_priority": "interactive"}],   or "batch" (default "interactive")
//    "admin_api_keys_sha256": ["<64 hex>"],          optional
//    "public_prefixes": [{"id": "...", "text": "..."}]}  optional; ids unique, text non-empty
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "kv/kv_ids.h"
#include "sched/request_types.h"

namespace hinge::server {

using KeyDigest = std::array<uint8_t, 32>;
using CacheSecret = std::array<uint8_t, 32>;

struct TenantConfig {
  std::string id;
  std::vector<KeyDigest> key_digests;
  int64_t permission_version = 0;
  std::optional<double> cache_ttl_s;  // absent: the server's --cache-ttl
  double cache_share = 1.0;
  int32_t max_concurrent = 0;
  sched::Priority max_priority = sched::Priority::kInteractive;
};

struct PublicPrefixConfig {
  std::string id;
  std::string text;
};

struct TenantsConfig {
  std::vector<TenantConfig> tenants;
  std::vector<KeyDigest> admin_digests;
  std::vector<PublicPrefixConfig> public_prefixes;
  const TenantConfig* find(std::string_view id) const;
};

// Parses and validates the tenants file's text (see above). Errors name line and field.
StatusOr<TenantsConfig> parse_tenants(std::string_view text);

// SHA-256 of the key's bytes.
KeyDigest key_digest(std::string_view key);
std::string digest_hex(const KeyDigest& d);
// Lowercase 64-hex-digit text -> digest; nullopt otherwise.
std::optional<KeyDigest> parse_digest_hex(std::string_view hex);
// A fresh key: "hk-" + base64url (no padding) of 32 random bytes from libsodium.
std::string new_api_key();
CacheSecret random_cache_secret();
// The secret file's bytes: 32 raw bytes, or 64 hex digits (a trailing newline allowed).
StatusOr<CacheSecret> parse_cache_secret(std::string_view bytes);

// The namespace of (tenant, version, salts) under the server secret (see above). The shared
// namespace of a server without tenants is tenant "" version 0.
kv::CacheNamespace derive_namespace(const CacheSecret& secret, std::string_view tenant_id,
                                    int64_t permission_version,
                                    const std::optional<std::string>& cache_salt,
                                    const std::optional<std::string>& prompt_cache_key);
// The KV tier group of a tenant's permission version (kv::CacheScope::tier_group): its blocks
// on disk and in Redis are deleted together when it is purged or the version bumped. Non-zero.
uint64_t tier_group(const CacheSecret& secret, std::string_view tenant_id, int64_t permission_version);
// The namespace of a public prefix (shared by every tenant).
kv::CacheNamespace public_prefix_namespace(const CacheSecret& secret, std::string_view prefix_id);

// A request's priority under its tenant's max_priority: lowered to it, never raised
// (interactive > batch).
constexpr sched::Priority capped_priority(sched::Priority requested, sched::Priority max_priority) {
  return requested < max_priority ? max_priority : requested;  // kInteractive = 0 < kBatch = 1
}

// Who a bearer key belongs to.
struct Principal {
  enum class Kind : uint8_t { kNone, kTenant, kAdmin };
  Kind kind = Kind::kNone;
  size_t tenant_index = 0;  // into TenantsConfig::tenants, for kTenant
};
// Constant-time over every digest of the configuration: the time does not depend on which
// digest (if any) matched, nor where.
Principal authenticate(const TenantsConfig& config, std::string_view key);
// "Authorization: Bearer <key>" -> the key (case-insensitive scheme); empty when absent.
std::string_view bearer_key(std::string_view authorization_header);

}  // namespace hinge::server
