#include "common/units.h"

#include <cctype>
#include <cmath>
#include <cstdlib>

#include <fmt/format.h>

namespace hinge {

std::string format_bytes(uint64_t bytes) {
  static const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024.0 && u < 4) {
    v /= 1024.0;
    ++u;
  }
  if (u == 0) return fmt::format("{} B", bytes);
  return v < 10 ? fmt::format("{:.2f} {}", v, kUnits[u]) : fmt::format("{:.1f} {}", v, kUnits[u]);
}

std::string format_count(uint64_t n) {
  if (n >= 1000000000ull) return fmt::format("{:.2f}B", n / 1e9);
  if (n >= 1000000ull) return fmt::format("{:.1f}M", n / 1e6);
  if (n >= 10000ull) return fmt::format("{:.1f}K", n / 1e3);
  return fmt::format("{}", n);
}

std::optional<uint64_t> parse_bytes(std::string_view text) {
  std::string s(text);
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (end == s.c_str() || !std::isfinite(v) || v < 0) return std::nullopt;
  std::string unit(end);
  for (auto& c : unit) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  double mult = 1;
  if (unit.empty() || unit == "b") mult = 1;
  else if (unit == "k" || unit == "kib") mult = 1024.0;
  else if (unit == "m" || unit == "mib") mult = 1024.0 * 1024;
  else if (unit == "g" || unit == "gib") mult = 1024.0 * 1024 * 1024;
  else if (unit == "t" || unit == "tib") mult = 1024.0 * 1024 * 1024 * 1024;
  else if (unit == "kb") mult = 1e3;
  else if (unit == "mb") mult = 1e6;
  else if (unit == "gb") mult = 1e9;
  else if (unit == "tb") mult = 1e12;
  else return std::nullopt;
  const double bytes = v * mult;
  if (bytes > 1.8e19) return std::nullopt;
  return static_cast<uint64_t>(bytes);
}

}  // namespace hinge
