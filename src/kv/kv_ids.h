// Strong id types of the KV bookkeeping: a BlockId cannot be passed where a RequestId is wanted.
// Plain values; thread-safety is that of an int.
#pragma once

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

// Prefix-cache namespace: requests share cached blocks only within one namespace. The server
// derives it from the tenant (tenant id + permission version), never from client input.
struct CacheNamespace {
  uint64_t value = 0;
  constexpr CacheNamespace() = default;
  constexpr explicit CacheNamespace(uint64_t v) : value(v) {}
  // XXH3-64 of the string (e.g. "tenant-a/v3").
  static CacheNamespace from_string(const char* data, size_t size);
  constexpr auto operator<=>(const CacheNamespace&) const = default;
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
