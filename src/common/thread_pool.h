// ThreadPool: a fixed set of persistent workers for data-parallel kernels.
// The calling thread takes part as thread 0, so ThreadPool(1) runs everything inline.
// run() is not reentrant and must be called from one thread at a time (the engine thread).
// Workers spin briefly on a generation counter, then sleep with atomic wait, so back-to-back
// small kernels (decode of a tiny model) do not pay a futex wake-up each.
#pragma once

#include <atomic>
#include <cstdint>
#include <thread>
#include <type_traits>
#include <vector>

namespace hinge {

// A spin-wait hint (x86 pause): for loops that poll an atomic another core will change soon.
inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

class ThreadPool {
 public:
  explicit ThreadPool(int num_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return num_threads_; }

  // Calls fn(thread_index, num_threads) on every thread and returns when all have finished.
  template <typename F>
  void run(F&& fn) {
    using Fn = std::remove_reference_t<F>;
    run_erased([](void* ctx, int tid, int nt) { (*static_cast<Fn*>(ctx))(tid, nt); },
               const_cast<void*>(static_cast<const void*>(&fn)));
  }

  // Splits [0, n) into contiguous ranges, one per thread, each a multiple of `align` items
  // (except the last); calls fn(begin, end) for each non-empty range.
  template <typename F>
  void parallel_for(int64_t n, int64_t align, F&& fn) {
    if (n <= 0) return;
    if (num_threads_ == 1 || n <= align) {
      fn(int64_t{0}, n);
      return;
    }
    run([&](int tid, int nt) {
      const int64_t units = (n + align - 1) / align;
      const int64_t per = units / nt, rem = units % nt;
      const int64_t ub = tid * per + (tid < rem ? tid : rem);
      const int64_t ue = ub + per + (tid < rem ? 1 : 0);
      const int64_t b = ub * align, e = ue * align < n ? ue * align : n;
      if (b < e) fn(b, e);
    });
  }

 private:
  using Erased = void (*)(void*, int, int);
  void run_erased(Erased fn, void* ctx);
  void worker_loop(int tid);

  int num_threads_;
  std::vector<std::thread> workers_;
  std::atomic<uint32_t> generation_{0};
  std::atomic<int> pending_{0};
  std::atomic<bool> stop_{false};
  Erased fn_ = nullptr;
  void* ctx_ = nullptr;
};

// Number of hardware threads (at least 1).
int hardware_threads();

}  // namespace hinge
