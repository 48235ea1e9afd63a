#include "common/resident_memory.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <vector>

namespace hinge {

int64_t process_resident_bytes() {
  FILE* f = std::fopen("/proc/self/statm", "r");
  if (!f) return 0;
  long long size = 0, resident = 0;
  const int n = std::fscanf(f, "%lld %lld", &size, &resident);
  std::fclose(f);
  if (n != 2) return 0;
  return static_cast<int64_t>(resident) * sysconf(_SC_PAGESIZE);
}

namespace {

// Pages of [begin, begin + len) mapped in this process's page tables: /proc/self/pagemap, one
// 64-bit entry per page, bit 63 "present" (readable without privileges; only the frame numbers
// are hidden). -1 when pagemap cannot be read.
int64_t present_pages(int fd, uintptr_t begin, size_t len, int64_t page) {
  constexpr size_t kChunk = 4096;  // entries per read
  std::vector<uint64_t> entries(kChunk);
  const uint64_t first = begin / static_cast<uint64_t>(page);
  const uint64_t count = (len + static_cast<size_t>(page) - 1) / static_cast<size_t>(page);
  int64_t present = 0;
  for (uint64_t i = 0; i < count; i += kChunk) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(kChunk, count - i));
    const ssize_t got = pread(fd, entries.data(), n * sizeof(uint64_t),
                              static_cast<off_t>((first + i) * sizeof(uint64_t)));
    if (got != static_cast<ssize_t>(n * sizeof(uint64_t))) return -1;
    for (size_t j = 0; j < n; ++j) present += static_cast<int64_t>(entries[j] >> 63);
  }
  return present;
}

// Pages in the page cache or RAM (mincore): for a file mapping this also counts pages other
// processes (or the page cache alone) hold, so it is only the fallback.
int64_t mincore_pages(uintptr_t begin, size_t len, int64_t page) {
  std::vector<unsigned char> vec((len + static_cast<size_t>(page) - 1) / static_cast<size_t>(page));
  if (mincore(reinterpret_cast<void*>(begin), len, vec.data()) != 0) return 0;
  int64_t n = 0;
  for (unsigned char c : vec) n += c & 1;
  return n;
}

}  // namespace

int64_t resident_bytes_of(std::span<const std::span<const uint8_t>> mappings) {
  const int64_t page = sysconf(_SC_PAGESIZE);
  const int fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
  int64_t total = 0;
  for (const auto& m : mappings) {
    if (m.empty()) continue;
    const auto begin = reinterpret_cast<uintptr_t>(m.data()) / static_cast<uintptr_t>(page) *
                       static_cast<uintptr_t>(page);
    const auto end = reinterpret_cast<uintptr_t>(m.data() + m.size());
    const size_t len = end - begin;
    int64_t pages = fd >= 0 ? present_pages(fd, begin, len, page) : -1;
    if (pages < 0) pages = mincore_pages(begin, len, page);
    total += pages * page;
  }
  if (fd >= 0) close(fd);
  return total;
}

}  // namespace hinge
