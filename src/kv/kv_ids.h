// Strong id types of the KV bookkeeping: a BlockId cannot be passed where a RequestId is wanted.
// Plain values; thread-safety is that of an int.
#pragma once

#include <array>
#include <string_view>
#include <compare>
#include <cstddef>
#include <cstdint>
#include <functional>

namespace hinge::kv {

// Index of one physical KV block in the arena, in [0, num_blocks).
struct BlockId {
  int32_t value = -1;
  constexpr BlockId() = default;
  constexpr explicit BlockId(int32_t v) : value(v) {}
  constexpr auto operator<=>(const BlockId&) const = default;
};

// Engine-wide request id, chosen by the caller (scheduler), unique among live requests.
struct RequestId {
  uint64_t value = 0;
  constexpr RequestId() = default;
  constexpr explicit RequestId(uint64_t v) : value(v) {}
  constexpr auto operator<=>(const RequestId&) const = default;
};

// Prefix-cache namespace: requests share cached blocks only within one namespace. 256 bits: the
// server derives it (server/tenancy.h: keyed BLAKE2b-256 of tenant id, permission version and
// scope salt), never from client input alone. The pool keeps it with every cached block and
// compares it on a hit, so even colliding chain hashes of two namespaces never share a block.
// All zeros: the shared namespace of a server without tenants.
struct CacheNamespace {
  std::array<uint64_t, 4> words{};
  constexpr CacheNamespace() = default;
  // A namespace named by one number (tests, tools).
  constexpr explicit CacheNamespace(uint64_t v) : words{v, 0, 0, 0} {}
  // BLAKE2b-256 of the string (unkeyed; e.g. "tenant-a/v3" in tests).
  static CacheNamespace from_string(const char* data, size_t size);
  static CacheNamespace from_string(std::string_view s) { return from_string(s.data(), s.size()); }
  // 32 bytes, little-endian words.
  static CacheNamespace from_bytes(const uint8_t* bytes32);
  constexpr auto operator<=>(const CacheNamespace&) const = default;
};

// Who owns a cached block, for retention (TTL), quotas and purge: 0 is the shared owner (a
// server without tenants, and the operator's public prefixes); the server numbers tenants
// from 1. Owners are small dense integers (the pool keeps a table indexed by them).
inline constexpr int32_t kSharedOwner = 0;
inline constexpr int32_t kMaxCacheOwners = 1 << 16;

// Where one request's blocks live in the prefix cache: its namespace and owner, and optionally
// a public prefix: its first public_blocks full blocks belong to public_ns (owner 0, shared by
// every tenant); the chain continues in ns after them (block_hash.h, rebase_hash).
struct CacheScope {
  CacheNamespace ns;
  int32_t owner = kSharedOwner;
  CacheNamespace public_ns;
  int32_t public_blocks = 0;
  // The owner's permission version when the request arrived: entries of the owner made under
  // another one are dropped when it changes (KvCacheManager::retire_owner_epochs).
  uint64_t epoch = 0;
  // The tenant and permission version its entries belong to in a KV tier (kv/kv_tier.h), for
  // purges; derived by the server under its secret. 0: shared (no tenants, public prefixes).
  uint64_t tier_group = 0;
  constexpr CacheScope() = default;
  constexpr CacheScope(CacheNamespace n) : ns(n) {}  // NOLINT: a plain namespace is a scope
  constexpr CacheScope(CacheNamespace n, int32_t o) : ns(n), owner(o) {}
  // The namespace of full block i.
  constexpr const CacheNamespace& ns_of_block(size_t i) const {
    return i < static_cast<size_t>(public_blocks) ? public_ns : ns;
  }
  constexpr int32_t owner_of_block(size_t i) const {
    return i < static_cast<size_t>(public_blocks) ? kSharedOwner : owner;
  }
  bool operator==(const CacheScope&) const = default;
};

}  // namespace hinge::kv

template <>
struct std::hash<hinge::kv::BlockId> {
  size_t operator()(hinge::kv::BlockId id) const noexcept { return std::hash<int32_t>()(id.value); }
};
template <>
struct std::hash<hinge::kv::RequestId> {
  size_t operator()(hinge::kv::RequestId id) const noexcept {
    return std::hash<uint64_t>()(id.value);
  }
};
