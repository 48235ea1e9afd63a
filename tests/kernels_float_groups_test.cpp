// F16 / BF16 weights in 16-row groups (PackedLayout::kFloatGroups) on AVX2 + FMA + F16C
// (kernels/matmul_float_groups_avx2.cpp): the layout holds every weight exactly, the product
// matches a double reference of the same operands on odd shapes, token counts across the
// token and column blocks and 1-3 threads, a token's result is bit-identical alone and in any
// batch, and the layout choice lists it where it runs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "common/half.h"
#include "common/thread_pool.h"
#include "kernels/kernel_choice.h"
#include "kernels/matmul.h"
#include "kernels/matmul_kernels.h"
#include "kernels/matmul_packed.h"
#include "kernels_matmul_test_util.h"

namespace hinge::kernels {
namespace {

bool runs_here() { return packed_layout_supported(GgmlType::F16, PackedLayout::kFloatGroups); }

TEST(KernelsFloatGroups, LayoutHoldsEveryWeight) {
  if (!runs_here()) GTEST_SKIP() << "no AVX2 + FMA + F16C here";
  EXPECT_FALSE(packed_layout_supported(GgmlType::F32, PackedLayout::kFloatGroups));
  EXPECT_FALSE(packed_layout_supported(GgmlType::Q8_0, PackedLayout::kFloatGroups));
  ThreadPool pool(2);
  for (GgmlType t : {GgmlType::F16, GgmlType::BF16}) {
    SCOPED_TRACE(ggml_type_name(t));
    const Weights w = make_weights(t, 21, 37, 3);
    const auto p = pack_matrix(w.view(), pool, PackedLayout::kFloatGroups);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(p->rows_padded, 32);
    EXPECT_EQ(p->qs_row_bytes, size_t{37 * 32 + 63} / 64 * 64);
    EXPECT_EQ(p->bytes(), 2 * p->qs_row_bytes);
    const auto* src = reinterpret_cast<const uint16_t*>(w.bytes.data());
    for (int64_t r = 0; r < 32; ++r)
      for (int64_t c = 0; c < 37; ++c)
        ASSERT_EQ(packed_float_bits(*p, r, c), r < 21 ? src[r * 37 + c] : 0)
            << "r=" << r << " c=" << c;
  }
}

TEST(KernelsFloatGroups, MatchesDoubleReference) {
  if (!runs_here()) GTEST_SKIP() << "no AVX2 + FMA + F16C here";
  uint32_t seed = 300;
  for (GgmlType t : {GgmlType::F16, GgmlType::BF16}) {
    for (int64_t cols : {8, 37, 256, 600}) {
      for (int64_t rows : {1, 5, 16, 17, 37, 70}) {
        for (int64_t tokens : {1, 2, 3, 5, 6, 7, 13, 100}) {
          SCOPED_TRACE(testing::Message() << ggml_type_name(t) << " rows=" << rows
                                          << " cols=" << cols << " tokens=" << tokens);
          const Weights w = make_weights(t, rows, cols, seed++);
          const auto x = make_activations(tokens, cols, seed++);
          ThreadPool pool(1 + static_cast<int>((rows + tokens) % 3));
          MatmulScratch scratch;
          MatrixView v = w.view();
          const auto p = pack_matrix(v, pool, PackedLayout::kFloatGroups);
          ASSERT_NE(p, nullptr);
          v.packed = p.get();
          std::vector<float> y(static_cast<size_t>(rows * tokens), NAN);
          matmul(v, x.data(), tokens, y.data(), pool, scratch);
          for (int64_t tok = 0; tok < tokens; ++tok)
            for (int64_t r = 0; r < rows; ++r) {
              double ref = 0, mag = 0;
              for (int64_t c = 0; c < cols; ++c) {
                const double prod = double(w.dequant[static_cast<size_t>(r * cols + c)]) *
                                    x[static_cast<size_t>(tok * cols + c)];
                ref += prod;
                mag += std::fabs(prod);
              }
              // Exact operands; f32 sums of at most 256 terms per column block: within
              // 300 units of f32 roundoff (2^-24) of the magnitude.
              ASSERT_NEAR(y[static_cast<size_t>(tok * rows + r)], ref, 300 * 0x1p-24 * mag + 1e-30)
                  << "tok=" << tok << " r=" << r;
            }
        }
      }
    }
  }
}

// Decode (1-6 tokens, groups taken 4 or 2 at once) and prefill (tiles of 6 in blocks of 96
// tokens) give every token the same bits.
TEST(KernelsFloatGroups, BatchInvariant) {
  if (!runs_here()) GTEST_SKIP() << "no AVX2 + FMA + F16C here";
  for (GgmlType t : {GgmlType::F16, GgmlType::BF16}) {
    SCOPED_TRACE(ggml_type_name(t));
    ThreadPool pool(2);
    MatmulScratch scratch;
    const PackedCase pc(t, 101, 700, 110, 9, PackedLayout::kFloatGroups, pool);
    ASSERT_NE(pc.p, nullptr);
    expect_batch_invariant(pc.view, pc.x, 110, {1, 2, 3, 4, 6, 7, 17, 100}, 9, pool, scratch);
    ThreadPool one(1);
    expect_batch_invariant(pc.view, pc.x, 110, {1, 5}, 31, one, scratch);
  }
}

TEST(KernelsFloatGroups, LayoutChoiceListsIt) {
  if (!runs_here()) GTEST_SKIP() << "no AVX2 + FMA + F16C here";
  for (GgmlType t : {GgmlType::F16, GgmlType::BF16}) {
    SCOPED_TRACE(ggml_type_name(t));
    const auto cands = candidate_layouts(t);
    EXPECT_NE(std::find(cands.begin(), cands.end(), WeightLayout::kRowGroups), cands.end());
    EXPECT_EQ(cands.back(), WeightLayout::kGguf);
    // The chosen layout packs (or not) as it says.
    ThreadPool pool(1);
    const Weights w = make_weights(t, 32, 64, 5);
    const auto p = pack_matrix(w.view(), pool);
    const LayoutChoice c = choose_weight_layout(t);
    if (c.layout == WeightLayout::kRowGroups) {
      ASSERT_NE(p, nullptr);
      EXPECT_EQ(p->layout, PackedLayout::kFloatGroups);
    } else if (c.layout == WeightLayout::kGguf) {
      EXPECT_EQ(p, nullptr);
    }
  }
}

}  // namespace
}  // namespace hinge::kernels
