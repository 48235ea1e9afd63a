// Software prefetch of the packed kernels' weights (matmul_amx_vnni-inl.h,
// matmul_rowgroups_avx2.cpp): how far ahead of the block being read, into which cache, and
// the HINGE_*_PREFETCH switches that set one plan for A/B runs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>

#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#endif

namespace hinge::kernels {

struct Prefetch {
  int hint = -1;       // -1 none, 0 _MM_HINT_T0, 1 _MM_HINT_T1
  int64_t bytes = 0;   // how far ahead of the block being read
};

// The plan the environment variable `name` sets: none | t0:BYTES | t1:BYTES. Unset: nullopt;
// anything else: a warning on stderr, and nullopt.
inline std::optional<Prefetch> prefetch_from_env(const char* name) {
  const char* e = std::getenv(name);
  if (e == nullptr || *e == 0) return std::nullopt;
  if (std::strcmp(e, "none") == 0) return Prefetch{-1, 0};
  if ((e[0] == 't' || e[0] == 'T') && (e[1] == '0' || e[1] == '1') && e[2] == ':') {
    const long long bytes = std::atoll(e + 3);
    return Prefetch{e[1] - '0', bytes < 0 ? 0 : static_cast<int64_t>(bytes)};
  }
  std::fprintf(stderr, "hinge: %s is not none, t0:BYTES or t1:BYTES; ignored\n", name);
  return std::nullopt;
}

// Prefetches the 64-byte lines [p, p + bytes) with the hint (-1: nothing).
#if defined(__GNUC__) || defined(__clang__)
__attribute__((always_inline))
#endif
inline void prefetch_lines(const void* p, size_t bytes, int hint) {
#if defined(__x86_64__) || defined(__i386__)
  const char* c = static_cast<const char*>(p);
  if (hint == 0) {
    for (size_t l = 0; l < bytes; l += 64) _mm_prefetch(c + l, _MM_HINT_T0);
  } else if (hint == 1) {
    for (size_t l = 0; l < bytes; l += 64) _mm_prefetch(c + l, _MM_HINT_T1);
  }
#else
  (void)p;
  (void)bytes;
  (void)hint;
#endif
}

}  // namespace hinge::kernels
