// How much of this process, and of given mappings, is in RAM now (/proc, mincore).
#pragma once

#include <cstdint>
#include <span>

namespace hinge {

// VmRSS of this process in bytes (0 when /proc is not there).
int64_t process_resident_bytes();
// Bytes of these mappings resident now (mincore), page-rounded.
int64_t resident_bytes_of(std::span<const std::span<const uint8_t>> mappings);

}  // namespace hinge
