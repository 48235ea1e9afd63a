// Paged attention decode throughput: 16 or 1 sequences x 192 tokens of context, and 1 or 4 sequences
// x 2048 (long context, few sequences), one query each, smollm-135m's attention shape (9 query
// heads, 3 KV heads, head_dim 64; HINGE_BENCH_ATTN_HEADS=32:8 for llama-1b's), KV in f32 / f16 / int8, 1 and 2 threads. bytes_per_second = K + V bytes read per call (the number to watch: decode
// attention is memory-bound).
//
// The arena holds as many layers as make >= 128 MiB of KV (one per iteration, round robin), so
// K/V stream from DRAM as in a real model instead of sitting in L3. Block tables are shuffled.
//
//   hinge_kernel_bench --benchmark_filter=PagedAttention
//   HINGE_BENCH_STREAM_MIB=0 hinge_kernel_bench --benchmark_filter=PagedAttention  # in-cache
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "common/thread_pool.h"
#include "kernels/kv_quant.h"
#include "kernels/paged_attention.h"
#include "kv/kv_spec.h"

namespace hinge::kernels {
namespace {

constexpr KvDtype kDtypes[] = {KvDtype::kF32, KvDtype::kF16, KvDtype::kInt8};
constexpr int kHeadDim = 64;

// Query and KV heads: smollm-135m's 9 / 3, or HINGE_BENCH_ATTN_HEADS=Q:KV (e.g. 32:8, llama-1b
// and most GQA models: 4 query heads per KV head).
struct Heads {
  int q = 9, kv = 3;
};
const Heads& heads() {
  static const Heads h = [] {
    Heads r;
    if (const char* env = std::getenv("HINGE_BENCH_ATTN_HEADS")) {
      int q = 0, kv = 0;
      if (std::sscanf(env, "%d:%d", &q, &kv) == 2 && q > 0 && kv > 0 && q % kv == 0) {
        r.q = q;
        r.kv = kv;
      } else {
        std::fprintf(stderr, "HINGE_BENCH_ATTN_HEADS=%s: expected Q:KV with KV dividing Q\n", env);
        std::exit(2);
      }
    }
    return r;
  }();
  return h;
}
constexpr int kBlockSize = 16;
constexpr size_t kDefaultStreamMiB = 128;  // override with HINGE_BENCH_STREAM_MIB (0: in-cache)

size_t stream_bytes() {
  const char* env = std::getenv("HINGE_BENCH_STREAM_MIB");
  return (env ? static_cast<size_t>(std::atoi(env)) : kDefaultStreamMiB) << 20;
}

struct KvSetup {
  std::vector<uint8_t> arena;
  std::vector<PagedKvLayer> layers;  // one view per layer copy
  std::vector<int32_t> tables;       // [seqs][blocks_per_seq]
  int64_t bytes_per_call = 0;        // K + V bytes one call reads
};

const KvSetup& setup(KvDtype dtype, int num_seqs, int context) {
  static std::map<std::tuple<KvDtype, int, int>, std::unique_ptr<KvSetup>> cache;
  auto& slot = cache[{dtype, num_seqs, context}];
  if (slot) return *slot;
  const int blocks_per_seq = (context + kBlockSize - 1) / kBlockSize;
  slot = std::make_unique<KvSetup>();
  KvSetup& s = *slot;
  const int64_t row = static_cast<int64_t>(kv_row_bytes(dtype, kHeadDim));
  const int64_t token = heads().kv * row;                 // K (or V) of one token
  const int64_t layer_bytes = 2 * kBlockSize * token;  // K then V region of one block
  const int num_blocks = num_seqs * blocks_per_seq;
  s.bytes_per_call = int64_t{num_seqs} * context * 2 * token;
  const int n_layers = static_cast<int>(std::clamp<int64_t>(
      static_cast<int64_t>(stream_bytes()) / (layer_bytes * num_blocks) + 1, 1, 256));
  const int64_t block_stride = n_layers * layer_bytes;
  s.arena.assign(static_cast<size_t>(block_stride * num_blocks), 0);

  s.tables.resize(static_cast<size_t>(num_blocks));
  std::iota(s.tables.begin(), s.tables.end(), 0);
  std::mt19937 rng(42);
  std::shuffle(s.tables.begin(), s.tables.end(), rng);

  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> k(static_cast<size_t>(context * heads().kv * kHeadDim)), v(k.size());
  std::vector<int64_t> slots(context);
  for (int l = 0; l < n_layers; ++l) {
    PagedKvLayer layer;
    layer.base = s.arena.data();
    layer.block_stride = block_stride;
    layer.block_size = kBlockSize;
    layer.n_kv_heads = heads().kv;
    layer.head_dim = kHeadDim;
    layer.k_dtype = layer.v_dtype = dtype;
    layer.k_offset = l * layer_bytes;
    layer.v_offset = layer.k_offset + kBlockSize * token;
    layer.k_token_stride = layer.v_token_stride = token;
    layer.k_row_bytes = layer.v_row_bytes = row;
    for (int seq = 0; seq < num_seqs; ++seq) {
      for (auto& x : k) x = dist(rng);
      for (auto& x : v) x = dist(rng);
      const int32_t* table = &s.tables[static_cast<size_t>(seq * blocks_per_seq)];
      for (int p = 0; p < context; ++p) {
        slots[static_cast<size_t>(p)] =
            int64_t{table[p / kBlockSize]} * kBlockSize + p % kBlockSize;
      }
      paged_kv_write(layer, k.data(), v.data(), slots);
    }
    s.layers.push_back(layer);
  }
  return s;
}

void BM_PagedAttentionDecode(benchmark::State& state) {
  const KvDtype dtype = kDtypes[state.range(0)];
  const int threads = static_cast<int>(state.range(1));
  const int num_seqs = static_cast<int>(state.range(2)), context = static_cast<int>(state.range(3));
  const int blocks_per_seq = (context + kBlockSize - 1) / kBlockSize;
  const KvSetup& s = setup(dtype, num_seqs, context);
  std::vector<AttentionSeq> seqs(num_seqs);
  for (int i = 0; i < num_seqs; ++i) {
    seqs[static_cast<size_t>(i)].query_begin = i;
    seqs[static_cast<size_t>(i)].num_queries = 1;
    seqs[static_cast<size_t>(i)].first_position = context - 1;
    seqs[static_cast<size_t>(i)].block_table = &s.tables[static_cast<size_t>(i * blocks_per_seq)];
    seqs[static_cast<size_t>(i)].num_blocks = blocks_per_seq;
  }
  const AttentionShape shape{heads().q, heads().kv, kHeadDim};
  std::vector<float> q(static_cast<size_t>(num_seqs * heads().q * kHeadDim)), out(q.size());
  std::mt19937 rng(7);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  for (auto& x : q) x = dist(rng);
  ThreadPool pool(threads);
  AttentionScratch scratch;
  size_t layer = 0;
  for (auto _ : state) {
    paged_attention(s.layers[layer], seqs, shape, q.data(), out.data(), pool, scratch);
    layer = layer + 1 == s.layers.size() ? 0 : layer + 1;
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * s.bytes_per_call);
  state.SetLabel(std::string(kv::kv_dtype_name(dtype)) + " threads " + std::to_string(threads));
}

void PagedAttentionArgs(benchmark::internal::Benchmark* b) {
  b->ArgNames({"dtype", "threads", "seqs", "context"});
  for (auto [seqs, context] :
       {std::pair<int64_t, int64_t>{16, 192}, {1, 192}, {1, 2048}, {4, 2048}})
    for (int t = 0; t < static_cast<int>(std::size(kDtypes)); ++t)
      for (int64_t threads : {1, 2}) b->Args({t, threads, seqs, context});
}

BENCHMARK(BM_PagedAttentionDecode)
    ->Apply(PagedAttentionArgs)
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace hinge::kernels
