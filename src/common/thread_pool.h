// ThreadPool: a fixed set of persistent workers for data-parallel kernels.
// The calling thread takes part as thread 0, so ThreadPool(1) runs everything inline.
// run() is not reentrant and must be called from one thread at a time (the engine thread).
// Workers spin briefly on a generation counter, then sleep with atomic wait, so back-to-back
// small kernels (decode of a tiny model) do not pay a futex wake-up each.
//
// Under CPU contention (other programs on the same cores) a spinning worker steals the core
// from the one that has work, and a descheduled worker stalls every barrier: the owner may run
// fewer workers than it has (set_active_threads: the others sleep) and spin less before
// sleeping or yielding (set_spin_limit). Both are changed between run() calls only.
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

// Spins with cpu_relax until done() holds, yielding the core after `spin_limit` polls (a thread
// that must get there may be waiting for this very core).
template <typename Done>
inline void spin_until(Done&& done, int spin_limit) {
  for (int spins = 0; !done();) {
    if (++spins < spin_limit) {
      cpu_relax();
    } else {
      std::this_thread::yield();
    }
  }
}

class ThreadPool {
 public:
  // About 2-3 ms of spinning (pause is ~20-40 ns): a decode step's gaps between kernels are far
  // shorter, so workers stay hot through a step and sleep only when the engine is idle.
  static constexpr int kDefaultSpinLimit = 1 << 17;
  // Under contention: ~30 us, then sleep (workers) or yield (barriers).
  static constexpr int kContendedSpinLimit = 1 << 10;

  explicit ThreadPool(int num_threads);  // clamped to [1, 1023]
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  // Threads run() uses now (the caller included): kernels partition work by it.
  int size() const { return active_.load(std::memory_order_relaxed); }
  // Threads the pool was made with: per-thread scratch is sized by it.
  int capacity() const { return num_threads_; }

  // Uses the first n threads (clamped to [1, capacity()]); the others sleep until needed again.
  // Not while run() is in progress (the same thread calls both).
  void set_active_threads(int n);
  // Polls before a waiting thread sleeps (workers) or yields (the caller, barriers).
  void set_spin_limit(int spins);
  int spin_limit() const { return spin_limit_.load(std::memory_order_relaxed); }

  // Calls fn(thread_index, num_threads) on every active thread and returns when all have
  // finished.
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
    if (size() == 1 || n <= align) {
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

  // generation_: a job counter above kThreadBits, the job's thread count below.
  static constexpr int kThreadBits = 10;
  static constexpr uint32_t kThreadMask = (1u << kThreadBits) - 1;

  int num_threads_;
  std::vector<std::thread> workers_;
  std::atomic<uint32_t> generation_{0};
  std::atomic<int> pending_{0};
  std::atomic<bool> stop_{false};
  std::atomic<int> active_{1};
  // generation_ when active_ last changed: a worker woken into the active set has seen every
  // job up to it (none runs while set_active_threads does).
  std::atomic<uint32_t> activation_generation_{0};
  std::atomic<int> spin_limit_{kDefaultSpinLimit};
  Erased fn_ = nullptr;
  void* ctx_ = nullptr;
};

// Number of hardware threads (at least 1).
int hardware_threads();

}  // namespace hinge
