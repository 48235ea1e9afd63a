// Sampler cost per logits row: greedy, temperature alone (OpenAI's defaults), top-k 40,
// top-p 0.9 and min-p 0.05, over a 49152- and a 128256-token vocabulary (smollm, Llama 3), on
// one thread. Logits are N(0, sd) with sd 2 (a spread-out row) or 0.3 (a nearly flat one, as a
// random-weight `hinge synth` model gives: the worst case of top-p).
//
//   hinge_kernel_bench --benchmark_filter=Sampler
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "engine/sampler.h"

namespace hinge {
namespace {

struct Setting {
  float temperature;
  int32_t top_k;
  float top_p;
  float min_p;
};
constexpr Setting kSettings[] = {
    {0.0f, 0, 1.0f, 0.0f},   // 0 greedy
    {1.0f, 0, 1.0f, 0.0f},   // 1 temperature 1
    {1.0f, 40, 1.0f, 0.0f},  // 2 top-k 40
    {1.0f, 0, 0.9f, 0.0f},   // 3 top-p 0.9
    {1.0f, 0, 1.0f, 0.05f},  // 4 min-p 0.05
};

// Args: vocabulary, setting index, 10 x logit sd.
void BM_Sampler(benchmark::State& state) {
  const int64_t vocab = state.range(0);
  const Setting& s = kSettings[state.range(1)];
  std::mt19937_64 rng(1);
  std::normal_distribution<float> normal(0.0f, static_cast<float>(state.range(2)) / 10.0f);
  std::vector<float> logits(static_cast<size_t>(vocab));
  for (float& l : logits) l = normal(rng);
  SamplingParams p;
  p.temperature = s.temperature;
  p.top_k = s.top_k;
  p.top_p = s.top_p;
  p.min_p = s.min_p;
  Sampler sampler(p, vocab);
  SamplerScratch scratch;
  for (auto _ : state) benchmark::DoNotOptimize(sampler.sample(logits.data(), {}, scratch));
  state.SetItemsProcessed(state.iterations());
  static const char* const kNames[] = {"greedy", "temp1", "top_k40", "top_p0.9", "min_p0.05"};
  state.SetLabel(kNames[state.range(1)]);
}
BENCHMARK(BM_Sampler)
    ->ArgsProduct({{49152, 128256}, {0, 1, 2, 3, 4}, {20, 3}})
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace hinge
