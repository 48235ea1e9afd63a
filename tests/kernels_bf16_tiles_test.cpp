// The AMX-BF16 kernel for F16 / BF16 weights (layout kBf16Tiles, kernels/matmul_bf16_amx.cpp):
// the layout holds every weight (BF16 as is, F16 rounded to bf16), the product matches a double
// reference of the same bf16 operands on odd shapes and thread counts, a token's result is
// bit-identical alone and in any batch, and the layout choice picks it where AMX-BF16 runs.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "common/half.h"
#include "common/thread_pool.h"
#include "kernels/cpu_features.h"
#include "kernels/kernel_choice.h"
#include "kernels/matmul.h"
#include "kernels/matmul_packed.h"

namespace hinge::kernels {
namespace {

struct FloatWeights {
  GgmlType type;
  int64_t rows, cols;
  std::vector<uint16_t> bits;  // row-major, F16 or BF16 bits
  MatrixView view() const {
    MatrixView v;
    v.type = type;
    v.data = bits.data();
    v.rows = rows;
    v.cols = cols;
    v.row_bytes = static_cast<size_t>(cols) * 2;
    return v;
  }
  // The weight as the tile unit sees it: bf16.
  float tile_value(int64_t r, int64_t c) const {
    const uint16_t b = bits[static_cast<size_t>(r * cols + c)];
    return type == GgmlType::BF16 ? bf16_to_f32(b) : bf16_to_f32(f32_to_bf16(f16_to_f32(b)));
  }
};

FloatWeights make_weights(GgmlType type, int64_t rows, int64_t cols, uint32_t seed) {
  FloatWeights w{type, rows, cols, {}};
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, 0.05f);
  w.bits.resize(static_cast<size_t>(rows * cols));
  for (auto& b : w.bits) {
    const float v = d(rng);
    b = type == GgmlType::BF16 ? f32_to_bf16(v) : f32_to_f16(v);
  }
  return w;
}

std::vector<float> make_x(int64_t tokens, int64_t cols, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(tokens * cols));
  for (float& v : x) v = d(rng);
  return x;
}

bool runs_here() { return packed_layout_supported(GgmlType::BF16, PackedLayout::kBf16Tiles); }

TEST(KernelsBf16Tiles, LayoutHoldsEveryWeight) {
  if (!runs_here()) GTEST_SKIP() << "no AMX-BF16 (or no GCC AMX kernel) here";
  ThreadPool pool(2);
  for (GgmlType t : {GgmlType::BF16, GgmlType::F16}) {
    const FloatWeights w = make_weights(t, 21, 96, 3);
    const auto p = pack_matrix(w.view(), pool, PackedLayout::kBf16Tiles);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(p->rows_padded, 32);
    EXPECT_EQ(p->nb, 3);
    EXPECT_EQ(p->bytes(), size_t{2} * 3 * 1024);
    for (int64_t r = 0; r < 32; ++r)
      for (int64_t c = 0; c < 96; ++c) {
        const float want = r < 21 ? w.tile_value(r, c) : 0.0f;
        ASSERT_EQ(bf16_to_f32(packed_bf16(*p, r, c)), want) << "r=" << r << " c=" << c;
      }
  }
  // Columns not a multiple of 32 have no tile form: the GGUF kernel runs them.
  const FloatWeights odd = make_weights(GgmlType::BF16, 4, 48, 4);
  EXPECT_EQ(pack_matrix(odd.view(), pool, PackedLayout::kBf16Tiles), nullptr);
  EXPECT_EQ(pack_matrix(odd.view(), pool), nullptr);
}

TEST(KernelsBf16Tiles, MatchesDoubleReferenceOfTheBf16Operands) {
  if (!runs_here()) GTEST_SKIP() << "no AMX-BF16 (or no GCC AMX kernel) here";
  uint32_t seed = 100;
  for (GgmlType t : {GgmlType::BF16, GgmlType::F16}) {
    for (int64_t cols : {32, 96, 576}) {
      for (int64_t rows : {1, 5, 16, 17, 37, 70}) {
        for (int64_t tokens : {1, 2, 5, 16, 17, 33, 70}) {
          SCOPED_TRACE(testing::Message() << ggml_type_name(t) << " rows=" << rows
                                          << " cols=" << cols << " tokens=" << tokens);
          const FloatWeights w = make_weights(t, rows, cols, seed++);
          const auto x = make_x(tokens, cols, seed++);
          ThreadPool pool(1 + static_cast<int>((rows + tokens) % 3));
          MatmulScratch scratch;
          MatrixView v = w.view();
          const auto p = pack_matrix(v, pool, PackedLayout::kBf16Tiles);
          ASSERT_NE(p, nullptr);
          v.packed = p.get();
          std::vector<float> y(static_cast<size_t>(rows * tokens), NAN);
          matmul(v, x.data(), tokens, y.data(), pool, scratch);
          for (int64_t tok = 0; tok < tokens; ++tok)
            for (int64_t r = 0; r < rows; ++r) {
              double ref = 0, mag = 0, exact = 0;
              for (int64_t c = 0; c < cols; ++c) {
                const float xv = x[static_cast<size_t>(tok * cols + c)];
                const double xb = bf16_to_f32(f32_to_bf16(xv));
                ref += double(w.tile_value(r, c)) * xb;
                mag += std::fabs(double(w.tile_value(r, c)) * xv);
                const uint16_t b = w.bits[static_cast<size_t>(r * cols + c)];
                exact += double(t == GgmlType::BF16 ? bf16_to_f32(b) : f16_to_f32(b)) * xv;
              }
              const float got = y[static_cast<size_t>(tok * rows + r)];
              // Same bf16 operands: only the f32 summation differs.
              ASSERT_NEAR(got, ref, 1e-5 * mag + 1e-30) << "tok=" << tok << " r=" << r;
              // Against the unrounded operands: at most the bf16 rounding of both (2^-9 each).
              ASSERT_NEAR(got, exact, 2.0 * std::ldexp(1.0, -9) * mag + 1e-5 * mag + 1e-30);
            }
        }
      }
    }
  }
}

TEST(KernelsBf16Tiles, BatchInvariant) {
  if (!runs_here()) GTEST_SKIP() << "no AMX-BF16 (or no GCC AMX kernel) here";
  const int64_t rows = 37, cols = 2048, tokens = 70;
  const FloatWeights w = make_weights(GgmlType::BF16, rows, cols, 9);
  const auto x = make_x(tokens, cols, 10);
  ThreadPool pool(2);
  MatmulScratch scratch;
  MatrixView v = w.view();
  const auto p = pack_matrix(v, pool, PackedLayout::kBf16Tiles);
  ASSERT_NE(p, nullptr);
  v.packed = p.get();
  std::vector<float> y(static_cast<size_t>(rows * tokens));
  matmul(v, x.data(), tokens, y.data(), pool, scratch);
  for (int64_t n : {1, 3, 16, 17, 33}) {
    std::vector<float> part(static_cast<size_t>(rows * n));
    for (int64_t t0 = 0; t0 + n <= tokens; t0 += 19) {
      matmul(v, x.data() + t0 * cols, n, part.data(), pool, scratch);
      for (int64_t tt = 0; tt < n; ++tt)
        for (int64_t r = 0; r < rows; ++r)
          ASSERT_EQ(part[static_cast<size_t>(tt * rows + r)],
                    y[static_cast<size_t>((t0 + tt) * rows + r)])
              << "n=" << n << " t=" << t0 + tt << " r=" << r;
    }
  }
}

TEST(KernelsBf16Tiles, ChosenWhereAmxBf16Runs) {
  if (!runs_here()) {
    EXPECT_EQ(choose_weight_layout(GgmlType::BF16).layout, WeightLayout::kGguf);
    GTEST_SKIP() << "no AMX-BF16 (or no GCC AMX kernel) here";
  }
  for (GgmlType t : {GgmlType::BF16, GgmlType::F16}) {
    const LayoutChoice c = choose_weight_layout(t);
    EXPECT_EQ(c.layout, WeightLayout::kBf16Tiles);
    EXPECT_EQ(c.reason, "AMX-BF16 tiles");
  }
  EXPECT_EQ(choose_weight_layout(GgmlType::F32).layout, WeightLayout::kGguf);
  // Without AMX the exact f32 kernel runs the view, packed copy or not.
  set_amx_allowed_for_test(false);
  EXPECT_FALSE(packed_layout_supported(GgmlType::BF16, PackedLayout::kBf16Tiles));
  EXPECT_EQ(choose_weight_layout(GgmlType::BF16).layout, WeightLayout::kGguf);
  set_amx_allowed_for_test(true);
}

}  // namespace
}  // namespace hinge::kernels
