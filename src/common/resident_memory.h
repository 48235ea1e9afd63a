// How much of this process, and of given mappings, is in RAM now (/proc/self/statm, pagemap).
#pragma once

#include <cstdint>
#include <span>

namespace hinge {

// VmRSS of this process in bytes (0 when /proc is not there).
int64_t process_resident_bytes();
// Bytes of these mappings mapped in this process now (its page tables: /proc/self/pagemap;
// mincore, which also counts file pages only the page cache holds, when pagemap cannot be
// read), page-rounded: what they add to VmRSS.
int64_t resident_bytes_of(std::span<const std::span<const uint8_t>> mappings);

}  // namespace hinge
