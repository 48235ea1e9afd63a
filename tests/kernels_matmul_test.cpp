// matmul parity: the multithreaded SIMD matmul against (a) matmul_ref_quantized, the scalar
// reference with the same quantized activations (tight), and (b) matmul_ref, the pure f32 product
// (bound derived from the activation quantization error). Odd shapes: rows not a multiple of any
// tile, 1..67 tokens, 1/2/3 threads; and bit-exact batch invariance of the quantized kernels.
#include <gtest/gtest.h>
#include <hwy/targets.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "common/ggml_type.h"
#include "common/thread_pool.h"
#include "kernels/cpu_features.h"
#include "kernels/matmul.h"
#include "kernels/kernel_choice.h"
#include "kernels/matmul_packed.h"
#include "kernels/ops.h"
#include "kernels/quant.h"
#include "kernels/quant_block.h"

namespace hinge::kernels {
namespace {

struct Weights {
  GgmlType type;
  int64_t rows, cols;
  std::vector<uint8_t> bytes;
  std::vector<float> dequant;  // [rows, cols] what the stored weights represent
  MatrixView view() const {
    MatrixView v;
    v.type = type;
    v.data = bytes.data();
    v.rows = rows;
    v.cols = cols;
    v.row_bytes = ggml_row_bytes(*ggml_type_traits(type), static_cast<uint64_t>(cols));
    return v;
  }
};

Weights make_weights(GgmlType type, int64_t rows, int64_t cols, uint32_t seed) {
  Weights w{type, rows, cols, {}, {}};
  const size_t rb = ggml_row_bytes(*ggml_type_traits(type), static_cast<uint64_t>(cols));
  w.bytes.resize(rb * rows);
  w.dequant.resize(static_cast<size_t>(rows * cols));
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 0.05f);
  std::vector<float> row(static_cast<size_t>(cols));
  for (int64_t r = 0; r < rows; ++r) {
    for (auto& v : row) v = dist(rng);
    row[static_cast<size_t>(r % cols)] += 0.5f;  // an outlier per row
    EXPECT_TRUE(quantize_row_ref(type, row.data(), w.bytes.data() + r * rb, cols));
    EXPECT_TRUE(
        dequantize_row_ref(type, w.bytes.data() + r * rb, w.dequant.data() + r * cols, cols));
  }
  return w;
}

std::vector<float> make_activations(int64_t num_tokens, int64_t cols, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(num_tokens * cols));
  for (auto& v : x) v = dist(rng);
  return x;
}

// sum_c |w[r, c] * x[t, c]|: the scale of an output's rounding error.
// Integers in [-127, 127] with a 127 in every 32-block: their on-the-fly Q8_0 quantization is
// exact (scale 1), so results compare with the f32-activation reference at a tight bound.
std::vector<float> exact_q8_activations(int64_t n, int mul) {
  std::vector<float> x(static_cast<size_t>(n));
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(int(i * mul % 255) - 127);
  for (int64_t b = 0; b < n; b += 32) x[static_cast<size_t>(b)] = 127.0f;
  return x;
}

double abs_dot(const Weights& w, const float* x, int64_t r) {
  double s = 0.0;
  for (int64_t c = 0; c < w.cols; ++c) s += std::fabs(double(w.dequant[r * w.cols + c]) * x[c]);
  return s;
}

// Largest error the activation quantization can add to output r: sum_c |w[r, c]| * e_c, with
// e_c the worst rounding error of x_c in its block (half a step of amax/127; Q8_0 also stores
// its scale as f16, which moves each level by up to 127 * 2^-11 of a step).
double activation_error_bound(const Weights& w, GgmlType act, const float* x, int64_t r) {
  const int64_t block = act == GgmlType::Q8_0 ? 32 : 256;
  const double step_factor = act == GgmlType::Q8_0 ? 0.5 + 127.0 / 2048.0 : 0.5;
  double s = 0.0;
  for (int64_t b = 0; b < w.cols; b += block) {
    float amax = 0.0f;
    for (int64_t c = b; c < b + block; ++c) amax = std::max(amax, std::fabs(x[c]));
    double wsum = 0.0;
    for (int64_t c = b; c < b + block; ++c) wsum += std::fabs(w.dequant[r * w.cols + c]);
    s += wsum * amax / 127.0 * step_factor;
  }
  return s;
}

struct Case {
  GgmlType type;
  int64_t cols;
};

// packed: run the packed kernel (matmul_packed.h) on a packed copy of the weights.
// packed: run on a packed copy in `layout` (which must run on this CPU).
void check_matmul(const Case& c, int64_t rows, int64_t num_tokens, int threads, uint32_t seed,
                  bool packed = false, PackedLayout layout = PackedLayout::kVnniPairs) {
  SCOPED_TRACE(testing::Message() << ggml_type_name(c.type) << " rows=" << rows << " cols="
                                  << c.cols << " tokens=" << num_tokens << " threads=" << threads
                                  << (packed ? " packed" : "")
                                  << (packed && layout == PackedLayout::kAmxTiles ? " amx" : ""));
  const Weights w = make_weights(c.type, rows, c.cols, seed);
  const auto x = make_activations(num_tokens, c.cols, seed + 1);
  ThreadPool pool(threads);
  MatmulScratch scratch;
  MatrixView view = w.view();
  std::unique_ptr<PackedMatrix> pm;
  if (packed) {
    pm = pack_matrix(view, pool, layout);
    ASSERT_NE(pm, nullptr);
    view.packed = pm.get();
  }
  std::vector<float> y(static_cast<size_t>(rows * num_tokens), NAN);
  matmul(view, x.data(), num_tokens, y.data(), pool, scratch);
  std::vector<float> yq(y.size()), yf(y.size());
  matmul_ref_quantized(w.view(), x.data(), num_tokens, yq.data());
  matmul_ref(w.view(), x.data(), num_tokens, yf.data());

  const GgmlType act = matmul_activation_type(c.type);
  for (int64_t t = 0; t < num_tokens; ++t) {
    const float* xt = x.data() + t * c.cols;
    for (int64_t r = 0; r < rows; ++r) {
      const size_t i = static_cast<size_t>(t * rows + r);
      const double scale = abs_dot(w, xt, r);
      // Same inputs, only the f32 summation order differs: 1e-5 of the magnitude.
      ASSERT_NEAR(y[i], yq[i], 1e-5 * scale + 1e-30) << "t=" << t << " r=" << r;
      if (act == GgmlType::F32) continue;
      // Against the unquantized activations: the quantization error bound (+ rounding).
      const double bound = activation_error_bound(w, act, xt, r) + 1e-5 * scale;
      ASSERT_NEAR(y[i], yf[i], bound) << "t=" << t << " r=" << r;
    }
  }
}

const Case kCases[] = {
    {GgmlType::F32, 37},   {GgmlType::F32, 256},  {GgmlType::F16, 45},   {GgmlType::F16, 512},
    {GgmlType::BF16, 19},  {GgmlType::BF16, 512}, {GgmlType::Q8_0, 32},  {GgmlType::Q8_0, 96},
    {GgmlType::Q8_0, 512}, {GgmlType::Q4_0, 32},  {GgmlType::Q4_0, 160}, {GgmlType::Q4_0, 512},
    {GgmlType::Q4_K, 256}, {GgmlType::Q4_K, 768}, {GgmlType::Q6_K, 256}, {GgmlType::Q6_K, 768},
};

TEST(KernelsMatmul, ParityAllTypesOddShapes) {
  uint32_t seed = 100;
  for (const Case& c : kCases) {
    for (int64_t rows : {1, 5, 67}) {
      for (int64_t tokens : {1, 2, 3, 4, 5, 7}) {
        const int threads = 1 + static_cast<int>((rows + tokens) % 3);
        check_matmul(c, rows, tokens, threads, seed++);
        if (HasFatalFailure()) return;
      }
    }
  }
}

// matmul only splits rows into chunks of >= 64K weights (see matmul.cpp), so these shapes are
// large enough for 3 chunks of 64 rows (the last one partial): 131 rows, 1024+ columns.
TEST(KernelsMatmul, ParityThreadCounts) {
  uint32_t seed = 500;
  for (GgmlType t : {GgmlType::F32, GgmlType::F16, GgmlType::BF16, GgmlType::Q8_0, GgmlType::Q4_0,
                     GgmlType::Q4_K, GgmlType::Q6_K}) {
    const int64_t cols = t == GgmlType::F32 ? 1029 : 1024;  // f32: a SIMD tail too
    for (int threads : {1, 2, 3}) {
      check_matmul({t, cols}, 131, 6, threads, seed++);
      if (HasFatalFailure()) return;
    }
  }
}

// Larger prefill batch: token tiles plus a remainder.
TEST(KernelsMatmul, ParityPrefillBatch) {
  uint32_t seed = 900;
  for (GgmlType t : {GgmlType::F32, GgmlType::F16, GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q4_K,
                     GgmlType::Q6_K}) {
    check_matmul({t, 512}, 301, 19, 2, seed++);
    if (HasFatalFailure()) return;
  }
  // Q4_K rows of 9 super-blocks (two ranges in the prepared path), odd rows, 1..3 threads.
  for (int threads : {1, 2, 3}) {
    check_matmul({GgmlType::Q4_K, 2304}, 37, 19, threads, seed++);
    if (HasFatalFailure()) return;
  }
}

// Q8_0 / Q4_0 register tiles (2 rows x 4 tokens, 4 rows x 1 token, 1..3-token and 1..3-row
// tails) and the scale chunking: block counts below one 8-block group (3), with a partial group
// (18), and above the 128-block chunk (131); odd row and token counts; 1/2/3 threads.
TEST(KernelsMatmul, ParityQ8TileShapes) {
  uint32_t seed = 2000;
  for (GgmlType t : {GgmlType::Q8_0, GgmlType::Q4_0}) {
    for (int64_t cols : {96, 576, 4192}) {
      for (int64_t rows : {1, 2, 3, 5, 7, 13, 37}) {
        for (int64_t tokens : {1, 2, 3, 4, 5, 7, 9, 16, 33, 67}) {
          if (cols * rows * tokens > 4192 * 13 * 16) continue;  // keep the f64 reference cheap
          const int threads = 1 + static_cast<int>((rows + tokens) % 3);
          check_matmul({t, cols}, rows, tokens, threads, seed++);
          if (HasFatalFailure()) return;
        }
      }
    }
  }
  // Large enough for several row chunks per thread.
  for (int threads : {1, 2, 3}) {
    check_matmul({GgmlType::Q8_0, 576}, 301, 67, threads, seed++);
    check_matmul({GgmlType::Q4_0, 576}, 301, 67, threads, seed++);
    if (HasFatalFailure()) return;
  }
}

// Batch invariance: the value of (row, token) is bit-identical whatever the number of tokens in
// the call, the token's position in it (hence the tile it lands in) and the thread count. The
// engine relies on this (a request decoded alone or in a batch gives the same greedy tokens).
TEST(KernelsMatmul, QuantizedResultsAreBatchInvariant) {
  for (GgmlType type : {GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q4_K, GgmlType::Q6_K}) {
    // k-quants: 9 super-blocks, so the Q4_K prefill path splits rows into two ranges (8 + 1).
    const int64_t cols = type == GgmlType::Q8_0 || type == GgmlType::Q4_0 ? 4192 : 2304;
    const int64_t rows = 67, tokens = 37;
    SCOPED_TRACE(ggml_type_name(type));
    const Weights w = make_weights(type, rows, cols, 31);
    const auto x = make_activations(tokens, cols, 32);
    ThreadPool pool1(1), pool3(3);
    MatmulScratch scratch;
    std::vector<float> full(static_cast<size_t>(rows * tokens));
    matmul(w.view(), x.data(), tokens, full.data(), pool1, scratch);
    std::vector<float> part(full.size());
    // [start, start + len) as its own batch; every start mod 4 and lengths hitting every tile.
    for (int64_t len : {1, 2, 3, 4, 5, 6, 7, 16, 17, 36}) {
      for (int64_t start : {int64_t{0}, int64_t{1}, int64_t{2}, int64_t{3}, tokens - len}) {
        if (start + len > tokens) continue;
        ThreadPool& pool = (len + start) % 2 == 0 ? pool1 : pool3;
        matmul(w.view(), x.data() + start * cols, len, part.data(), pool, scratch);
        ASSERT_EQ(0, std::memcmp(part.data(), full.data() + start * rows,
                                 static_cast<size_t>(len * rows) * sizeof(float)))
            << "tokens [" << start << ", " << start + len << ")";
      }
    }
  }
}

// A real bug check for the quantized-activation path: with every activation exactly
// representable (integers in [-127, 127] with the block's amax = 127), quantization is lossless,
// so matmul must match the pure f32 product to rounding.
TEST(KernelsMatmul, ExactActivationsMatchF32Product) {
  for (GgmlType t : {GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q4_K, GgmlType::Q6_K}) {
    const int64_t rows = 9, cols = 512, tokens = 3;
    const Weights w = make_weights(t, rows, cols, 77);
    const std::vector<float> x = exact_q8_activations(tokens * cols, 37);
    ThreadPool pool(2);
    MatmulScratch scratch;
    std::vector<float> y(static_cast<size_t>(rows * tokens)), yf(y.size());
    matmul(w.view(), x.data(), tokens, y.data(), pool, scratch);
    matmul_ref(w.view(), x.data(), tokens, yf.data());
    for (int64_t tt = 0; tt < tokens; ++tt)
      for (int64_t r = 0; r < rows; ++r) {
        const size_t i = static_cast<size_t>(tt * rows + r);
        EXPECT_NEAR(y[i], yf[i], 2e-5 * abs_dot(w, x.data() + tt * cols, r))
            << ggml_type_name(t) << " t=" << tt << " r=" << r;
      }
  }
}

// Every Highway target this CPU can run (AVX2 and the portable SSE4 / SSSE3 / scalar paths on
// an AVX2 machine), forced one at a time through Highway's test hook.
TEST(KernelsMatmul, ParityEveryCpuTarget) {
  const int64_t supported = hwy::SupportedTargets();
  int tested = 0;
  for (int64_t target :
       {int64_t{HWY_AVX3_DL}, int64_t{HWY_AVX3}, int64_t{HWY_AVX2}, int64_t{HWY_SSE4},
        int64_t{HWY_SSSE3}, int64_t{HWY_EMU128}, int64_t{HWY_SCALAR}}) {
    if (!(supported & target)) continue;
    SCOPED_TRACE(hwy::TargetName(target));
    hwy::SetSupportedTargetsForTest(target);
    ++tested;
    uint32_t seed = 1000;
    for (const Case& c : kCases) {
      check_matmul(c, 21, 5, 2, seed++);
      check_matmul(c, 3, 1, 1, seed++);
      if (HasFatalFailure()) break;
    }
    hwy::SetSupportedTargetsForTest(0);
    if (HasFatalFailure()) return;
  }
  EXPECT_GE(tested, 2);
}

// The AVX-512 VNNI path of Q8_0 / Q4_0 / Q4_K (taken when the CPU has it) and the path without it:
// both match the reference; Q4_0 is bit-identical between them (same exact integer lanes); each
// is batch invariant (a token's row does not depend on the other tokens in the call).
// On the AVX2 target (forced where AVX3 is the best) the VNNI path is AVX-VNNI's.
void check_with_and_without_vnni();

TEST(KernelsMatmul, Q8AndQ4WithAndWithoutVnni) {
  check_with_and_without_vnni();
  const int64_t supported = hwy::SupportedTargets();
  if ((supported & HWY_AVX2) && (supported & HWY_AVX3)) {
    SCOPED_TRACE("AVX2 target");
    hwy::SetSupportedTargetsForTest(HWY_AVX2);
    check_with_and_without_vnni();
    hwy::SetSupportedTargetsForTest(0);
  }
}

void check_with_and_without_vnni() {
  for (GgmlType t : {GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q4_K}) {
    SCOPED_TRACE(ggml_type_name(t));
    const int64_t rows = 13, cols = 1024, tokens = 7;
    const Weights w = make_weights(t, rows, cols, 5);
    const std::vector<float> x = exact_q8_activations(tokens * cols, 53);
    ThreadPool pool(2);
    MatmulScratch scratch;
    std::vector<float> ref(static_cast<size_t>(rows * tokens));
    matmul_ref(w.view(), x.data(), tokens, ref.data());
    std::vector<float> y[2];
    for (int vnni = 0; vnni < 2; ++vnni) {
      set_vnni_allowed_for_test(vnni == 1);
      y[vnni].resize(ref.size());
      matmul(w.view(), x.data(), tokens, y[vnni].data(), pool, scratch);
      for (int64_t tt = 0; tt < tokens; ++tt)
        for (int64_t r = 0; r < rows; ++r) {
          const size_t i = static_cast<size_t>(tt * rows + r);
          EXPECT_NEAR(y[vnni][i], ref[i], 2e-5 * abs_dot(w, x.data() + tt * cols, r))
              << "vnni " << vnni << " t=" << tt << " r=" << r;
        }
      // Batch invariance: each token alone gives the same row, bit for bit.
      std::vector<float> one(static_cast<size_t>(rows));
      for (int64_t tt = 0; tt < tokens; ++tt) {
        matmul(w.view(), x.data() + tt * cols, 1, one.data(), pool, scratch);
        for (int64_t r = 0; r < rows; ++r)
          EXPECT_EQ(one[static_cast<size_t>(r)], y[vnni][static_cast<size_t>(tt * rows + r)])
              << "vnni " << vnni << " t=" << tt << " r=" << r;
      }
    }
    set_vnni_allowed_for_test(true);
    if (t == GgmlType::Q4_0) {
      EXPECT_EQ(y[0], y[1]);
    }
  }
}

TEST(KernelsMatmul, ScratchDoesNotReallocate) {
  const Weights w = make_weights(GgmlType::Q4_K, 16, 512, 3);
  const auto x = make_activations(8, 512, 4);
  ThreadPool pool(2);
  MatmulScratch scratch;
  std::vector<float> y(16 * 8);
  matmul(w.view(), x.data(), 8, y.data(), pool, scratch);
  const uint8_t* data = scratch.bytes.data();
  const size_t cap = scratch.bytes.capacity();
  for (int64_t tokens : {1, 8, 3}) {
    matmul(w.view(), x.data(), tokens, y.data(), pool, scratch);
    EXPECT_EQ(scratch.bytes.data(), data);
    EXPECT_EQ(scratch.bytes.capacity(), cap);
  }
}

// A fused RMSNorm (MatmulNorm) gives exactly rmsnorm-then-matmul, on every kernel kind: float
// weights, the GGUF integer kernels, and each packed layout that runs here; also through
// matmul_shared_input with two matrices, and with the scratch reused at another batch size.
TEST(KernelsMatmul, FusedNormEqualsNormThenMatmul) {
  ThreadPool pool(2);
  MatmulScratch scratch;
  const int64_t rows = 40, cols = 512;
  std::vector<float> nw(static_cast<size_t>(cols));
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(0.5f, 1.5f);
  for (float& v : nw) v = u(rng);
  const MatmulNorm norm{nw.data(), 1e-5f};
  for (GgmlType t : {GgmlType::F32, GgmlType::F16, GgmlType::Q8_0, GgmlType::Q4_0,
                     GgmlType::Q4_K}) {
    const Weights w1 = make_weights(t, rows, cols, 21), w2 = make_weights(t, rows / 2, cols, 22);
    std::vector<std::unique_ptr<PackedMatrix>> keep;
    for (int packed = 0; packed < 2; ++packed) {
      MatrixView v1 = w1.view(), v2 = w2.view();
      if (packed == 1) {
        keep.push_back(pack_matrix(v1, pool));
        keep.push_back(pack_matrix(v2, pool));
        if (!keep[keep.size() - 2]) continue;  // no packed form here
        v1.packed = keep[keep.size() - 2].get();
        v2.packed = keep.back().get();
      }
      for (int64_t tokens : {1, 7, 19}) {
        SCOPED_TRACE(testing::Message() << ggml_type_name(t) << " packed=" << packed
                                        << " tokens=" << tokens);
        const auto x = make_activations(tokens, cols, 30 + static_cast<uint32_t>(tokens));
        std::vector<float> xn(x.size());
        for (int64_t tt = 0; tt < tokens; ++tt)
          rmsnorm(&xn[static_cast<size_t>(tt * cols)], &x[static_cast<size_t>(tt * cols)],
                  nw.data(), cols, norm.eps);
        std::vector<float> a1(static_cast<size_t>(rows * tokens)), a2(a1.size() / 2);
        std::vector<float> b1(a1.size()), b2(a2.size());
        const MatmulOut fused[] = {{&v1, a1.data()}, {&v2, a2.data()}};
        matmul_shared_input(fused, x.data(), tokens, pool, scratch, &norm);
        const MatmulOut plain[] = {{&v1, b1.data()}, {&v2, b2.data()}};
        matmul_shared_input(plain, xn.data(), tokens, pool, scratch);
        EXPECT_EQ(a1, b1);
        EXPECT_EQ(a2, b2);
      }
    }
  }
}

// The packed layouts that run on this CPU (matmul_packed.h); the tests below run each.
std::vector<PackedLayout> runnable_layouts() {
  std::vector<PackedLayout> out;
  for (PackedLayout l : {PackedLayout::kVnniPairs, PackedLayout::kAmxTiles})
    if (packed_layout_supported(GgmlType::Q8_0, l)) out.push_back(l);
  return out;
}

const char* layout_name(PackedLayout l) {
  return l == PackedLayout::kAmxTiles ? "amx-tiles" : "vnni-pairs";
}

// Each packed layout (matmul_packed.h) holds every quant and scale of the GGUF rows, for odd
// block counts (VNNI pairs: padded to even) and row counts (padded to a multiple of 8 / 16).
TEST(KernelsMatmulPacked, LayoutReadsBack) {
  if (runnable_layouts().empty()) GTEST_SKIP() << "no AVX-512 VNNI here";
  ThreadPool pool(2);
  for (PackedLayout layout : runnable_layouts()) {
    for (GgmlType t : {GgmlType::Q8_0, GgmlType::Q4_0}) {
      SCOPED_TRACE(std::string(ggml_type_name(t)) + " " + layout_name(layout));
      const bool amx = layout == PackedLayout::kAmxTiles;
      const int64_t rows = amx ? 21 : 13;
      const Weights w = make_weights(t, rows, 96, 7);
      const auto p = pack_matrix(w.view(), pool, layout);
      ASSERT_NE(p, nullptr);
      EXPECT_EQ(p->layout, layout);
      EXPECT_EQ(p->nb, amx ? 3 : 4);
      EXPECT_EQ(p->rows_padded, amx ? 32 : 16);
      EXPECT_EQ(reinterpret_cast<uintptr_t>(p->qs.get()) % 64, 0u);
      EXPECT_EQ(p->qs_row_bytes % 64, 0u);
      const size_t rb = w.view().row_bytes;
      for (int64_t r = 0; r < p->rows_padded; ++r)
        for (int64_t c = 0; c < p->nb * 32; ++c) {
          int want = 0;
          if (r < rows && c < 96) {
            const uint8_t* row = w.bytes.data() + r * rb;
            if (t == GgmlType::Q8_0) {
              want = static_cast<int8_t>(row[(c / 32) * 34 + 2 + c % 32]);
            } else {
              const uint8_t byte = row[(c / 32) * 18 + 2 + c % 16];
              want = (c % 32 < 16 ? byte & 0x0F : byte >> 4) - 8;
            }
          }
          ASSERT_EQ(packed_quant(*p, r, c), want) << "r=" << r << " c=" << c;
        }
      for (int64_t r = 0; r < p->rows_padded; ++r)
        for (int64_t b = 0; b < p->nb; ++b) {
          uint16_t want = 0;
          if (r < rows && b < 3) std::memcpy(&want, w.bytes.data() + r * rb + b * (rb / 3), 2);
          EXPECT_EQ(packed_scale(*p, r, b), want) << "r=" << r << " b=" << b;
        }
    }
  }
}

// Packed Q4_K (AMX tiles only) holds every nibble, sub-block scale and min, d and dmin.
TEST(KernelsMatmulPacked, Q4KLayoutReadsBack) {
  if (!packed_layout_supported(GgmlType::Q4_K, PackedLayout::kAmxTiles))
    GTEST_SKIP() << "no AMX here";
  ThreadPool pool(2);
  const int64_t rows = 19, cols = 512;
  const Weights w = make_weights(GgmlType::Q4_K, rows, cols, 5);
  const auto p = pack_matrix(w.view(), pool, PackedLayout::kAmxTiles);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->nb, 2);
  EXPECT_EQ(p->rows_padded, 32);
  EXPECT_EQ(pack_matrix(w.view(), pool, PackedLayout::kVnniPairs), nullptr);
  const size_t rb = w.view().row_bytes;
  for (int64_t r = 0; r < p->rows_padded; ++r) {
    for (int64_t sb = 0; sb < 2; ++sb) {
      BlockQ4_K blk{};
      if (r < rows) std::memcpy(&blk, w.bytes.data() + r * rb + sb * sizeof(BlockQ4_K), sizeof blk);
      const PackedQ4KMeta meta = packed_q4k_meta(*p, r, sb);
      EXPECT_EQ(meta.d, blk.d) << "r=" << r;
      EXPECT_EQ(meta.dmin, blk.dmin) << "r=" << r;
      for (int j = 0; j < 8; ++j) {
        uint8_t sc = 0, m = 0;
        scale_min_k4(j, blk.scales, &sc, &m);
        EXPECT_EQ(meta.sc[j], sc) << "r=" << r << " j=" << j;
        EXPECT_EQ(meta.m[j], m) << "r=" << r << " j=" << j;
        for (int e = 0; e < 32; ++e) {
          const int want = (blk.qs[(j / 2) * 32 + e] >> (4 * (j % 2))) & 0x0F;
          ASSERT_EQ(packed_quant(*p, r, sb * 256 + j * 32 + e), want)
              << "r=" << r << " sb=" << sb << " j=" << j << " e=" << e;
        }
      }
    }
  }
}

// The packed kernels against the references. VNNI pairs: tiles of 4 rows x 1..4 tokens and
// 8 rows x 1 token, rows not a multiple of 4 or 8, odd block counts, scale chunks. AMX tiles:
// 1..16-token tiles (<= 4 on the VNNI half), a short last tile zero-padded, odd block counts
// (the unpaired last block), rows not a multiple of 16; 1/2/3 threads.
TEST(KernelsMatmulPacked, ParityTileShapes) {
  if (runnable_layouts().empty()) GTEST_SKIP() << "no AVX-512 VNNI here";
  uint32_t seed = 7000;
  for (PackedLayout layout : runnable_layouts()) {
    for (GgmlType t : {GgmlType::Q8_0, GgmlType::Q4_0}) {
      for (int64_t cols : {32, 96, 576, 4192}) {
        for (int64_t rows : {1, 3, 5, 8, 13, 37}) {
          for (int64_t tokens : {1, 2, 3, 4, 5, 7, 9, 16, 17, 33}) {
            if (cols * rows * tokens > 4192 * 13 * 17) continue;
            const int threads = 1 + static_cast<int>((rows + tokens) % 3);
            check_matmul({t, cols}, rows, tokens, threads, seed++, /*packed=*/true, layout);
            if (HasFatalFailure()) return;
          }
        }
      }
      for (int threads : {1, 2, 3}) {
        check_matmul({t, 576}, 301, 67, threads, seed++, /*packed=*/true, layout);
        if (HasFatalFailure()) return;
      }
    }
  }
  if (!packed_layout_supported(GgmlType::Q4_K, PackedLayout::kAmxTiles)) return;
  for (int64_t cols : {256, 768, 2304}) {
    for (int64_t rows : {1, 5, 16, 37}) {
      for (int64_t tokens : {1, 2, 4, 5, 16, 17, 33}) {
        const int threads = 1 + static_cast<int>((rows + tokens) % 3);
        check_matmul({GgmlType::Q4_K, cols}, rows, tokens, threads, seed++, /*packed=*/true,
                     PackedLayout::kAmxTiles);
        if (HasFatalFailure()) return;
      }
    }
  }
  check_matmul({GgmlType::Q4_K, 512}, 301, 67, 2, seed++, /*packed=*/true,
               PackedLayout::kAmxTiles);
  for (int64_t tokens : {1, 13})
    for (auto [rows, cols] : {std::pair<int64_t, int64_t>{256, 256}, {512, 256}, {256, 512}}) {
      check_matmul({GgmlType::Q4_K, cols}, rows, tokens, 2, seed++, /*packed=*/true,
                   PackedLayout::kAmxTiles);
      if (HasFatalFailure()) return;
    }
}

// A token's result is bit-identical alone and inside a batch, also across the kernels' token
// blocks (8192 columns: 32 tokens per VNNI block) and for every tile shape; on AMX tiles also
// between the tile unit (tiles of 5..16 tokens) and the VNNI half (1..4).
TEST(KernelsMatmulPacked, BatchInvariantAcrossTokenBlocks) {
  if (runnable_layouts().empty()) GTEST_SKIP() << "no AVX-512 VNNI here";
  for (PackedLayout layout : runnable_layouts()) {
    for (GgmlType t : {GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q4_K}) {
      if (!packed_layout_supported(t, layout)) continue;
      SCOPED_TRACE(std::string(ggml_type_name(t)) + " " + layout_name(layout));
      const int64_t rows = 37, cols = 8192, tokens = 70;
      const Weights w = make_weights(t, rows, cols, 9);
      const auto x = make_activations(tokens, cols, 10);
      ThreadPool pool(2);
      MatmulScratch scratch;
      MatrixView view = w.view();
      const auto p = pack_matrix(view, pool, layout);
      ASSERT_NE(p, nullptr);
      view.packed = p.get();
      std::vector<float> y(static_cast<size_t>(rows * tokens));
      matmul(view, x.data(), tokens, y.data(), pool, scratch);
      for (int64_t n : {1, 3, 6, 16}) {
        std::vector<float> part(static_cast<size_t>(rows * n));
        for (int64_t t0 = 0; t0 + n <= tokens; t0 += 23) {
          matmul(view, x.data() + t0 * cols, n, part.data(), pool, scratch);
          for (int64_t tt = 0; tt < n; ++tt)
            for (int64_t r = 0; r < rows; ++r)
              ASSERT_EQ(part[static_cast<size_t>(tt * rows + r)],
                        y[static_cast<size_t>((t0 + tt) * rows + r)])
                  << "n=" << n << " t=" << t0 + tt << " r=" << r;
        }
      }
    }
  }
}

// Without VNNI, a view that carries a packed copy in either layout falls back to the GGUF
// kernels (same results as without the copy, bit for bit), and nothing new is packed.
TEST(KernelsMatmulPacked, FallsBackWithoutTheKernel) {
  if (runnable_layouts().empty()) GTEST_SKIP() << "no AVX-512 VNNI here";
  ThreadPool pool(2);
  MatmulScratch scratch;
  const Weights w = make_weights(GgmlType::Q4_0, 21, 512, 11);
  const auto x = make_activations(19, 512, 12);
  for (PackedLayout layout : runnable_layouts()) {
    SCOPED_TRACE(layout_name(layout));
    MatrixView view = w.view();
    const auto p = pack_matrix(view, pool, layout);
    ASSERT_NE(p, nullptr);
    set_vnni_allowed_for_test(false);
    EXPECT_FALSE(packed_layout_supported(GgmlType::Q4_0, layout));
    EXPECT_EQ(pack_matrix(view, pool, layout), nullptr);
    EXPECT_FALSE(packed_matmul_supported(GgmlType::Q4_0));  // AMX's kernel needs VNNI too
    EXPECT_EQ(candidate_layouts(GgmlType::Q4_0), std::vector<WeightLayout>{WeightLayout::kGguf});
    EXPECT_EQ(choose_weight_layout(GgmlType::Q4_0).layout, WeightLayout::kGguf);
    EXPECT_EQ(pack_matrix(view, pool), nullptr);
    std::vector<float> plain(21 * 19), with_copy(21 * 19);
    matmul(view, x.data(), 19, plain.data(), pool, scratch);
    view.packed = p.get();
    matmul(view, x.data(), 19, with_copy.data(), pool, scratch);
    set_vnni_allowed_for_test(true);
    EXPECT_EQ(plain, with_copy);
  }
}

// The 16-row-group layout without the tile unit (a VNNI-only CPU such as Zen 4, forced here
// with AMX switched off): every token count runs on VNNI in chunks of 4 and matches the
// references; on an AMX machine it is bit-identical to the tile path, and Q8_0 packed without
// AMX (q + 128 as u8) to Q8_0 packed with it.
TEST(KernelsMatmulPacked, RowGroupsWithoutAmxMatchReferenceAndTiles) {
  if (!packed_layout_supported(GgmlType::Q8_0, PackedLayout::kAmxTiles))
    GTEST_SKIP() << "no AVX-512 VNNI (or no GCC AMX kernel) here";
  const bool had_amx = cpu_has_amx_int8();
  uint32_t seed = 9100;
  for (GgmlType t : {GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q4_K}) {
    const int64_t cols = t == GgmlType::Q4_K ? 768 : 576;
    for (int64_t rows : {5, 16, 37}) {
      for (int64_t tokens : {1, 4, 5, 7, 16, 17, 33, 70}) {
        SCOPED_TRACE(testing::Message() << ggml_type_name(t) << " rows=" << rows
                                        << " tokens=" << tokens);
        const Weights w = make_weights(t, rows, cols, seed);
        const auto x = make_activations(tokens, cols, seed + 1);
        ++seed;
        ThreadPool pool(1 + static_cast<int>(tokens % 2));
        MatmulScratch scratch;
        MatrixView view = w.view();
        const auto p = pack_matrix(view, pool, PackedLayout::kAmxTiles);
        ASSERT_NE(p, nullptr);
        view.packed = p.get();
        std::vector<float> tiles(static_cast<size_t>(rows * tokens));
        matmul(view, x.data(), tokens, tiles.data(), pool, scratch);
        set_amx_allowed_for_test(false);
        EXPECT_TRUE(packed_layout_supported(t, PackedLayout::kAmxTiles));
        std::vector<float> vnni(tiles.size());
        matmul(view, x.data(), tokens, vnni.data(), pool, scratch);
        // Packed without AMX, Q8_0 stores q + 128 (the unsigned operand): the same integers.
        const auto p8 = pack_matrix(w.view(), pool, PackedLayout::kAmxTiles);
        ASSERT_NE(p8, nullptr);
        EXPECT_EQ(p8->u8_quants, t == GgmlType::Q8_0);
        MatrixView view8 = w.view();
        view8.packed = p8.get();
        std::vector<float> vnni8(tiles.size());
        matmul(view8, x.data(), tokens, vnni8.data(), pool, scratch);
        ASSERT_EQ(vnni8, vnni);
        for (int64_t r = 0; r < rows; r += 7) {
          for (int64_t c = 0; c < cols; c += 13) {
            ASSERT_EQ(packed_quant(*p8, r, c), packed_quant(*p, r, c));
          }
        }
        set_amx_allowed_for_test(true);
        matmul(view8, x.data(), tokens, vnni8.data(), pool, scratch);  // AMX back: still VNNI
        ASSERT_EQ(vnni8, vnni);
        if (had_amx) {
          ASSERT_EQ(vnni, tiles);
        }
        check_matmul({t, cols}, rows, tokens, 2, seed, /*packed=*/true, PackedLayout::kAmxTiles);
        set_amx_allowed_for_test(false);
        check_matmul({t, cols}, rows, tokens, 2, seed, /*packed=*/true, PackedLayout::kAmxTiles);
        set_amx_allowed_for_test(true);
        if (HasFatalFailure()) return;
      }
    }
  }
}

// The layout choice (kernel_choice.h): the candidates follow the switches, AMX picks the row
// groups, a forced layout wins where it runs, and without AMX the calibration times every
// candidate and picks one of them.
TEST(KernelsLayoutChoice, CandidatesSwitchesAndCalibration) {
  EXPECT_EQ(candidate_layouts(GgmlType::F32), std::vector<WeightLayout>{WeightLayout::kGguf});
  EXPECT_EQ(candidate_layouts(GgmlType::F16).back(), WeightLayout::kGguf);
  EXPECT_EQ(candidate_layouts(GgmlType::Q6_K), std::vector<WeightLayout>{WeightLayout::kGguf});
  EXPECT_EQ(choose_weight_layout(GgmlType::Q6_K).layout, WeightLayout::kGguf);
  if (!packed_layout_supported(GgmlType::Q8_0, PackedLayout::kAmxTiles))
    GTEST_SKIP() << "no AVX-512 VNNI (or no GCC AMX kernel) here";
  if (cpu_has_amx_int8()) {
    const LayoutChoice c = choose_weight_layout(GgmlType::Q8_0);
    EXPECT_EQ(c.layout, WeightLayout::kRowGroups);
    EXPECT_TRUE(c.timings.empty());
  }
  set_amx_allowed_for_test(false);
  for (GgmlType t : {GgmlType::Q8_0, GgmlType::Q4_K}) {
    SCOPED_TRACE(ggml_type_name(t));
    const auto cands = candidate_layouts(t);
    EXPECT_EQ(cands.front(), WeightLayout::kRowGroups);
    EXPECT_EQ(cands.back(), WeightLayout::kGguf);
    EXPECT_EQ(cands.size(), t == GgmlType::Q4_K ? 2u : 3u);  // Q4_K has no VNNI-pairs form
    const LayoutChoice c = choose_weight_layout(t);
    EXPECT_EQ(c.reason, "calibrated on this CPU");
    ASSERT_EQ(c.timings.size(), cands.size());
    for (size_t i = 0; i < cands.size(); ++i) {
      EXPECT_EQ(c.timings[i].layout, cands[i]);
      EXPECT_GT(c.timings[i].decode_us, 0.0);
      EXPECT_GT(c.timings[i].prefill_us, 0.0);
    }
    EXPECT_NE(std::find(cands.begin(), cands.end(), c.layout), cands.end());
    EXPECT_EQ(choose_weight_layout(t).layout, c.layout);  // cached
  }
  bool listed = false;
  for (const std::string& line : layout_choice_summary())
    listed = listed || line.rfind("q8_0: ", 0) == 0;
  EXPECT_TRUE(listed);
  set_amx_allowed_for_test(true);
}

}  // namespace
}  // namespace hinge::kernels
