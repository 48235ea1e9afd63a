// Human units for sizes and rates, and parsing of sizes like "256MiB".
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace hinge {

std::string format_bytes(uint64_t bytes);       // "1.50 GiB", "12.0 MiB", "512 B"
std::string format_count(uint64_t n);           // "135.0M", "1.2B", "512"
// Parses "1024", "64KiB", "256MiB", "2GiB", "1.5GB" (SI units are powers of 1000).
std::optional<uint64_t> parse_bytes(std::string_view text);

}  // namespace hinge
