// Keeps parser error messages to one readable line: names taken from a hostile file may hold
// newlines, control bytes or be 64 KiB long.
#pragma once

#include <fmt/format.h>

#include <string>
#include <string_view>

#include "common/status.h"

namespace hinge::format_internal {

// Escapes control bytes (\n -> \x0a) and caps the length at `max_chars`.
inline std::string one_line(std::string_view s, size_t max_chars = 1000) {
  std::string out;
  out.reserve(s.size() < max_chars ? s.size() : max_chars);
  for (unsigned char c : s) {
    if (out.size() >= max_chars) {
      out += "...";
      break;
    }
    if (c < 0x20 || c == 0x7f) {
      out += fmt::format("\\x{:02x}", c);
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

inline Status one_line(const Status& st) {
  return st.ok() ? st : Status::Error(one_line(st.message()));
}

}  // namespace hinge::format_internal
