// The thread pool's fixed cost per job: what a decode step pays for each kernel it splits across
// threads (a small model runs ~10 of them per layer, 30 layers a token).
//
//   hinge_kernel_bench --benchmark_filter=ThreadPool
#include <benchmark/benchmark.h>

#include <atomic>

#include "common/thread_pool.h"

namespace hinge {
namespace {

// One empty job on every thread, back to back: the round trip of publishing a job and waiting
// for the workers to finish it.
void BM_ThreadPoolRun(benchmark::State& state) {
  ThreadPool pool(static_cast<int>(state.range(0)));
  std::atomic<int64_t> sink{0};
  for (auto _ : state) {
    pool.run([&](int tid, int) { sink.fetch_add(tid, std::memory_order_relaxed); });
  }
  benchmark::DoNotOptimize(sink.load());
}
BENCHMARK(BM_ThreadPoolRun)->ArgName("threads")->Arg(1)->Arg(2)->UseRealTime();

}  // namespace
}  // namespace hinge
