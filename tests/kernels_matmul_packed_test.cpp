// The packed weight layouts (kernels/matmul_packed.h) and the layout choice
// (kernels/kernel_choice.h): each layout holds every quant and scale, its kernels match the
// references on odd shapes and are batch-invariant, they fall back without their instructions,
// the 16-row groups run without AMX (bit-identical to the tiles), and the calibration picks.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
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

// Packed Q4_K (row groups only) holds every nibble, sub-block scale and min, d and dmin.
TEST(KernelsMatmulPacked, Q4KLayoutReadsBack) {
  if (!packed_layout_supported(GgmlType::Q4_K, PackedLayout::kAmxTiles))
    GTEST_SKIP() << "no row groups here";
  expect_k_mins_layout_reads_back<BlockQ4_K>(GgmlType::Q4_K, 5);
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
      ThreadPool pool(2);
      MatmulScratch scratch;
      const PackedCase pc(t, 37, 8192, 70, 9, layout, pool);
      ASSERT_NE(pc.p, nullptr);
      expect_batch_invariant(pc.view, pc.x, 70, {1, 3, 6, 16}, 23, pool, scratch);
      if (HasFatalFailure()) return;
    }
  }
}

// Without VNNI, a view that carries a packed copy in the pairs layout falls back to the GGUF
// kernels (same results as without the copy, bit for bit), and nothing new is packed. (The row
// groups run on AVX2 without VNNI: RowGroupsOnAvx2MatchReferenceAndVnni.)
TEST(KernelsMatmulPacked, FallsBackWithoutTheKernel) {
  if (runnable_layouts().empty()) GTEST_SKIP() << "no AVX-512 VNNI here";
  ThreadPool pool(2);
  MatmulScratch scratch;
  const auto x = make_activations(19, 512, 12);
  for (PackedLayout layout : runnable_layouts()) {
    SCOPED_TRACE(layout_name(layout));
    if (layout == PackedLayout::kAmxTiles && rowgroups_avx2_usable(GgmlType::Q4_K)) continue;
    const GgmlType type = layout == PackedLayout::kAmxTiles ? GgmlType::Q4_K : GgmlType::Q8_0;
    const Weights w = make_weights(type, 21, 512, 11);
    MatrixView view = w.view();
    const auto p = pack_matrix(view, pool, layout);
    ASSERT_NE(p, nullptr);
    set_vnni_allowed_for_test(false);
    EXPECT_FALSE(packed_layout_supported(type, layout));
    EXPECT_EQ(pack_matrix(view, pool, layout), nullptr);
    if (layout == PackedLayout::kAmxTiles) {
      EXPECT_FALSE(packed_matmul_supported(type));  // AMX's kernel needs VNNI too
      EXPECT_EQ(candidate_layouts(type), std::vector<WeightLayout>{WeightLayout::kGguf});
      EXPECT_EQ(choose_weight_layout(type).layout, WeightLayout::kGguf);
      EXPECT_EQ(pack_matrix(view, pool), nullptr);
    }
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
  if (!amx_kernel_usable())
    GTEST_SKIP() << "no AVX-512 VNNI (or no GCC AMX kernel) here";
  const bool had_amx = cpu_has_amx_int8();
  uint32_t seed = 9100;
  for (GgmlType t : {GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q4_K}) {
    const int64_t cols = t == GgmlType::Q4_K ? 768 : 576;
    for (int64_t rows : {5, 16, 37}) {
      for (int64_t tokens : {1, 2, 3, 4, 5, 7, 16, 17, 33, 70}) {
        SCOPED_TRACE(testing::Message() << ggml_type_name(t) << " rows=" << rows
                                        << " tokens=" << tokens);
        ThreadPool pool(1 + static_cast<int>(tokens % 2));
        MatmulScratch scratch;
        const PackedCase pc(t, rows, cols, tokens, seed++, PackedLayout::kAmxTiles, pool);
        ASSERT_NE(pc.p, nullptr);
        const Weights& w = pc.w;
        const std::vector<float>& x = pc.x;
        const MatrixView& view = pc.view;
        const std::vector<float> tiles = product(view, x, tokens, pool, scratch);
        set_amx_allowed_for_test(false);
        EXPECT_TRUE(packed_layout_supported(t, PackedLayout::kAmxTiles));
        const std::vector<float> vnni = product(view, x, tokens, pool, scratch);
        // Packed without AMX, Q8_0 stores q + 128 (the unsigned operand): the same integers.
        MatrixView view8 = w.view();
        const auto p8 = attach_packed(view8, PackedLayout::kAmxTiles, pool);
        ASSERT_NE(p8, nullptr);
        EXPECT_EQ(p8->u8_quants, t == GgmlType::Q8_0);
        std::vector<float> vnni8 = product(view8, x, tokens, pool, scratch);
        ASSERT_EQ(vnni8, vnni);
        for (int64_t r = 0; r < rows; r += 7) {
          for (int64_t c = 0; c < cols; c += 13) {
            ASSERT_EQ(packed_quant(*p8, r, c), packed_quant(*pc.p, r, c));
          }
        }
        set_amx_allowed_for_test(true);
        vnni8 = product(view8, x, tokens, pool, scratch);  // AMX back: still VNNI
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

// Q4_0's, Q8_0's and Q4_K's 16-row groups on AVX2 (matmul_rowgroups_avx2.cpp: CPUs without
// AVX-512 VNNI, such as AMD Zen 3; forced on others by switching VNNI off): every token count
// (chunks of 4, token tiles of 16, rows not a multiple of 16) matches the reference, is
// bit-identical to the VNNI / AMX kernels where they run (Q8_0 packed signed for AMX or as
// q + 128 for VNNI), and is batch invariant; the layout choice lists it and calibrates.
TEST(KernelsMatmulPacked, RowGroupsOnAvx2MatchReferenceAndVnni) {
  if (!rowgroups_avx2_usable(GgmlType::Q4_0)) GTEST_SKIP() << "no AVX2 here";
  EXPECT_TRUE(rowgroups_avx2_usable(GgmlType::Q8_0));
  EXPECT_TRUE(rowgroups_avx2_usable(GgmlType::Q4_K));
  const bool vnni = amx_kernel_usable();  // the AMX / VNNI kernel runs here
  uint32_t seed = 9400;
  for (GgmlType t : {GgmlType::Q4_0, GgmlType::Q8_0, GgmlType::Q4_K}) {
    const bool k = t == GgmlType::Q4_K;
    for (int64_t cols : {k ? 256 : 32, k ? 768 : 576, k ? 4352 : 4192}) {
      for (int64_t rows : {5, 16, 37}) {
        for (int64_t tokens : {1, 2, 3, 4, 5, 16, 17, 33, 70}) {
          if (cols * rows * tokens > 4352 * 16 * 17) continue;
          SCOPED_TRACE(testing::Message() << ggml_type_name(t) << " cols=" << cols
                                          << " rows=" << rows << " tokens=" << tokens);
          ThreadPool pool(1 + static_cast<int>(tokens % 2));
          MatmulScratch scratch;
          const PackedCase pc(t, rows, cols, tokens, seed++, PackedLayout::kAmxTiles, pool);
          ASSERT_NE(pc.p, nullptr);
          const std::vector<float> first = product(pc.view, pc.x, tokens, pool, scratch);
          set_vnni_allowed_for_test(false);
          EXPECT_TRUE(packed_layout_supported(t, PackedLayout::kAmxTiles));
          const std::vector<float> avx2 = product(pc.view, pc.x, tokens, pool, scratch);
          if (vnni) {
            ASSERT_EQ(avx2, first);  // the same integers and f32 operations
          }
          check_matmul({t, cols}, rows, tokens, 2, seed, /*packed=*/true,
                       PackedLayout::kAmxTiles);
          set_vnni_allowed_for_test(true);
          if (HasFatalFailure()) return;
        }
      }
    }
  }
  set_vnni_allowed_for_test(false);
  for (GgmlType t : {GgmlType::Q4_0, GgmlType::Q8_0, GgmlType::Q4_K}) {
    SCOPED_TRACE(ggml_type_name(t));
    ThreadPool pool(2);
    MatmulScratch scratch;
    const PackedCase pc(t, 37, 8192, 70, 9, PackedLayout::kAmxTiles, pool);
    ASSERT_NE(pc.p, nullptr);
    expect_batch_invariant(pc.view, pc.x, 70, {1, 3, 6, 16}, 23, pool, scratch);
  }
  for (GgmlType t : {GgmlType::Q4_0, GgmlType::Q8_0, GgmlType::Q4_K}) {
    const auto cands = candidate_layouts(t);
    EXPECT_EQ(cands.front(), WeightLayout::kRowGroups);
    EXPECT_EQ(cands.back(), WeightLayout::kGguf);
    const LayoutChoice c = choose_weight_layout(t);
    EXPECT_EQ(c.reason, "calibrated on this CPU");
    ASSERT_EQ(c.timings.size(), cands.size());
  }
  set_vnni_allowed_for_test(true);
}

// Q8_0 quants of -128 (GGUF allows them; llama.cpp's quantizer never writes them) on the AVX2
// row groups: vpabsb makes them 128 as unsigned, so the product stays exact. Against the
// reference with the same quantized activations.
TEST(KernelsMatmulPacked, RowGroupsOnAvx2Q8MinusOneTwentyEight) {
  if (!rowgroups_avx2_usable(GgmlType::Q8_0)) GTEST_SKIP() << "no AVX2 here";
  const int64_t rows = 19, cols = 256, tokens = 6;
  Weights w = make_weights(GgmlType::Q8_0, rows, cols, 77);
  auto* blocks = reinterpret_cast<BlockQ8_0*>(w.bytes.data());
  const int64_t nblocks = rows * cols / kQK8_0;
  for (int64_t b = 0; b < nblocks; ++b)
    for (int e = static_cast<int>(b % 3); e < kQK8_0; e += 3) blocks[b].qs[e] = -128;
  const size_t rb = w.bytes.size() / static_cast<size_t>(rows);
  for (int64_t r = 0; r < rows; ++r)
    ASSERT_TRUE(dequantize_row_ref(GgmlType::Q8_0, w.bytes.data() + r * rb,
                                   w.dequant.data() + r * cols, cols));
  auto x = make_activations(tokens, cols, 78);
  for (size_t i = 0; i < x.size(); i += 2) x[i] = -std::fabs(x[i]) - 1.0f;  // pairs of one sign
  set_vnni_allowed_for_test(false);
  ThreadPool pool(2);
  MatmulScratch scratch;
  MatrixView view = w.view();
  const auto p = attach_packed(view, PackedLayout::kAmxTiles, pool);
  ASSERT_NE(p, nullptr);
  const std::vector<float> y = product(view, x, tokens, pool, scratch);
  set_vnni_allowed_for_test(true);
  std::vector<float> yq(y.size());
  matmul_ref_quantized(w.view(), x.data(), tokens, yq.data());
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t r = 0; r < rows; ++r) {
      const size_t i = static_cast<size_t>(t * rows + r);
      ASSERT_NEAR(y[i], yq[i], 1e-5 * abs_dot(w, x.data() + t * cols, r) + 1e-30)
          << "t=" << t << " r=" << r;
    }
}

// The layout choice (kernel_choice.h): the candidates follow the switches, AMX picks the row
// groups, a forced layout wins where it runs, and without AMX the calibration times every
// candidate and picks one of them.
TEST(KernelsLayoutChoice, CandidatesSwitchesAndCalibration) {
  EXPECT_EQ(candidate_layouts(GgmlType::F32), std::vector<WeightLayout>{WeightLayout::kGguf});
  EXPECT_EQ(candidate_layouts(GgmlType::F16).back(), WeightLayout::kGguf);
  EXPECT_EQ(choose_weight_layout(GgmlType::F32).layout, WeightLayout::kGguf);
  if (!amx_kernel_usable())
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
