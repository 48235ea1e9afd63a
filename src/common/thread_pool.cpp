#include "common/thread_pool.h"

#include <algorithm>

namespace hinge {

int hardware_threads() {
  unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : static_cast<int>(n);
}

ThreadPool::ThreadPool(int num_threads)
    : num_threads_(std::clamp(num_threads, 1, static_cast<int>(kThreadMask))) {
  active_.store(num_threads_, std::memory_order_relaxed);
  workers_.reserve(num_threads_ - 1);
  // Workers start from generation 0 (captured here, not read in the thread: a job published
  // before a worker first runs must still be seen as new).
  for (int t = 1; t < num_threads_; ++t) workers_.emplace_back([this, t] { worker_loop(t); });
}

ThreadPool::~ThreadPool() {
  stop_.store(true, std::memory_order_release);
  generation_.fetch_add(1u << kThreadBits, std::memory_order_acq_rel);
  generation_.notify_all();
  active_.store(num_threads_, std::memory_order_release);
  active_.notify_all();
  for (auto& w : workers_) w.join();
}

void ThreadPool::set_active_threads(int n) {
  n = std::clamp(n, 1, num_threads_);
  if (n == active_.load(std::memory_order_relaxed)) return;
  activation_generation_.store(generation_.load(std::memory_order_acquire),
                               std::memory_order_relaxed);
  active_.store(n, std::memory_order_release);
  active_.notify_all();
}

void ThreadPool::set_spin_limit(int spins) {
  spin_limit_.store(std::max(spins, 1), std::memory_order_relaxed);
}

void ThreadPool::run_erased(Erased fn, void* ctx) {
  const int nt = active_.load(std::memory_order_relaxed);
  if (nt == 1) {
    fn(ctx, 0, 1);
    return;
  }
  fn_ = fn;
  ctx_ = ctx;
  pending_.store(nt - 1, std::memory_order_release);
  // The job's thread count travels in the generation word, so a worker decides whether a job
  // is its own from the very value that announced it.
  const uint32_t next = ((generation_.load(std::memory_order_relaxed) >> kThreadBits) + 1);
  generation_.store((next << kThreadBits) | static_cast<uint32_t>(nt), std::memory_order_release);
  generation_.notify_all();
  fn(ctx, 0, nt);
  spin_until([&] { return pending_.load(std::memory_order_acquire) == 0; }, spin_limit());
}

void ThreadPool::worker_loop(int tid) {
  uint32_t seen = 0;
  for (;;) {
    // Out of the active set: sleep until it grows to include this thread (or the pool stops);
    // every job published until then was for the others.
    if (int a = active_.load(std::memory_order_acquire); tid >= a) {
      while (tid >= a && !stop_.load(std::memory_order_acquire)) {
        active_.wait(a, std::memory_order_acquire);
        a = active_.load(std::memory_order_acquire);
      }
      if (stop_.load(std::memory_order_acquire)) return;
      seen = activation_generation_.load(std::memory_order_relaxed);
    }
    const int limit = spin_limit();
    int spins = 0;
    uint32_t g;
    bool left = false;
    while ((g = generation_.load(std::memory_order_acquire)) == seen) {
      if (tid >= active_.load(std::memory_order_relaxed)) {
        left = true;
        break;
      }
      if (++spins < limit) {
        cpu_relax();
      } else {
        generation_.wait(seen, std::memory_order_acquire);
      }
    }
    if (left) continue;
    seen = g;
    if (stop_.load(std::memory_order_acquire)) return;
    const int nt = static_cast<int>(g & kThreadMask);
    if (tid >= nt) continue;  // a job for fewer threads than this one
    fn_(ctx_, tid, nt);
    pending_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

}  // namespace hinge
