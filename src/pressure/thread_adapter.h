// ThreadAdapter: the engine's compute threads follow the free cores (pressure/cpu_contention.h).
// Between steps, at most once per interval (a baseline is read at construction), it samples the allowed cores' CPU accounting and
// sets the pool's active threads and spin limit: fewer threads when other programs take cores,
// workers that sleep and barriers that yield sooner while contended, all threads back once the
// cores are free again. Off (EngineConfig::adapt_threads = false, --no-adapt-threads): the
// pool keeps every thread and spins as before.
//
// Thread-safety: the engine thread only.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/thread_pool.h"
#include "pressure/cpu_contention.h"

namespace hinge {

struct ThreadAdapterStats {
  int32_t threads_active = 1;
  double cpu_others_cores = 0;  // last reading
  int64_t thread_changes = 0;   // times the active thread count changed
  bool contended = false;
};

class ThreadAdapter {
 public:
  // root: where proc/stat and the cgroup files are read ("/" in production; tests inject).
  ThreadAdapter(bool enabled, int32_t max_threads, std::string root,
                double interval_seconds = 0.1);

  bool enabled() const { return enabled_; }
  // Samples when the interval has passed (steady clock, our CPU time) and applies the advice.
  void tick(ThreadPool& pool);
  // One sample at the given time and CPU time (tests drive it with readings they control).
  void sample(ThreadPool& pool, double wall_seconds, double self_cpu_seconds);
  ThreadAdapterStats stats(const ThreadPool& pool) const;

 private:
  bool enabled_;
  std::string root_;
  double interval_;
  double next_sample_ = 0;
  std::vector<int> cpus_;
  std::string buffer_;
  pressure::ThreadAdvisor advisor_;
  int64_t changes_ = 0;
};

}  // namespace hinge
