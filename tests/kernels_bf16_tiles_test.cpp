// The bf16 tile layout for F16 / BF16 weights (kBf16Tiles) on both of its kernels: the AMX-BF16
// tile unit (kernels/matmul_bf16_amx.cpp) and AVX-512 BF16 vdpbf16ps (matmul_bf16_dp.cpp, CPUs
// without AMX; forced on AMX machines by switching AMX off). The layout holds every weight (BF16
// as is, F16 rounded to bf16), each kernel's product matches a double reference of the same
// bf16 operands on odd shapes and thread counts, a token's result is bit-identical alone and in
// any batch, and the layout choice picks the layout wherever one of the kernels runs.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "common/half.h"
#include "common/thread_pool.h"
#include "kernels/cpu_features.h"
#include "kernels/kernel_choice.h"
#include "kernels/matmul.h"
#include "kernels/matmul_kernels.h"
#include "kernels/matmul_packed.h"
#include "kernels_matmul_test_util.h"

namespace hinge::kernels {
namespace {

// The weight as the tile unit sees it: bf16 (F16 rounded to nearest even).
float tile_value(const Weights& w, int64_t r, int64_t c) {
  return bf16_to_f32(f32_to_bf16(w.dequant[static_cast<size_t>(r * w.cols + c)]));
}

bool runs_here() { return packed_layout_supported(GgmlType::BF16, PackedLayout::kBf16Tiles); }

// The kernels that run here: "amx" (the tile unit) and "vdpbf16ps" (AVX-512 BF16).
std::vector<const char*> kernels_here() {
  std::vector<const char*> out;
  if (amx_kernel_compiled() && cpu_has_amx_bf16()) out.push_back("amx");
  if (bf16_dp_kernel_compiled() && cpu_has_avx512_bf16()) out.push_back("vdpbf16ps");
  return out;
}

// Runs the scope on one kernel: vdpbf16ps switches AMX off (and on again at the end).
class KernelScope {
 public:
  explicit KernelScope(const char* kernel) : off_(std::string(kernel) != "amx") {
    if (off_) set_amx_allowed_for_test(false);
  }
  ~KernelScope() {
    if (off_) set_amx_allowed_for_test(true);
  }
  KernelScope(const KernelScope&) = delete;
  KernelScope& operator=(const KernelScope&) = delete;

 private:
  bool off_;
};

TEST(KernelsBf16Tiles, LayoutHoldsEveryWeight) {
  if (!runs_here()) GTEST_SKIP() << "no AMX-BF16 (or no GCC AMX kernel) here";
  ThreadPool pool(2);
  for (GgmlType t : {GgmlType::BF16, GgmlType::F16}) {
    const Weights w = make_weights(t, 21, 96, 3);
    const auto p = pack_matrix(w.view(), pool, PackedLayout::kBf16Tiles);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(p->rows_padded, 32);
    EXPECT_EQ(p->nb, 3);
    EXPECT_EQ(p->bytes(), size_t{2} * 3 * 1024);
    for (int64_t r = 0; r < 32; ++r)
      for (int64_t c = 0; c < 96; ++c) {
        const float want = r < 21 ? tile_value(w, r, c) : 0.0f;
        ASSERT_EQ(bf16_to_f32(packed_bf16(*p, r, c)), want) << "r=" << r << " c=" << c;
      }
  }
  // Columns not a multiple of 32 have no tile form: the GGUF kernel runs them.
  const Weights odd = make_weights(GgmlType::BF16, 4, 48, 4);
  EXPECT_EQ(pack_matrix(odd.view(), pool, PackedLayout::kBf16Tiles), nullptr);
  EXPECT_EQ(pack_matrix(odd.view(), pool), nullptr);
}

TEST(KernelsBf16Tiles, MatchesDoubleReferenceOfTheBf16Operands) {
  if (!runs_here()) GTEST_SKIP() << "no AMX-BF16 (or no GCC AMX kernel) here";
  for (const char* kernel : kernels_here()) {
    SCOPED_TRACE(kernel);
    KernelScope scope(kernel);
    uint32_t seed = 100;
    for (GgmlType t : {GgmlType::BF16, GgmlType::F16}) {
      for (int64_t cols : {32, 96, 576}) {
        for (int64_t rows : {1, 5, 16, 17, 37, 70}) {
          for (int64_t tokens : {1, 2, 5, 16, 17, 33, 70}) {
            SCOPED_TRACE(testing::Message() << ggml_type_name(t) << " rows=" << rows
                                            << " cols=" << cols << " tokens=" << tokens);
            const Weights w = make_weights(t, rows, cols, seed++);
            const auto x = make_activations(tokens, cols, seed++);
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
                  ref += double(tile_value(w, r, c)) * xb;
                  mag += std::fabs(double(tile_value(w, r, c)) * xv);
                  exact += double(w.dequant[static_cast<size_t>(r * cols + c)]) * xv;
                }
                const float got = y[static_cast<size_t>(tok * rows + r)];
                // Same bf16 operands: only the f32 summation differs.
                ASSERT_NEAR(got, ref, 1e-5 * mag + 1e-30) << "tok=" << tok << " r=" << r;
                // Against the unrounded operands: at most the bf16 rounding of both, each within
                // bf16's unit roundoff (8 significant bits: 2^-8 of the value).
                ASSERT_NEAR(got, exact, 2.0 * std::ldexp(1.0, -8) * mag + 1e-5 * mag + 1e-30);
              }
          }
        }
      }
    }
  }
}

TEST(KernelsBf16Tiles, BatchInvariant) {
  if (!runs_here()) GTEST_SKIP() << "no AMX-BF16 (or no GCC AMX kernel) here";
  for (const char* kernel : kernels_here()) {
    SCOPED_TRACE(kernel);
    KernelScope scope(kernel);
    ThreadPool pool(2);
    MatmulScratch scratch;
    const PackedCase pc(GgmlType::BF16, 37, 2048, 70, 9, PackedLayout::kBf16Tiles, pool);
    ASSERT_NE(pc.p, nullptr);
    expect_batch_invariant(pc.view, pc.x, 70, {1, 3, 16, 17, 33}, 19, pool, scratch);
  }
}

TEST(KernelsBf16Tiles, ChosenWhereAKernelRuns) {
  if (!runs_here()) {
    // The exact kernels: the GGUF rows or, on AVX2, the float row groups.
    EXPECT_NE(choose_weight_layout(GgmlType::BF16).layout, WeightLayout::kBf16Tiles);
    GTEST_SKIP() << "neither AMX-BF16 nor AVX-512 BF16 here";
  }
  for (const char* kernel : kernels_here()) {
    SCOPED_TRACE(kernel);
    KernelScope scope(kernel);
    for (GgmlType t : {GgmlType::BF16, GgmlType::F16}) {
      const LayoutChoice c = choose_weight_layout(t);
      EXPECT_EQ(c.layout, WeightLayout::kBf16Tiles);
      EXPECT_EQ(c.reason,
                std::string(kernel) == "amx" ? "AMX-BF16 tiles" : "AVX-512 BF16 (vdpbf16ps)");
    }
    EXPECT_EQ(choose_weight_layout(GgmlType::F32).layout, WeightLayout::kGguf);
  }
  // Without either an exact kernel runs the view: the GGUF rows or the AVX2 float row groups.
  set_amx_allowed_for_test(false);
  set_bf16_allowed_for_test(false);
  EXPECT_FALSE(packed_layout_supported(GgmlType::BF16, PackedLayout::kBf16Tiles));
  EXPECT_NE(choose_weight_layout(GgmlType::BF16).layout, WeightLayout::kBf16Tiles);
  set_bf16_allowed_for_test(true);
  set_amx_allowed_for_test(true);
}

}  // namespace
}  // namespace hinge::kernels
