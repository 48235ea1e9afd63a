#include "common/resident_memory.h"

#include <sys/mman.h>
#include <unistd.h>

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

int64_t resident_bytes_of(std::span<const std::span<const uint8_t>> mappings) {
  const int64_t page = sysconf(_SC_PAGESIZE);
  int64_t total = 0;
  std::vector<unsigned char> vec;
  for (const auto& m : mappings) {
    if (m.empty()) continue;
    const auto begin = reinterpret_cast<uintptr_t>(m.data()) / page * page;
    const auto end = reinterpret_cast<uintptr_t>(m.data() + m.size());
    const size_t len = end - begin;
    vec.assign((len + page - 1) / page, 0);
    if (mincore(reinterpret_cast<void*>(begin), len, vec.data()) != 0) continue;
    for (unsigned char c : vec) total += (c & 1) ? page : 0;
  }
  return total;
}

}  // namespace hinge
