#include "common/membw.h"

#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "common/thread_pool.h"

namespace hinge {

namespace {

volatile uint64_t g_sink = 0;

// Sums 64-bit words with 4 independent full-width vector accumulators, one cache line per
// step: the loads, not the adds, are the limit. The widest the CPU has is picked at run time
// (the build's baseline vectorization reads 16 bytes per load and under-reports the machine by
// a quarter on AVX-512 servers).
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
__attribute__((target("avx512f"))) uint64_t sum_words_avx512(const uint64_t* p, int64_t n) {
  __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0;
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    a0 = _mm512_add_epi64(a0, _mm512_load_si512(p + i));
    a1 = _mm512_add_epi64(a1, _mm512_load_si512(p + i + 8));
    a2 = _mm512_add_epi64(a2, _mm512_load_si512(p + i + 16));
    a3 = _mm512_add_epi64(a3, _mm512_load_si512(p + i + 24));
  }
  alignas(64) uint64_t lanes[8];
  _mm512_store_si512(lanes, _mm512_add_epi64(_mm512_add_epi64(a0, a1), _mm512_add_epi64(a2, a3)));
  uint64_t s = 0;
  for (uint64_t v : lanes) s += v;
  for (; i < n; ++i) s += p[i];
  return s;
}

__attribute__((target("avx2"))) uint64_t sum_words_avx2(const uint64_t* p, int64_t n) {
  __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    a0 = _mm256_add_epi64(a0, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i)));
    a1 = _mm256_add_epi64(a1, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 4)));
    a2 = _mm256_add_epi64(a2, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 8)));
    a3 = _mm256_add_epi64(a3, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 12)));
  }
  alignas(32) uint64_t lanes[4];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes),
                     _mm256_add_epi64(_mm256_add_epi64(a0, a1), _mm256_add_epi64(a2, a3)));
  uint64_t s = lanes[0] + lanes[1] + lanes[2] + lanes[3];
  for (; i < n; ++i) s += p[i];
  return s;
}
#endif

uint64_t sum_words_generic(const uint64_t* p, int64_t n) {
  uint64_t a[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int k = 0; k < 8; ++k) a[k] += p[i + k];
  for (; i < n; ++i) a[0] += p[i];
  uint64_t s = 0;
  for (uint64_t v : a) s += v;
  return s;
}

// p is 64-byte aligned (slices are cut on cache lines).
uint64_t sum_words(const uint64_t* p, int64_t n) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) return sum_words_avx512(p, n);
  if (__builtin_cpu_supports("avx2")) return sum_words_avx2(p, n);
#endif
  return sum_words_generic(p, n);
}

}  // namespace

StatusOr<MemBandwidth> measure_read_bandwidth(ThreadPool& pool, int64_t buffer_bytes,
                                              int32_t reps) {
  if (buffer_bytes < (64 << 20))
    return Status::Errorf("bandwidth buffer must be at least 64 MiB, got {} bytes", buffer_bytes);
  if (reps < 1) return Status::Errorf("bandwidth repetitions must be >= 1, got {}", reps);
  void* mem = ::mmap(nullptr, static_cast<size_t>(buffer_bytes), PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED)
    return Status::Errorf("cannot map {} bytes for the bandwidth test", buffer_bytes);
  // On huge pages where the kernel allows it, as the packed weights are: with 4 KiB pages the
  // page walks, not the DRAM, can set the rate.
  ::madvise(mem, static_cast<size_t>(buffer_bytes), MADV_HUGEPAGE);
  auto* words = static_cast<uint64_t*>(mem);
  const int64_t n = buffer_bytes / 8;
  // Touch every page from the thread that will read it (first-touch placement), with data that
  // is not all zero (no shared zero page).
  pool.parallel_for(n, 4096, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) words[i] = static_cast<uint64_t>(i) * 0x9E3779B97F4A7C15ull;
  });
  std::vector<double> secs;
  std::vector<uint64_t> sums(static_cast<size_t>(pool.size()), 0);
  for (int32_t r = 0; r <= reps; ++r) {  // pass 0 warms up
    const auto t0 = std::chrono::steady_clock::now();
    pool.run([&](int tid, int nt) {
      const int64_t per = n / nt / 8 * 8, b = tid * per, e = tid == nt - 1 ? n : b + per;
      sums[static_cast<size_t>(tid)] += sum_words(words + b, e - b);
    });
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (r > 0) secs.push_back(s);
  }
  uint64_t total = 0;
  for (uint64_t s : sums) total += s;
  ::munmap(mem, static_cast<size_t>(buffer_bytes));
  std::sort(secs.begin(), secs.end());
  MemBandwidth bw;
  bw.buffer_bytes = buffer_bytes;
  bw.threads = pool.size();
  bw.reps = reps;
  g_sink = total;  // the reads had an observable result
  const double bytes = static_cast<double>(n) * 8.0;
  bw.median_bytes_per_s = bytes / secs[secs.size() / 2];
  bw.best_bytes_per_s = bytes / secs.front();
  return bw;
}

}  // namespace hinge
