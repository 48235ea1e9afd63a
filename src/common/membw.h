// Sustained memory read bandwidth of this machine: the physical limit of decode (every step
// streams all weights once), so benchmarks can state "% of limit".
//
// measure_read_bandwidth() maps a buffer much larger than the caches, touches every page, then
// times multi-threaded streaming reads: each thread sums its own contiguous slice (the pool's
// static split, as the matmul kernels split rows). Reported: the median and best of `reps`
// passes in bytes per second (1 GB = 1e9 bytes). The sum is kept so the reads cannot be
// optimized away.
#pragma once

#include <cstdint>

#include "common/status.h"

namespace hinge {

class ThreadPool;

struct MemBandwidth {
  double median_bytes_per_s = 0;
  double best_bytes_per_s = 0;
  int64_t buffer_bytes = 0;
  int32_t threads = 0;
  int32_t reps = 0;
};

// buffer_bytes: at least 64 MiB; reps >= 1.
StatusOr<MemBandwidth> measure_read_bandwidth(ThreadPool& pool, int64_t buffer_bytes, int32_t reps);

}  // namespace hinge
