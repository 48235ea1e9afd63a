// Paged attention: the SIMD kernel against the scalar reference for every KV dtype (and every CPU
// target), the f32 kernel against naive attention computed straight from the float K/V, batch
// invariance (a sequence alone == the same sequence inside a batch, bit for bit, for 1/2/3
// threads; block size does not matter either), the kernel's dequantization bit for bit (a single
// key returns the stored V row), the write side's quantization round trip, scratch reuse and
// argument checks.
//
// Arenas are built here with the layout paged_attention.h describes, usually as layer 1 of a
// 3-layer block with padding (nonzero offsets, unaligned rows), filled with 0xFF bytes first so
// that reading any slot that was never written (past a sequence's end) turns the output into NaN.
// Block tables are shuffled, non-contiguous physical blocks.
#include <gtest/gtest.h>
#include <hwy/targets.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <utility>
#include <vector>

#include "common/thread_pool.h"
#include "kernels/kv_quant.h"
#include "kernels/paged_attention.h"
#include "kv/kv_spec.h"
#include "hwy_test_util.h"

namespace hinge::kernels {
namespace {

constexpr KvDtype kAllDtypes[] = {KvDtype::kF32,     KvDtype::kF16,     KvDtype::kBf16,
                                  KvDtype::kFp8E4m3, KvDtype::kFp8E5m2, KvDtype::kInt8,
                                  KvDtype::kInt4};

bool is_fp8(KvDtype t) {
  return t == KvDtype::kFp8E4m3 || t == KvDtype::kFp8E5m2;
}

struct ArenaLayout {
  int n_layers = 3;
  int layer = 1;
  int pad_bytes = 3;  // after the layers of each block: unaligned rows in odd blocks
  int block_size = 16;
};

struct Arena {
  std::vector<uint8_t> mem;
  PagedKvLayer layer;
};

Arena make_arena(int num_blocks, int n_kv_heads, int head_dim, KvDtype kt, KvDtype vt,
                 const ArenaLayout& al) {
  Arena a;
  PagedKvLayer& l = a.layer;
  l.block_size = al.block_size;
  l.n_kv_heads = n_kv_heads;
  l.head_dim = head_dim;
  l.k_dtype = kt;
  l.v_dtype = vt;
  l.k_row_bytes = static_cast<int64_t>(kv_row_bytes(kt, head_dim));
  l.v_row_bytes = static_cast<int64_t>(kv_row_bytes(vt, head_dim));
  l.k_token_stride = n_kv_heads * l.k_row_bytes;
  l.v_token_stride = n_kv_heads * l.v_row_bytes;
  const int64_t layer_bytes = al.block_size * (l.k_token_stride + l.v_token_stride);
  l.k_offset = al.layer * layer_bytes;
  l.v_offset = l.k_offset + al.block_size * l.k_token_stride;
  l.block_stride = al.n_layers * layer_bytes + al.pad_bytes;
  a.mem.assign(static_cast<size_t>(num_blocks * l.block_stride), 0xFF);
  l.base = a.mem.data();
  return a;
}

std::vector<float> normal(size_t n, uint32_t seed, float sigma) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, sigma);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

// A batch: sequences with their float K/V (what was written), block tables and queries.
struct SeqSpec {
  int len;          // positions 0 .. len - 1 hold K/V
  int num_queries;  // the last num_queries positions are queried
};
// The last two are longer than a key partition (512, flash-decoding): a decode row with three
// partitions, and prefill rows on both sides of the first partition boundary.
constexpr SeqSpec kSeqs[] = {{1, 1},   {15, 15},  {16, 1},   {17, 5},
                             {100, 1}, {300, 37}, {1100, 1}, {530, 23}};

struct Batch {
  int n_heads, n_kv_heads, head_dim;
  std::vector<SeqSpec> specs;
  std::vector<std::vector<float>> k, v;      // per sequence [len, n_kv * head_dim]
  std::vector<std::vector<int32_t>> tables;  // per sequence: physical block ids
  std::vector<AttentionSeq> seqs;
  std::vector<float> q;  // [rows, n_heads * head_dim]
  int rows = 0;
  int num_blocks = 0;  // physical blocks used (+ spare)
  int32_t window = 0;
  float scale = 0.0f, softcap = 0.0f;

  AttentionShape shape() const { return {n_heads, n_kv_heads, head_dim, window, scale, softcap}; }
  int64_t q_dim() const { return int64_t{n_heads} * head_dim; }
};

Batch make_batch(int n_heads, int n_kv_heads, int head_dim, int block_size, uint32_t seed) {
  Batch b{n_heads, n_kv_heads, head_dim, {std::begin(kSeqs), std::end(kSeqs)}, {}, {}, {}, {},
          {},      0,          0};
  int needed = 0;
  for (const SeqSpec& s : b.specs) needed += (s.len + block_size - 1) / block_size;
  b.num_blocks = needed + 5;  // spare blocks never referenced (still 0xFF)
  std::vector<int32_t> perm(static_cast<size_t>(b.num_blocks));
  std::iota(perm.begin(), perm.end(), 0);
  std::mt19937 rng(seed);
  std::shuffle(perm.begin(), perm.end(), rng);
  size_t next = 0;
  const size_t kv_dim = static_cast<size_t>(n_kv_heads * head_dim);
  for (size_t i = 0; i < b.specs.size(); ++i) {
    const SeqSpec& s = b.specs[i];
    b.k.push_back(normal(static_cast<size_t>(s.len) * kv_dim, seed + 100 + 2 * i, 1.0f));
    b.v.push_back(normal(static_cast<size_t>(s.len) * kv_dim, seed + 101 + 2 * i, 1.0f));
    std::vector<int32_t> table;
    for (int p = 0; p < s.len; p += block_size) table.push_back(perm[next++]);
    b.tables.push_back(std::move(table));
  }
  for (size_t i = 0; i < b.specs.size(); ++i) {
    AttentionSeq a;
    a.query_begin = b.rows;
    a.num_queries = b.specs[i].num_queries;
    a.first_position = b.specs[i].len - b.specs[i].num_queries;
    a.block_table = b.tables[i].data();
    a.num_blocks = static_cast<int32_t>(b.tables[i].size());
    b.seqs.push_back(a);
    b.rows += a.num_queries;
  }
  b.q = normal(static_cast<size_t>(b.rows * b.q_dim()), seed + 7, 2.0f);
  return b;
}

// Writes every sequence's K/V into a fresh arena (fp8 scales from the data).
Arena write_batch(const Batch& b, KvDtype kt, KvDtype vt, const ArenaLayout& al) {
  Arena a = make_arena(b.num_blocks, b.n_kv_heads, b.head_dim, kt, vt, al);
  std::vector<float> all_k, all_v;
  for (size_t i = 0; i < b.specs.size(); ++i) {
    all_k.insert(all_k.end(), b.k[i].begin(), b.k[i].end());
    all_v.insert(all_v.end(), b.v[i].begin(), b.v[i].end());
  }
  if (is_fp8(kt)) a.layer.k_scale = kv_fp8_scale_for(kt, all_k.data(), all_k.size());
  if (is_fp8(vt)) a.layer.v_scale = kv_fp8_scale_for(vt, all_v.data(), all_v.size());
  for (size_t i = 0; i < b.specs.size(); ++i) {
    std::vector<int64_t> slots;
    for (int p = 0; p < b.specs[i].len; ++p) {
      slots.push_back(int64_t{b.tables[i][static_cast<size_t>(p / al.block_size)]} * al.block_size +
                      p % al.block_size);
    }
    paged_kv_write(a.layer, b.k[i].data(), b.v[i].data(), slots);
  }
  return a;
}

std::vector<float> run_simd(const Arena& a, const Batch& b, int threads) {
  ThreadPool pool(threads);
  AttentionScratch scratch;
  std::vector<float> out(b.q.size(), -7.0f);
  paged_attention(a.layer, b.seqs, b.shape(), b.q.data(), out.data(), pool, scratch);
  return out;
}

std::vector<float> run_ref(const Arena& a, const Batch& b) {
  std::vector<float> out(b.q.size(), -7.0f);
  paged_attention_ref(a.layer, b.seqs, b.shape(), b.q.data(), out.data());
  return out;
}

// max |x - y| / max |y|, NaN-propagating (a NaN anywhere fails any <= bound).
double rel_diff(const std::vector<float>& x, const std::vector<float>& y) {
  double diff = 0.0, mag = 0.0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double d = std::fabs(static_cast<double>(x[i]) - y[i]);
    if (std::isnan(d)) return d;
    diff = std::max(diff, d);
    mag = std::max(mag, std::fabs(static_cast<double>(y[i])));
  }
  return diff / mag;
}

// Attention straight from the float K/V of the batch, in double.
std::vector<float> naive_attention(const Batch& b) {
  std::vector<float> out(b.q.size());
  const int group = b.n_heads / b.n_kv_heads, hd = b.head_dim;
  const size_t kv_dim = static_cast<size_t>(b.n_kv_heads * hd);
  for (size_t i = 0; i < b.specs.size(); ++i) {
    const AttentionSeq& s = b.seqs[i];
    for (int j = 0; j < s.num_queries; ++j) {
      const int len = s.first_position + j + 1;
      for (int h = 0; h < b.n_heads; ++h) {
        const size_t koff = static_cast<size_t>((h / group) * hd);
        const float* qh = &b.q[static_cast<size_t>((s.query_begin + j) * b.q_dim() + h * hd)];
        std::vector<double> w(static_cast<size_t>(len));
        double mx = -INFINITY, sum = 0.0;
        for (int p = 0; p < len; ++p) {
          double dot = 0.0;
          for (int d = 0; d < hd; ++d) dot += double{qh[d]} * b.k[i][p * kv_dim + koff + d];
          w[static_cast<size_t>(p)] = dot / std::sqrt(double{1.0 * hd});
          mx = std::max(mx, w[static_cast<size_t>(p)]);
        }
        for (double& x : w) sum += (x = std::exp(x - mx));
        for (int d = 0; d < hd; ++d) {
          double acc = 0.0;
          for (int p = 0; p < len; ++p)
            acc += w[static_cast<size_t>(p)] * b.v[i][p * kv_dim + koff + d];
          out[static_cast<size_t>((s.query_begin + j) * b.q_dim() + h * hd + d)] =
              static_cast<float>(acc / sum);
        }
      }
    }
  }
  return out;
}

struct Config {
  int n_heads, n_kv_heads, head_dim;
};
constexpr Config kConfigs[] = {{8, 2, 64}, {4, 4, 36}};

TEST(KernelsPagedAttention, SimdMatchesReferenceEveryDtype) {
  for (const Config& c : kConfigs) {
    const Batch b = make_batch(c.n_heads, c.n_kv_heads, c.head_dim, 16, 11);
    for (KvDtype t : kAllDtypes) {
      const Arena a = write_batch(b, t, t, ArenaLayout{});
      const auto simd = run_simd(a, b, 2);
      const auto ref = run_ref(a, b);
      EXPECT_LE(rel_diff(simd, ref), 1e-4) << kv::kv_dtype_name(t) << " heads " << c.n_heads << "/"
                                           << c.n_kv_heads << " dim " << c.head_dim;
    }
  }
  // Head size extremes.
  for (const Config& c : {Config{2, 1, 256}, Config{3, 3, 1}}) {
    const Batch b = make_batch(c.n_heads, c.n_kv_heads, c.head_dim, 16, 14);
    for (KvDtype t : {KvDtype::kF32, KvDtype::kInt4}) {
      const Arena a = write_batch(b, t, t, ArenaLayout{});
      EXPECT_LE(rel_diff(run_simd(a, b, 2), run_ref(a, b)), 1e-4)
          << kv::kv_dtype_name(t) << " dim " << c.head_dim;
    }
  }
  // K and V in different dtypes.
  const Batch b = make_batch(8, 2, 64, 16, 12);
  const Arena a = write_batch(b, KvDtype::kInt8, KvDtype::kFp8E5m2, ArenaLayout{});
  EXPECT_LE(rel_diff(run_simd(a, b, 2), run_ref(a, b)), 1e-4);
}

TEST(KernelsPagedAttention, EveryCpuTargetMatchesReference) {
  const Batch b = make_batch(8, 2, 36, 16, 13);
  const int tested = testing::for_each_cpu_target([&](int64_t target) {
    for (KvDtype t : {KvDtype::kF32, KvDtype::kF16, KvDtype::kBf16, KvDtype::kInt8, KvDtype::kInt4,
                      KvDtype::kFp8E4m3}) {
      const Arena a = write_batch(b, t, t, ArenaLayout{});
      EXPECT_LE(rel_diff(run_simd(a, b, 2), run_ref(a, b)), 1e-4)
          << kv::kv_dtype_name(t) << " on " << hwy::TargetName(target);
    }
  });
  EXPECT_GT(tested, 0);
}

// The batch with K (and / or V) replaced by what the arena holds, dequantized by the reference.
Batch stored_values(Batch b, const Arena& a, bool keys, bool values) {
  const PagedKvLayer& l = a.layer;
  for (size_t i = 0; i < b.specs.size(); ++i)
    for (int p = 0; p < b.specs[i].len; ++p)
      for (int h = 0; h < b.n_kv_heads; ++h) {
        const uint8_t* block =
            l.base + int64_t{b.tables[i][static_cast<size_t>(p / l.block_size)]} * l.block_stride;
        const size_t at = (static_cast<size_t>(p) * b.n_kv_heads + h) * b.head_dim;
        const int64_t o = p % l.block_size;
        if (keys)
          kv_dequantize_row_ref(l.k_dtype,
                                block + l.k_offset + o * l.k_token_stride + h * l.k_row_bytes,
                                b.k[i].data() + at, b.head_dim, l.k_scale);
        if (values)
          kv_dequantize_row_ref(l.v_dtype,
                                block + l.v_offset + o * l.v_token_stride + h * l.v_row_bytes,
                                b.v[i].data() + at, b.head_dim, l.v_scale);
      }
  return b;
}

// Decode rows read f16, bf16 and int8 rows in place (head_dim a multiple of the vector) and
// convert them in registers; prefill rows and other head sizes go through the f32 tile. Either
// way the values are those of f32 rows holding the stored values (dequantized by the
// reference), through the same operations: equal bit for bit, with K and V stored alike or
// apart, on every CPU target that runs here. Smollm's shape (3 query heads per KV head, the
// register-tight case) included.
TEST(KernelsPagedAttention, StoredRowsEqualF32RowsOfTheirValues) {
  const int tested = testing::for_each_cpu_target([&](int64_t target) {
    for (const Config& c : {kConfigs[0], kConfigs[1], Config{9, 3, 64}}) {
      const Batch b = make_batch(c.n_heads, c.n_kv_heads, c.head_dim, 16, 31);
      for (auto [kt, vt] :
           {std::pair{KvDtype::kF16, KvDtype::kF16}, std::pair{KvDtype::kBf16, KvDtype::kBf16},
            std::pair{KvDtype::kInt8, KvDtype::kInt8}, std::pair{KvDtype::kF16, KvDtype::kF32},
            std::pair{KvDtype::kF32, KvDtype::kInt8}}) {
        const Arena stored = write_batch(b, kt, vt, ArenaLayout{});
        const Batch f = stored_values(b, stored, kt != KvDtype::kF32, vt != KvDtype::kF32);
        const auto want =
            run_simd(write_batch(f, KvDtype::kF32, KvDtype::kF32, ArenaLayout{}), f, 2);
        const auto got = run_simd(stored, b, 2);
        ASSERT_EQ(got.size(), want.size());
        EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0)
            << "dim " << c.head_dim << " K " << kv::kv_dtype_name(kt) << " V "
            << kv::kv_dtype_name(vt) << " on " << hwy::TargetName(target);
      }
    }
  });
  EXPECT_GT(tested, 0);
}

TEST(KernelsPagedAttention, F32MatchesNaiveAttention) {
  for (const Config& c : kConfigs) {
    const Batch b = make_batch(c.n_heads, c.n_kv_heads, c.head_dim, 16, 21);
    const auto want = naive_attention(b);
    // Single-block layout too: one layer, no padding.
    for (const ArenaLayout& al : {ArenaLayout{}, ArenaLayout{1, 0, 0, 16}}) {
      const Arena a = write_batch(b, KvDtype::kF32, KvDtype::kF32, al);
      // f32 end to end: a few float roundings per score and per output element.
      EXPECT_LE(rel_diff(run_simd(a, b, 2), want), 1e-5) << "dim " << c.head_dim;
      // Double throughout, over the exact f32 values.
      EXPECT_LE(rel_diff(run_ref(a, b), want), 1e-6) << "dim " << c.head_dim;
    }
  }
}

TEST(KernelsPagedAttention, BatchInvariantAcrossThreadsAndBatchComposition) {
  for (const Config& c : kConfigs) {
    const Batch b = make_batch(c.n_heads, c.n_kv_heads, c.head_dim, 16, 31);
    for (KvDtype t : kAllDtypes) {
      const Arena a = write_batch(b, t, t, ArenaLayout{});
      const auto batch1 = run_simd(a, b, 1);
      for (int threads : {1, 2, 3}) {
        const auto batch = run_simd(a, b, threads);
        ASSERT_EQ(0, std::memcmp(batch.data(), batch1.data(), batch.size() * sizeof(float)))
            << kv::kv_dtype_name(t) << " threads " << threads;
        ThreadPool pool(threads);
        AttentionScratch scratch;
        for (size_t i = 0; i < b.seqs.size(); ++i) {
          // The sequence alone, its queries at row 0 of their own buffer.
          AttentionSeq alone = b.seqs[i];
          alone.query_begin = 0;
          const size_t off = static_cast<size_t>(b.seqs[i].query_begin * b.q_dim());
          const size_t n = static_cast<size_t>(alone.num_queries * b.q_dim());
          std::vector<float> q(b.q.begin() + off, b.q.begin() + off + n), out(n);
          paged_attention(a.layer, {&alone, 1}, b.shape(), q.data(), out.data(), pool, scratch);
          ASSERT_EQ(0, std::memcmp(out.data(), batch.data() + off, n * sizeof(float)))
              << kv::kv_dtype_name(t) << " seq " << i << " threads " << threads;
        }
      }
    }
  }
}

// Sliding windows (one inside a key tile, one across partitions), a score scale and soft-capping:
// the SIMD kernel equals the reference; the block-table entries wholly before each sequence's
// first window are -1 (freed: reading one would crash); every row equals the same position run
// alone as one query (what prefix caching and decode rely on), at 1 and 3 threads.
TEST(KernelsPagedAttention, SlidingWindowScaleAndSoftcapMatchReference) {
  struct Case {
    int32_t window;
    float scale, softcap;
  };
  for (const Case& cs : {Case{7, 0.0f, 0.0f}, Case{40, 0.0625f, 0.0f}, Case{700, 0.0f, 0.0f},
                         Case{33, 0.0f, 5.0f}, Case{512, 0.2f, 50.0f}}) {
    Batch b = make_batch(8, 2, 64, 16, 61);
    b.window = cs.window;
    b.scale = cs.scale;
    b.softcap = cs.softcap;
    for (KvDtype t : {KvDtype::kF32, KvDtype::kInt8, KvDtype::kFp8E4m3}) {
      const Arena a = write_batch(b, t, t, ArenaLayout{});
      Batch freed = b;  // same tables but for the entries no query of its sequence reads
      for (size_t i = 0; i < freed.seqs.size(); ++i) {
        const int64_t first = attention_first_key(freed.seqs[i].first_position, cs.window) / 16;
        for (int64_t j = 0; j < first; ++j) freed.tables[i][static_cast<size_t>(j)] = -1;
        freed.seqs[i].block_table = freed.tables[i].data();
      }
      const auto ref = run_ref(a, freed);
      const auto simd = run_simd(a, freed, 2);
      EXPECT_LE(rel_diff(simd, ref), 1e-4) << kv::kv_dtype_name(t) << " window " << cs.window;
      for (int threads : {1, 3}) {
        ThreadPool pool(threads);
        AttentionScratch scratch;
        for (const AttentionSeq& s : freed.seqs)
          for (int32_t j = 0; j < s.num_queries; ++j) {
            AttentionSeq one = s;
            one.query_begin = 0;
            one.num_queries = 1;
            one.first_position = s.first_position + j;
            const size_t off = static_cast<size_t>((s.query_begin + j) * b.q_dim());
            const size_t n = static_cast<size_t>(b.q_dim());
            std::vector<float> q(b.q.begin() + off, b.q.begin() + off + n), out(n);
            paged_attention(a.layer, {&one, 1}, b.shape(), q.data(), out.data(), pool, scratch);
            ASSERT_EQ(0, std::memcmp(out.data(), simd.data() + off, n * sizeof(float)))
                << kv::kv_dtype_name(t) << " window " << cs.window << " position "
                << one.first_position << " threads " << threads;
          }
      }
    }
  }
  // A window at least as long as every sequence is full attention.
  Batch b = make_batch(4, 4, 36, 16, 62);
  const Arena a = write_batch(b, KvDtype::kF32, KvDtype::kF32, ArenaLayout{});
  const auto full = run_simd(a, b, 2);
  b.window = 1100;
  const auto windowed = run_simd(a, b, 2);
  EXPECT_EQ(0, std::memcmp(full.data(), windowed.data(), full.size() * sizeof(float)));
}

// Rotated blocks (the shift context policy): a query rotated per block equals the reference
// (with the K-shift correction), and equals plain attention over keys re-rotated by the offset.
struct Rotations {
  std::vector<std::vector<float>> tables;            // per distinct offset
  std::vector<std::vector<const float*>> per_block;  // per sequence
  std::vector<std::vector<int32_t>> offsets;         // per sequence, per logical block
};

Rotations rotate_some_blocks(Batch& b, const RopeTable& rope, uint32_t seed) {
  Rotations r;
  std::mt19937 rng(seed);
  const int32_t choices[] = {0, 16, 48, 5, 0, 300};
  r.tables.resize(std::size(choices));
  for (size_t i = 0; i < std::size(choices); ++i) {
    r.tables[i].resize(static_cast<size_t>(rope.n_rot));
    rope_rotation(rope, choices[i], r.tables[i].data());
  }
  for (size_t i = 0; i < b.seqs.size(); ++i) {
    std::vector<const float*> ptrs;
    std::vector<int32_t> offs;
    for (size_t j = 0; j < b.tables[i].size(); ++j) {
      const size_t c = j == 0 ? 0 : rng() % std::size(choices);  // runs of equal offsets too
      offs.push_back(choices[c]);
      ptrs.push_back(choices[c] == 0 ? nullptr : r.tables[c].data());
    }
    r.per_block.push_back(std::move(ptrs));
    r.offsets.push_back(std::move(offs));
  }
  for (size_t i = 0; i < b.seqs.size(); ++i) b.seqs[i].block_rotation = r.per_block[i].data();
  return r;
}

TEST(KernelsPagedAttention, RotatedBlocksMatchReferenceAndReRotatedKeys) {
  for (RopeStyle style : {RopeStyle::kInterleaved, RopeStyle::kNeox}) {
    for (int n_rot : {64, 32}) {  // full and partial rotary
      RopeSpec spec;
      spec.style = style;
      spec.n_rot = n_rot;
      const RopeTable rope = make_rope_table(spec);
      Batch b = make_batch(8, 2, 64, 16, 71);
      auto shape = [&] {
        AttentionShape sh = b.shape();
        sh.rope_style = style;
        sh.n_rot = n_rot;
        return sh;
      };
      const Rotations rot = rotate_some_blocks(b, rope, 72);
      const std::vector<float> shift = normal(2 * 64, 73, 0.5f);
      for (KvDtype t : {KvDtype::kF32, KvDtype::kF16, KvDtype::kInt8, KvDtype::kFp8E4m3}) {
        Arena a = write_batch(b, t, t, ArenaLayout{});
        if (t == KvDtype::kInt8) {
          a.layer.k_shift = shift.data();
          a.layer.hadamard = true;
        }
        std::vector<float> ref(b.q.size()), simd(b.q.size());
        paged_attention_ref(a.layer, b.seqs, shape(), b.q.data(), ref.data());
        ThreadPool pool(2);
        AttentionScratch scratch;
        paged_attention(a.layer, b.seqs, shape(), b.q.data(), simd.data(), pool, scratch);
        EXPECT_LE(rel_diff(simd, ref), 1e-4) << kv::kv_dtype_name(t) << " n_rot " << n_rot;
      }
      // The identity itself: keys written d further, queries rotated by d, against keys moved
      // back by d (rope_rotation of -d) with no rotation at all.
      Batch moved = b;
      RopeTable unit = rope;
      unit.mscale = 1.0f;
      const size_t kv_dim = 2 * 64;
      for (size_t i = 0; i < moved.seqs.size(); ++i) {
        moved.seqs[i].block_rotation = nullptr;
        for (int p = 0; p < moved.specs[i].len; ++p) {
          const int32_t d = rot.offsets[i][static_cast<size_t>(p / 16)];
          if (d == 0) continue;
          std::vector<float> back(static_cast<size_t>(n_rot));
          rope_rotation(unit, -d, back.data());
          for (int h = 0; h < 2; ++h)
            rope_rotate_head(&moved.k[i][p * kv_dim + static_cast<size_t>(h) * 64], style, n_rot,
                             back.data());
        }
      }
      for (bool hadamard : {false, true}) {
        // Quantized K's basis: keys and queries stored as H x (per head); rotations act before H.
        Batch bw = b, bm = moved;
        if (hadamard) {
          for (Batch* x : {&bw, &bm}) {
            for (auto& k : x->k)
              hadamard_inplace(k.data(), static_cast<int64_t>(k.size() / 64), 64);
            hadamard_inplace(x->q.data(), static_cast<int64_t>(x->q.size() / 64), 64);
          }
        }
        Arena aw = write_batch(bw, KvDtype::kF32, KvDtype::kF32, ArenaLayout{});
        aw.layer.hadamard = hadamard;
        const Arena am = write_batch(bm, KvDtype::kF32, KvDtype::kF32, ArenaLayout{});
        std::vector<float> with_offsets(b.q.size()), re_rotated(b.q.size());
        ThreadPool pool(1);
        AttentionScratch scratch;
        paged_attention(aw.layer, bw.seqs, shape(), bw.q.data(), with_offsets.data(), pool,
                        scratch);
        paged_attention(am.layer, bm.seqs, bm.shape(), bm.q.data(), re_rotated.data(), pool,
                        scratch);
        EXPECT_LE(rel_diff(with_offsets, re_rotated), 2e-5)
            << "n_rot " << n_rot << " hadamard " << hadamard;
      }
    }
  }
}

TEST(KernelsPagedAttention, BlockSizeDoesNotChangeResults) {
  for (KvDtype t : {KvDtype::kF32, KvDtype::kInt4}) {
    std::vector<float> first;
    for (int bs : {16, 1, 5, 32}) {
      const Batch b = make_batch(8, 2, 64, bs, 41);  // same data: seeds do not depend on bs
      ArenaLayout al;
      al.block_size = bs;
      const auto out = run_simd(write_batch(b, t, t, al), b, 2);
      if (first.empty()) first = out;
      EXPECT_EQ(0, std::memcmp(out.data(), first.data(), out.size() * sizeof(float)))
          << kv::kv_dtype_name(t) << " block size " << bs;
    }
  }
}

// With one key the softmax weight is exactly 1, so the output is the stored V row as
// kv_dequantize_row_ref reads it, bit for bit: checks the kernel's own dequantization, here with
// every fp8 byte value (NaN and inf codes included) and every CPU target.
TEST(KernelsPagedAttention, SingleKeyReturnsTheStoredValueRow) {
  constexpr int kDim = 256, kKvHeads = 2, kHeads = 4;
  testing::for_each_cpu_target([&](int64_t target) {
    for (KvDtype t : kAllDtypes) {
      Arena a = make_arena(3, kKvHeads, kDim, t, t, ArenaLayout{});
      if (is_fp8(t)) a.layer.k_scale = a.layer.v_scale = 0.37f;
      const auto k = normal(kKvHeads * kDim, 81, 1.0f);
      auto v = normal(kKvHeads * kDim, 82, 3.0f);
      if (t == KvDtype::kF32 || t == KvDtype::kF16 || t == KvDtype::kBf16) {
        v[3] = INFINITY;  // non-finite values are stored as they are (f16: 1e6 overflows)
        v[10] = -INFINITY;
        v[17] = NAN;
        v[kDim + 5] = 1e6f;
        v[kDim + 6] = 3e-7f;  // an f16 subnormal
      }
      const int32_t table[] = {2};
      const int64_t slot = 2 * a.layer.block_size;
      paged_kv_write(a.layer, k.data(), v.data(), {&slot, 1});
      if (is_fp8(t)) {  // every byte value in head 0, reversed in head 1
        for (int i = 0; i < kDim; ++i) {
          a.layer.v_row(slot, 0)[i] = static_cast<uint8_t>(i);
          a.layer.v_row(slot, 1)[i] = static_cast<uint8_t>(255 - i);
        }
      }
      AttentionSeq seq;
      seq.num_queries = 1;
      seq.block_table = table;
      seq.num_blocks = 1;
      const AttentionShape shape{kHeads, kKvHeads, kDim};
      const auto q = normal(kHeads * kDim, 83, 1.0f);
      std::vector<float> out(q.size()), out_ref(q.size()), want(kDim);
      ThreadPool pool(1);
      AttentionScratch scratch;
      paged_attention(a.layer, {&seq, 1}, shape, q.data(), out.data(), pool, scratch);
      paged_attention_ref(a.layer, {&seq, 1}, shape, q.data(), out_ref.data());
      for (int h = 0; h < kHeads; ++h) {
        kv_dequantize_row_ref(t, a.layer.v_row(slot, h / 2), want.data(), kDim, a.layer.v_scale);
        for (int i = 0; i < kDim; ++i) {
          const float w = want[static_cast<size_t>(i)];
          for (const auto* o : {&out, &out_ref}) {
            const float got = (*o)[static_cast<size_t>(h * kDim + i)];
            if (std::isnan(w)) {
              ASSERT_TRUE(std::isnan(got)) << kv::kv_dtype_name(t) << " i=" << i;
            } else {
              ASSERT_EQ(got, w) << kv::kv_dtype_name(t) << " head " << h << " i=" << i
                                << (o == &out ? " simd on " : " ref on ")
                                << hwy::TargetName(target);
            }
          }
        }
      }
    }
  });
}

TEST(KernelsPagedAttention, KvWriteRoundTripTouchesOnlyItsRows) {
  for (int hd : {64, 36}) {
    for (KvDtype t : kAllDtypes) {
      const int n_kv = 2, block_size = 4, num_tokens = 9;
      Arena a = make_arena(6, n_kv, hd, t, t, ArenaLayout{3, 2, 3, block_size});
      const auto k = normal(static_cast<size_t>(num_tokens * n_kv * hd), 51, 1.5f);
      const auto v = normal(static_cast<size_t>(num_tokens * n_kv * hd), 52, 0.5f);
      if (is_fp8(t)) {
        a.layer.k_scale = kv_fp8_scale_for(t, k.data(), k.size());
        a.layer.v_scale = kv_fp8_scale_for(t, v.data(), v.size());
      }
      // Scattered slots over blocks 5, 0, 3 (block 1, 2, 4 and the rest untouched).
      std::vector<int64_t> slots;
      for (int i = 0; i < num_tokens; ++i) {
        const int64_t block = std::array<int64_t, 3>{5, 0, 3}[static_cast<size_t>(i % 3)];
        slots.push_back(block * block_size + (i * 7) % block_size);
      }
      std::sort(slots.begin(), slots.end());
      ASSERT_EQ(std::unique(slots.begin(), slots.end()), slots.end());
      std::shuffle(slots.begin(), slots.end(), std::mt19937(5));
      paged_kv_write(a.layer, k.data(), v.data(), slots);

      const size_t rb = kv_row_bytes(t, hd);
      std::vector<uint8_t> written(a.mem.size(), 0), row(rb);
      std::vector<float> got(static_cast<size_t>(hd)), want(static_cast<size_t>(hd));
      for (int i = 0; i < num_tokens; ++i) {
        for (int h = 0; h < n_kv; ++h) {
          for (int kv_side = 0; kv_side < 2; ++kv_side) {
            const float* src = (kv_side == 0 ? k : v).data() + (i * n_kv + h) * hd;
            const float scale = kv_side == 0 ? a.layer.k_scale : a.layer.v_scale;
            const uint8_t* stored = kv_side == 0 ? a.layer.k_row(slots[static_cast<size_t>(i)], h)
                                                 : a.layer.v_row(slots[static_cast<size_t>(i)], h);
            kv_quantize_row_ref(t, src, row.data(), hd, scale);
            ASSERT_EQ(0, std::memcmp(stored, row.data(), rb)) << kv::kv_dtype_name(t);
            kv_dequantize_row_ref(t, stored, got.data(), hd, scale);
            kv_dequantize_row_ref(t, row.data(), want.data(), hd, scale);
            ASSERT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * sizeof(float)));
            if (t == KvDtype::kF32) {
              ASSERT_EQ(0, std::memcmp(got.data(), src, got.size() * sizeof(float)));
            }
            std::fill_n(written.begin() + (stored - a.mem.data()), rb, uint8_t{1});
          }
        }
      }
      for (size_t i = 0; i < a.mem.size(); ++i) {
        if (!written[i]) {
          ASSERT_EQ(a.mem[i], 0xFF) << "byte " << i << " " << kv::kv_dtype_name(t);
        }
      }
    }
  }
}

TEST(KernelsPagedAttention, ScratchIsReusedAfterFirstCall) {
  const Batch b = make_batch(8, 2, 64, 16, 61);
  const Arena a = write_batch(b, KvDtype::kF16, KvDtype::kF16, ArenaLayout{});
  ThreadPool pool(2);
  AttentionScratch scratch;
  std::vector<float> out1(b.q.size()), out2(b.q.size());
  paged_attention(a.layer, b.seqs, b.shape(), b.q.data(), out1.data(), pool, scratch);
  const float* data = scratch.buf.data();
  const size_t capacity = scratch.buf.capacity();
  // Again, and with a smaller batch (decode of one sequence, serial path).
  paged_attention(a.layer, b.seqs, b.shape(), b.q.data(), out2.data(), pool, scratch);
  paged_attention(a.layer, {b.seqs.data() + 2, 1}, b.shape(), b.q.data(), out2.data(), pool,
                  scratch);
  EXPECT_EQ(scratch.buf.data(), data);
  EXPECT_EQ(scratch.buf.capacity(), capacity);
  EXPECT_EQ(0, std::memcmp(out1.data(), out2.data(), out1.size() * sizeof(float)));
}

TEST(KernelsPagedAttentionDeathTest, RejectsBadArguments) {
  const Batch b = make_batch(8, 2, 64, 16, 71);
  const Arena a = write_batch(b, KvDtype::kF32, KvDtype::kF32, ArenaLayout{});
  std::vector<float> out(b.q.size());
  ThreadPool pool(1);
  AttentionScratch scratch;
  AttentionShape bad_group{6, 4, 64};
  PagedKvLayer l4 = a.layer;
  l4.n_kv_heads = 4;
  EXPECT_DEATH(paged_attention(l4, b.seqs, bad_group, b.q.data(), out.data(), pool, scratch),
               "n_heads");
  AttentionSeq short_table = b.seqs.back();
  short_table.num_blocks -= 1;
  EXPECT_DEATH(paged_attention_ref(a.layer, {&short_table, 1}, b.shape(), b.q.data(), out.data()),
               "blocks");
  AttentionSeq no_queries = b.seqs.back();
  no_queries.num_queries = 0;
  EXPECT_DEATH(
      paged_attention(a.layer, {&no_queries, 1}, b.shape(), b.q.data(), out.data(), pool, scratch),
      "num_queries");
}

}  // namespace
}  // namespace hinge::kernels
