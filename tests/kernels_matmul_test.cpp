// matmul parity: the multithreaded SIMD matmul against (a) matmul_ref_quantized, the scalar
// reference with the same quantized activations (tight), and (b) matmul_ref, the pure f32 product
// (bound derived from the activation quantization error). Odd shapes: rows not a multiple of any
// tile, 1..67 tokens, 1/2/3 threads; and bit-exact batch invariance of the quantized kernels.
// The packed layouts and the layout choice are in kernels_matmul_packed_test.cpp.
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
#include "hwy_test_util.h"
#include "kernels_matmul_test_util.h"

namespace hinge::kernels {
namespace {

const Case kCases[] = {
    {GgmlType::F32, 37},   {GgmlType::F32, 256},  {GgmlType::F16, 45},   {GgmlType::F16, 512},
    {GgmlType::BF16, 19},  {GgmlType::BF16, 512}, {GgmlType::Q8_0, 32},  {GgmlType::Q8_0, 96},
    {GgmlType::Q8_0, 512}, {GgmlType::Q4_0, 32},  {GgmlType::Q4_0, 160}, {GgmlType::Q4_0, 512},
    {GgmlType::Q4_K, 256}, {GgmlType::Q4_K, 768}, {GgmlType::Q6_K, 256}, {GgmlType::Q6_K, 768},
    {GgmlType::Q5_K, 256}, {GgmlType::Q5_K, 768},
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
                     GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K}) {
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
                     GgmlType::Q5_K, GgmlType::Q6_K}) {
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
  for (GgmlType type : {GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q4_K, GgmlType::Q5_K,
                        GgmlType::Q6_K}) {
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
  for (GgmlType t : {GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q4_K, GgmlType::Q5_K,
                     GgmlType::Q6_K}) {
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
  const int tested = testing::for_each_cpu_target([&](int64_t target) {
    SCOPED_TRACE(hwy::TargetName(target));
    uint32_t seed = 1000;
    for (const Case& c : kCases) {
      check_matmul(c, 21, 5, 2, seed++);
      check_matmul(c, 3, 1, 1, seed++);
      if (HasFatalFailure()) break;
    }
  });
  EXPECT_GE(tested, 2);
}

// The AVX-512 VNNI path of Q8_0 / Q4_0 / Q4_K / Q5_K (taken when the CPU has it) and the path without it:
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
  for (GgmlType t : {GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q4_K, GgmlType::Q5_K}) {
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
        SCOPED_TRACE(::testing::Message() << ggml_type_name(t) << " packed=" << packed
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

}  // namespace
}  // namespace hinge::kernels
