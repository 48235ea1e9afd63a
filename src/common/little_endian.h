// Little-endian integers in byte buffers: the on-disk and hashed layouts (session files, block
// hashes, tenant keys) are little-endian whatever the host.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace hinge {

template <typename T>
inline void store_le(uint8_t* out, T v) {
  for (size_t i = 0; i < sizeof(T); ++i) out[i] = static_cast<uint8_t>(v >> (8 * i));
}
template <typename T>
inline T load_le(const uint8_t* p) {
  T v = 0;
  for (size_t i = sizeof(T); i-- > 0;) v = static_cast<T>((v << 8) | p[i]);
  return v;
}
// Appends v's bytes (Buffer: std::vector<uint8_t> or std::string).
template <typename T, typename Buffer>
inline void append_le(Buffer* out, T v) {
  uint8_t b[sizeof(T)];
  store_le(b, v);
  out->insert(out->end(), b, b + sizeof(T));
}

}  // namespace hinge
