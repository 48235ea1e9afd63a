// matmul throughput per weight type: 2048x2048 and 576x1536 ([rows, cols]), 1 token (decode,
// memory-bound: read GB/s of weights is the number to watch) and 32 tokens (prefill), 2 threads.
//
// Each case rotates through enough copies of the weight matrix to total >= 128 MiB, so weights
// stream from DRAM as in a real model instead of sitting in a 32 MiB L3.
//
//   hinge_kernel_bench --benchmark_filter=Matmul
//   HINGE_BENCH_THREADS=1 HINGE_BENCH_STREAM_MIB=0 hinge_kernel_bench   # 1 core, weights cached
#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <tuple>
#include <vector>

#include "common/ggml_type.h"
#include "common/thread_pool.h"
#include "kernels/matmul.h"
#include "kernels/matmul_packed.h"
#include "kernels/matmul_kernels.h"
#include "kernels/quant.h"

namespace hinge::kernels {
namespace {

constexpr GgmlType kTypes[] = {GgmlType::F32,  GgmlType::F16,  GgmlType::BF16, GgmlType::Q8_0,
                               GgmlType::Q4_0, GgmlType::Q4_K, GgmlType::Q6_K};
constexpr size_t kDefaultStreamMiB = 128;  // override with HINGE_BENCH_STREAM_MIB (0: in-cache)
constexpr int kDefaultThreads = 2;         // override with HINGE_BENCH_THREADS

size_t stream_bytes() {
  const char* env = std::getenv("HINGE_BENCH_STREAM_MIB");
  return (env ? static_cast<size_t>(std::atoi(env)) : kDefaultStreamMiB) << 20;
}

int bench_threads() {
  const char* env = std::getenv("HINGE_BENCH_THREADS");
  return env && std::atoi(env) > 0 ? std::atoi(env) : kDefaultThreads;
}

// A rows x cols matrix of `type` with N(0, 0.05) weights, seeded, in GGUF form.
std::vector<uint8_t> random_matrix(GgmlType type, int64_t rows, int64_t cols) {
  const size_t row_bytes = ggml_row_bytes(*ggml_type_traits(type), static_cast<uint64_t>(cols));
  std::vector<uint8_t> out(row_bytes * static_cast<size_t>(rows));
  std::mt19937 rng(42);
  std::normal_distribution<float> dist(0.0f, 0.05f);
  std::vector<float> row(static_cast<size_t>(cols));
  for (int64_t r = 0; r < rows; ++r) {
    for (auto& v : row) v = dist(rng);
    quantize_row_ref(type, row.data(), out.data() + r * row_bytes, cols);
  }
  return out;
}

struct WeightSet {
  size_t matrix_bytes = 0;
  std::vector<std::vector<uint8_t>> copies;  // identical contents, distinct memory
};

const WeightSet& weights(GgmlType type, int64_t rows, int64_t cols) {
  static std::map<std::tuple<GgmlType, int64_t, int64_t>, std::unique_ptr<WeightSet>> cache;
  auto& slot = cache[{type, rows, cols}];
  if (slot) return *slot;
  slot = std::make_unique<WeightSet>();
  const size_t row_bytes = ggml_row_bytes(*ggml_type_traits(type), static_cast<uint64_t>(cols));
  slot->matrix_bytes = row_bytes * static_cast<size_t>(rows);
  const std::vector<uint8_t> first = random_matrix(type, rows, cols);
  const size_t num_copies =
      std::clamp<size_t>((stream_bytes() + slot->matrix_bytes - 1) / slot->matrix_bytes, 1, 64);
  for (size_t i = 0; i < num_copies; ++i) slot->copies.push_back(first);
  return *slot;
}

void BM_Matmul(benchmark::State& state) {
  const GgmlType type = kTypes[state.range(0)];
  const int64_t rows = state.range(1), cols = state.range(2), tokens = state.range(3);
  const WeightSet& ws = weights(type, rows, cols);
  std::vector<float> x(static_cast<size_t>(tokens * cols));
  std::mt19937 rng(7);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  for (auto& v : x) v = dist(rng);
  std::vector<float> y(static_cast<size_t>(tokens * rows));
  ThreadPool pool(bench_threads());
  MatmulScratch scratch;
  MatrixView w;
  w.type = type;
  w.rows = rows;
  w.cols = cols;
  w.row_bytes = ggml_row_bytes(*ggml_type_traits(type), static_cast<uint64_t>(cols));
  size_t copy = 0;
  for (auto _ : state) {
    w.data = ws.copies[copy].data();
    copy = copy + 1 == ws.copies.size() ? 0 : copy + 1;
    matmul(w, x.data(), tokens, y.data(), pool, scratch);
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) *
                          static_cast<int64_t>(ws.matrix_bytes));
  state.counters["GFLOPS"] = benchmark::Counter(2.0 * rows * cols * tokens * 1e-9,
                                                benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(std::string(ggml_type_name(type)));
}

void MatmulArgs(benchmark::internal::Benchmark* b) {
  b->ArgNames({"type", "rows", "cols", "tokens"});
  for (int t = 0; t < static_cast<int>(std::size(kTypes)); ++t)
    for (auto [rows, cols] : {std::pair<int64_t, int64_t>{2048, 2048}, {576, 1536}})
      for (int64_t tokens : {1, 32}) b->Args({t, rows, cols, tokens});
}

BENCHMARK(BM_Matmul)->Apply(MatmulArgs)->UseRealTime()->Unit(benchmark::kMicrosecond);

// [tokens, cols] N(0, 1) activations, seeded.
std::vector<float> random_activations(int64_t tokens, int64_t cols) {
  std::vector<float> x(static_cast<size_t>(tokens * cols));
  std::mt19937 rng(7);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  for (auto& v : x) v = dist(rng);
  return x;
}

// A view of a rows x cols matrix of `type` (data set by the caller).
MatrixView view_of(GgmlType type, int64_t rows, int64_t cols) {
  MatrixView w;
  w.type = type;
  w.rows = rows;
  w.cols = cols;
  w.row_bytes = ggml_row_bytes(*ggml_type_traits(type), static_cast<uint64_t>(cols));
  return w;
}

// Q8_0 at the shapes of a smollm-135m layer (576 hidden, 1536 FFN, 49152 vocab) for batched
// decode / prefill token counts, 1 and 2 threads (the thread count is an argument here, not
// HINGE_BENCH_THREADS).
//
//   hinge_kernel_bench --benchmark_filter=MatmulQ8Batch --benchmark_repetitions=5
void BM_MatmulQ8Batch(benchmark::State& state) {
  const int64_t rows = state.range(0), cols = state.range(1), tokens = state.range(2);
  const int threads = static_cast<int>(state.range(3));
  const WeightSet& ws = weights(GgmlType::Q8_0, rows, cols);
  const std::vector<float> x = random_activations(tokens, cols);
  std::vector<float> y(static_cast<size_t>(tokens * rows));
  ThreadPool pool(threads);
  MatmulScratch scratch;
  MatrixView w = view_of(GgmlType::Q8_0, rows, cols);
  size_t copy = 0;
  for (auto _ : state) {
    w.data = ws.copies[copy].data();
    copy = copy + 1 == ws.copies.size() ? 0 : copy + 1;
    matmul(w, x.data(), tokens, y.data(), pool, scratch);
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  state.counters["GFLOPS"] = benchmark::Counter(2.0 * rows * cols * tokens * 1e-9,
                                                benchmark::Counter::kIsIterationInvariantRate);
}

void MatmulQ8BatchArgs(benchmark::internal::Benchmark* b) {
  b->ArgNames({"rows", "cols", "tokens", "threads"});
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{576, 576}, {1536, 576}, {576, 1536},
                            {49152, 576}})
    for (int64_t tokens : {1, 4, 16, 64})
      for (int64_t threads : {1, 2}) b->Args({rows, cols, tokens, threads});
}

BENCHMARK(BM_MatmulQ8Batch)
    ->Apply(MatmulQ8BatchArgs)
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

// Q8_0 / Q4_0 / Q4_K / F16 / BF16 / Q6_K / Q5_K at an FFN shape for prefill-sized batches, in
// the GGUF layout and packed in the layout this CPU's choice gives (kernels/kernel_choice.h: row
// groups, VNNI pairs, bf16 tiles; skipped where none runs). One weight copy: this measures the
// compute-bound kernel, the weights staying in cache across iterations.
//
//   hinge_kernel_bench --benchmark_filter=MatmulPrefill --benchmark_repetitions=5
void BM_MatmulPrefill(benchmark::State& state) {
  constexpr GgmlType kTypes[] = {GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q4_K, GgmlType::F16,
                                 GgmlType::BF16, GgmlType::Q6_K, GgmlType::Q5_K};
  const GgmlType type = kTypes[state.range(0)];
  const bool packed = state.range(1) != 0;
  const int64_t rows = state.range(2), cols = state.range(3), tokens = state.range(4);
  const int threads = static_cast<int>(state.range(5));
  if (packed && !packed_matmul_supported(type)) {
    state.SkipWithError("no packed kernel on this CPU");
    return;
  }
  const WeightSet& ws = weights(type, rows, cols);
  const std::vector<float> x = random_activations(tokens, cols);
  std::vector<float> y(static_cast<size_t>(tokens * rows));
  ThreadPool pool(threads);
  MatmulScratch scratch;
  MatrixView w = view_of(type, rows, cols);
  w.data = ws.copies[0].data();
  std::unique_ptr<PackedMatrix> pm;
  if (packed) {
    pm = pack_matrix(w, pool);
    w.packed = pm.get();
  }
  for (auto _ : state) {
    matmul(w, x.data(), tokens, y.data(), pool, scratch);
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  state.counters["GFLOPS"] = benchmark::Counter(2.0 * rows * cols * tokens * 1e-9,
                                                benchmark::Counter::kIsIterationInvariantRate);
}

void MatmulPrefillArgs(benchmark::internal::Benchmark* b) {
  b->ArgNames({"type", "packed", "rows", "cols", "tokens", "threads"});
  // A small model's projection (all in L2), a large one's down projection (x outgrows L2) and
  // its gate / up projection (the outputs outgrow L2).
  for (auto [rows, cols] :
       {std::pair<int64_t, int64_t>{1536, 576}, {2048, 8192}, {8192, 2048}})
    for (int64_t type : {0, 1, 2, 3, 4, 5, 6})
      for (int64_t packed : {0, 1})
        for (int64_t tokens : {16, 512})
          for (int64_t threads : {1, 2})
            if (!((type == 2 || type >= 5) && cols % 256 != 0))
              b->Args({type, packed, rows, cols, tokens, threads});
}

BENCHMARK(BM_MatmulPrefill)
    ->Apply(MatmulPrefillArgs)
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

// Single-token decode in each weight layout, streaming from DRAM: a 2048 x 8192 matrix (llama-1b's
// FFN down shape) in as many packed copies as make >= 256 MiB, cycled, so every call reads its
// weights from memory as a model's decode step does. Bytes/s is the number to hold against
// `hinge bench --membw` with the same threads.
//
//   hinge_kernel_bench --benchmark_filter=MatmulDecode --benchmark_repetitions=5
void BM_MatmulDecode(benchmark::State& state) {
  constexpr GgmlType kDecodeTypes[] = {GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q4_K,
                                       GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::F16,
                                       GgmlType::BF16};
  const GgmlType type = kDecodeTypes[state.range(0)];
  // 0 gguf, 1 row-groups (F16 / BF16: bf16 tiles where they run, else the AVX2 float row
  // groups), 2 vnni-pairs
  const int layout = static_cast<int>(state.range(1));
  const int threads = static_cast<int>(state.range(2));
  // HINGE_BENCH_ROWS: another row count (e.g. 64: 0.5 MiB of Q8_0, in L2) to see the kernel's
  // own rate apart from memory.
  const int64_t rows = std::getenv("HINGE_BENCH_ROWS") ? std::atoll(std::getenv("HINGE_BENCH_ROWS")) : 2048;
  // HINGE_BENCH_COLS: another column count (e.g. 576 with HINGE_BENCH_ROWS=576: a small model's
  // attention projection, where the per-call start-up shows).
  const int64_t cols = std::getenv("HINGE_BENCH_COLS") ? std::atoll(std::getenv("HINGE_BENCH_COLS")) : 8192;
  const bool float_type = type == GgmlType::F16 || type == GgmlType::BF16;
  const PackedLayout float_layout = packed_layout_supported(type, PackedLayout::kBf16Tiles)
                                       ? PackedLayout::kBf16Tiles
                                       : PackedLayout::kFloatGroups;
  const PackedLayout packed_layout = layout == 2   ? PackedLayout::kVnniPairs
                                     : float_type ? float_layout
                                                  : PackedLayout::kAmxTiles;
  if (layout != 0 && !packed_layout_supported(type, packed_layout)) {
    state.SkipWithError("layout does not run this type on this CPU");
    return;
  }
  ThreadPool pool(threads);
  MatrixView base = view_of(type, rows, cols);
  const size_t matrix_bytes = base.row_bytes * static_cast<size_t>(rows);
  // One GGUF matrix, then copies (packed ones where a layout is asked for) totalling 256 MiB.
  // Only the current case's copies are kept (256 MiB each).
  static std::tuple<GgmlType, int, int64_t> key{GgmlType::F32, -1, 0};
  static std::vector<std::pair<std::vector<uint8_t>, std::unique_ptr<PackedMatrix>>> set;
  if (key != std::make_tuple(type, layout, rows)) {
    key = {type, layout, rows};
    set.clear();
    const std::vector<uint8_t> first = random_matrix(type, rows, cols);
    // HINGE_BENCH_STREAM_MIB=0: one copy (16 MiB of Q8_0: L3 where it is that large).
    const size_t copies = std::getenv("HINGE_BENCH_STREAM_MIB") != nullptr
                              ? stream_bytes() / matrix_bytes + 1
                              : (size_t{256} << 20) / matrix_bytes + 1;
    for (size_t i = 0; i < copies; ++i) {
      set.emplace_back(first, nullptr);
      if (layout != 0) {
        MatrixView v = base;
        v.data = set.back().first.data();
        set.back().second = pack_matrix(v, pool, packed_layout);
        set.back().first.clear();
        set.back().first.shrink_to_fit();
      }
    }
  }
  const std::vector<float> x = random_activations(1, cols);
  std::vector<float> y(static_cast<size_t>(rows));
  MatmulScratch scratch;
  size_t copy = 0;
  for (auto _ : state) {
    MatrixView w = base;
    w.data = set[copy].first.empty() ? nullptr : set[copy].first.data();
    w.packed = set[copy].second.get();
    copy = copy + 1 == set.size() ? 0 : copy + 1;
    matmul(w, x.data(), 1, y.data(), pool, scratch);
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) *
                          static_cast<int64_t>(matrix_bytes));
  static const char* kLayoutNames[] = {"gguf", "row-groups", "vnni-pairs"};
  state.SetLabel(fmt::format("{} {}", ggml_type_name(type),
                             float_type && packed_layout == PackedLayout::kBf16Tiles && layout == 1
                                 ? "bf16-tiles"
                                 : kLayoutNames[layout]));
}

void MatmulDecodeArgs(benchmark::internal::Benchmark* b) {
  b->ArgNames({"type", "layout", "threads"});
  for (int64_t type : {0, 1, 2, 3, 4, 5, 6})
    for (int64_t layout : {0, 1, 2})
      for (int64_t threads : {1, 2})
        if (!(layout == 2 && type >= 2))
          b->Args({type, layout, threads});
}

BENCHMARK(BM_MatmulDecode)->Apply(MatmulDecodeArgs)->UseRealTime()->Unit(benchmark::kMicrosecond);

// The per-call activation quantization matmul does before the integer kernels (one token row).
void BM_QuantizeActivation(benchmark::State& state) {
  const GgmlType act = state.range(0) == 0 ? GgmlType::Q8_0 : GgmlType::Q8_K;
  const int64_t cols = state.range(1);
  std::vector<float> x(static_cast<size_t>(cols));
  std::mt19937 rng(3);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  for (auto& v : x) v = dist(rng);
  std::vector<uint8_t> out(ggml_row_bytes(*ggml_type_traits(act), static_cast<uint64_t>(cols)));
  for (auto _ : state) {
    quantize_activation_row(act, x.data(), out.data(), cols);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.SetLabel(std::string(ggml_type_name(act)));
}
BENCHMARK(BM_QuantizeActivation)->Args({0, 2048})->Args({1, 2048});

}  // namespace
}  // namespace hinge::kernels
