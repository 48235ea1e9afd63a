// Well-formed UTF-8 (Unicode table 3-7: no overlongs, surrogates or code points above U+10FFFF):
// the lead-byte table that the request validator and the streaming detokenizer share.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace hinge {

// For a byte: the length of the sequence it leads and the allowed range of the second byte
// (later ones are always 0x80..0xBF). len 1: ASCII; len 0: not a lead byte.
struct Utf8Lead {
  int len;
  uint8_t lo;
  uint8_t hi;
};
constexpr Utf8Lead utf8_lead(uint8_t c) {
  if (c < 0x80) return {1, 0, 0};
  if (c >= 0xC2 && c <= 0xDF) return {2, 0x80, 0xBF};
  if (c == 0xE0) return {3, 0xA0, 0xBF};  // no overlongs
  if (c == 0xED) return {3, 0x80, 0x9F};  // no surrogates
  if (c >= 0xE1 && c <= 0xEF) return {3, 0x80, 0xBF};
  if (c == 0xF0) return {4, 0x90, 0xBF};  // no overlongs
  if (c >= 0xF1 && c <= 0xF3) return {4, 0x80, 0xBF};
  if (c == 0xF4) return {4, 0x80, 0x8F};  // <= U+10FFFF
  return {0, 0, 0};
}

// True when `s` is well-formed UTF-8.
constexpr bool is_valid_utf8(std::string_view s) {
  const size_t n = s.size();
  size_t i = 0;
  while (i < n) {
    const Utf8Lead lead = utf8_lead(static_cast<uint8_t>(s[i]));
    if (lead.len == 0 || n - i < static_cast<size_t>(lead.len)) return false;
    for (int k = 1; k < lead.len; ++k) {
      const auto b = static_cast<uint8_t>(s[i + static_cast<size_t>(k)]);
      if (k == 1 ? (b < lead.lo || b > lead.hi) : (b & 0xC0) != 0x80) return false;
    }
    i += static_cast<size_t>(lead.len);
  }
  return true;
}

}  // namespace hinge
