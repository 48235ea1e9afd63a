#include "common/membw.h"

#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <vector>

#include "common/thread_pool.h"

namespace hinge {

namespace {

volatile uint64_t g_sink = 0;

// Sums 64-bit words with 8 independent accumulators (auto-vectorized at -O3 to full-width
// loads; the adds are far cheaper than the memory traffic).
uint64_t sum_words(const uint64_t* p, int64_t n) {
  uint64_t a[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int k = 0; k < 8; ++k) a[k] += p[i + k];
  for (; i < n; ++i) a[0] += p[i];
  uint64_t s = 0;
  for (uint64_t v : a) s += v;
  return s;
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
      const int64_t per = n / nt, b = tid * per, e = tid == nt - 1 ? n : b + per;
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
