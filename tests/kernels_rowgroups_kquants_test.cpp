// Q5_K and Q6_K in 16-row groups on AVX2 (PackedLayout::kAmxTiles, matmul_rowgroups_avx2.cpp),
// and on AVX-512 VNNI (matmul_rowgroups_q56k_vnni.cpp), each kernel where it runs:
// the packed copy holds every value, scale, min and d; the products are bit-identical to the
// scalar references (vec_dot_q{5,6}_k_q8_k_ref on the same Q8_K activations) for every token
// count, row and column shape, also at the extremes of the integer ranges, and batch
// invariant; the layout choice calibrates them against the GGUF kernels.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "common/thread_pool.h"
#include "kernels/cpu_features.h"
#include "kernels/kernel_choice.h"
#include "kernels/matmul.h"
#include "kernels/matmul_kernels.h"
#include "kernels/matmul_packed.h"
#include "kernels/quant.h"
#include "kernels/quant_block.h"
#include "kernels_matmul_test_util.h"

namespace hinge::kernels {
namespace {

// Value e (0..255) of a GGUF Q6_K super-block, 0..63 (dequantize_row_q6_k_ref's order).
int q6k_value(const BlockQ6_K& b, int e) {
  const int h = e / 128, l = e % 32, g = (e % 128) / 32;
  const uint8_t ql = b.ql[64 * h + l + 32 * (g % 2)];
  const int low = g < 2 ? ql & 0xF : ql >> 4;
  return low | (((b.qh[32 * h + l] >> (2 * g)) & 3) << 4);
}

// The kernels that read Q5_K / Q6_K row groups here: AVX-512 VNNI (where it runs) and AVX2
// (set_vnni_allowed_for_test(false), as HINGE_DISABLE_VNNI=1 does).
std::vector<bool> vnni_modes() {
  if (q56k_vnni_kernel_compiled() && cpu_identity().avx512_vnni) return {true, false};
  return {false};
}

// The packed product of `w` against `x` on each row-group kernel of its type, and the
// reference's.
void expect_bit_identical(const Weights& w, const std::vector<float>& x, int64_t tokens,
                          int threads) {
  ThreadPool pool(threads);
  MatmulScratch scratch;
  MatrixView view = w.view();
  const auto p = attach_packed(view, PackedLayout::kAmxTiles, pool);
  ASSERT_NE(p, nullptr);
  std::vector<float> ref(static_cast<size_t>(tokens * w.rows));
  matmul_ref_quantized(w.view(), x.data(), tokens, ref.data());
  for (bool vnni : vnni_modes()) {
    SCOPED_TRACE(vnni ? "AVX-512 VNNI" : "AVX2");
    set_vnni_allowed_for_test(vnni);
    const std::vector<float> y = product(view, x, tokens, pool, scratch);
    set_vnni_allowed_for_test(true);
    for (int64_t t = 0; t < tokens; ++t)
      for (int64_t r = 0; r < w.rows; ++r) {
        const size_t i = static_cast<size_t>(t * w.rows + r);
        ASSERT_EQ(y[i], ref[i]) << "t=" << t << " r=" << r;
      }
  }
}

TEST(KernelsRowGroupsKQuants, Q6KLayoutReadsBack) {
  if (!rowgroups_avx2_usable(GgmlType::Q6_K)) GTEST_SKIP() << "no AVX2 here";
  ThreadPool pool(2);
  const int64_t rows = 19, cols = 512;
  const Weights w = make_weights(GgmlType::Q6_K, rows, cols, 15);
  const auto p = pack_matrix(w.view(), pool, PackedLayout::kAmxTiles);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->nb, 2);
  EXPECT_EQ(p->rows_padded, 32);
  EXPECT_EQ(p->qs_row_bytes, 2 * kPackedQ6KSuperBytes);
  EXPECT_EQ(pack_matrix(w.view(), pool, PackedLayout::kVnniPairs), nullptr);
  const size_t rb = w.view().row_bytes;
  for (int64_t r = 0; r < p->rows_padded; ++r)
    for (int64_t sb = 0; sb < 2; ++sb) {
      BlockQ6_K blk{};
      if (r < rows) std::memcpy(&blk, w.bytes.data() + r * rb + sb * sizeof blk, sizeof blk);
      EXPECT_EQ(packed_q6k_d(*p, r, sb), blk.d) << "r=" << r;
      for (int j = 0; j < 16; ++j)
        EXPECT_EQ(packed_q6k_scale(*p, r, sb, j), blk.scales[j]) << "r=" << r << " j=" << j;
      for (int e = 0; e < kQK_K; ++e)
        ASSERT_EQ(packed_quant(*p, r, sb * kQK_K + e), q6k_value(blk, e))
            << "r=" << r << " sb=" << sb << " e=" << e;
    }
}

TEST(KernelsRowGroupsKQuants, Q5KLayoutReadsBack) {
  if (!rowgroups_avx2_usable(GgmlType::Q5_K)) GTEST_SKIP() << "no AVX2 here";
  expect_k_mins_layout_reads_back<BlockQ5_K>(GgmlType::Q5_K, 16);
}

TEST(KernelsRowGroupsKQuants, BitIdenticalToReference) {
  if (!rowgroups_avx2_usable(GgmlType::Q6_K)) GTEST_SKIP() << "no AVX2 here";
  uint32_t seed = 9600;
  for (GgmlType type : {GgmlType::Q5_K, GgmlType::Q6_K}) {
    for (int64_t cols : {256, 768, 4352}) {
      for (int64_t rows : {1, 5, 16, 37}) {
        for (int64_t tokens : {1, 2, 3, 4, 5, 16, 17, 33, 70}) {
          if (cols * rows * tokens > 4352 * 16 * 17) continue;
          SCOPED_TRACE(::testing::Message() << ggml_type_name(type) << " cols=" << cols
                                            << " rows=" << rows << " tokens=" << tokens);
          const Weights w = make_weights(type, rows, cols, seed++);
          expect_bit_identical(w, make_activations(tokens, cols, seed++), tokens,
                               1 + static_cast<int>(tokens % 3));
          if (HasFatalFailure()) return;
        }
      }
    }
    // Through matmul's quantization checks too: the reference bounds of check_matmul.
    check_matmul({type, 2304}, 45, 21, 2, seed++, /*packed=*/true, PackedLayout::kAmxTiles);
  }
}

// The integer sums at their limits: every value 63 (or 0) with scales -128 / 127 against
// activations of one sign (each sub-block's quants at +-127): the i16 pair sums of two tile rows
// (2 * 2 * 63 * 127) and the i32 super-block sums stay exact. Q5_K: every value 31 (or 0) with
// scales and mins 63 (four tile rows: 4 * 2 * 31 * 127 in i16).
TEST(KernelsRowGroupsKQuants, ExtremesStayExact) {
  if (!rowgroups_avx2_usable(GgmlType::Q6_K)) GTEST_SKIP() << "no AVX2 here";
  const int64_t rows = 21, cols = 512, tokens = 6;
  Weights w = make_weights(GgmlType::Q6_K, rows, cols, 31);
  auto* blocks = reinterpret_cast<BlockQ6_K*>(w.bytes.data());
  for (int64_t b = 0; b < rows * cols / kQK_K; ++b) {
    const uint8_t fill = b % 3 == 2 ? 0x00 : 0xFF;  // values 63, or 0 (q - 32 = -32)
    std::memset(blocks[b].ql, fill, sizeof blocks[b].ql);
    std::memset(blocks[b].qh, fill, sizeof blocks[b].qh);
    for (int j = 0; j < 16; ++j) blocks[b].scales[j] = static_cast<int8_t>(j % 2 ? 127 : -128);
  }
  // One magnitude per token: every Q8_K quant is +-127.
  std::vector<float> x(static_cast<size_t>(tokens * cols));
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t c = 0; c < cols; ++c) x[t * cols + c] = t % 2 ? -1.0f : 1.0f;
  expect_bit_identical(w, x, tokens, 2);
  if (HasFatalFailure()) return;
  Weights w5 = make_weights(GgmlType::Q5_K, rows, cols, 33);
  auto* b5 = reinterpret_cast<BlockQ5_K*>(w5.bytes.data());
  for (int64_t b = 0; b < rows * cols / kQK_K; ++b) {
    const uint8_t fill = b % 3 == 2 ? 0x00 : 0xFF;  // values 31, or 0
    std::memset(b5[b].qs, fill, sizeof b5[b].qs);
    std::memset(b5[b].qh, fill, sizeof b5[b].qh);
    std::memset(b5[b].scales, 0xFF, sizeof b5[b].scales);  // every 6-bit scale and min 63
  }
  expect_bit_identical(w5, x, tokens, 2);
}

TEST(KernelsRowGroupsKQuants, BatchInvariantAndCalibrated) {
  if (!rowgroups_avx2_usable(GgmlType::Q6_K)) GTEST_SKIP() << "no AVX2 here";
  for (GgmlType type : {GgmlType::Q5_K, GgmlType::Q6_K}) {
    SCOPED_TRACE(ggml_type_name(type));
    ThreadPool pool(2);
    MatmulScratch scratch;
    const PackedCase pc(type, 37, 8192, 70, 9, PackedLayout::kAmxTiles, pool);
    ASSERT_NE(pc.p, nullptr);
    for (bool vnni : vnni_modes()) {
      SCOPED_TRACE(vnni ? "AVX-512 VNNI" : "AVX2");
      set_vnni_allowed_for_test(vnni);
      expect_batch_invariant(pc.view, pc.x, 70, {1, 3, 6, 16}, 23, pool, scratch);
      set_vnni_allowed_for_test(true);
      if (HasFatalFailure()) return;
    }
    const auto cands = candidate_layouts(type);
    ASSERT_EQ(cands.size(), 2u);
    EXPECT_EQ(cands.front(), WeightLayout::kRowGroups);
    const LayoutChoice c = choose_weight_layout(type);
    if (!std::getenv("HINGE_WEIGHT_LAYOUT")) {
      EXPECT_NE(c.reason.find("calibrated"), std::string::npos) << c.reason;
      ASSERT_EQ(c.timings.size(), cands.size());
    }
  }
}

}  // namespace
}  // namespace hinge::kernels
