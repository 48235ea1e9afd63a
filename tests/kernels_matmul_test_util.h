// Shared by the matmul parity tests (kernels_matmul_test.cpp, kernels_matmul_packed_test.cpp):
// random GGUF weights of any type, activations, the error bounds, check_matmul against both
// references, and the packed layouts that run on this CPU.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <random>
#include <type_traits>
#include <vector>

#include "common/ggml_type.h"
#include "common/thread_pool.h"
#include "kernels/matmul.h"
#include "kernels/matmul_kernels.h"
#include "kernels/matmul_packed.h"
#include "kernels/quant.h"
#include "kernels/quant_block.h"

namespace hinge::kernels {

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

inline Weights make_weights(GgmlType type, int64_t rows, int64_t cols, uint32_t seed) {
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

inline std::vector<float> make_activations(int64_t num_tokens, int64_t cols, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(num_tokens * cols));
  for (auto& v : x) v = dist(rng);
  return x;
}

// sum_c |w[r, c] * x[t, c]|: the scale of an output's rounding error.
// Integers in [-127, 127] with a 127 in every 32-block: their on-the-fly Q8_0 quantization is
// exact (scale 1), so results compare with the f32-activation reference at a tight bound.
inline std::vector<float> exact_q8_activations(int64_t n, int mul) {
  std::vector<float> x(static_cast<size_t>(n));
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(int(i * mul % 255) - 127);
  for (int64_t b = 0; b < n; b += 32) x[static_cast<size_t>(b)] = 127.0f;
  return x;
}

inline double abs_dot(const Weights& w, const float* x, int64_t r) {
  double s = 0.0;
  for (int64_t c = 0; c < w.cols; ++c) s += std::fabs(double(w.dequant[r * w.cols + c]) * x[c]);
  return s;
}

// Largest error the activation quantization can add to output r: sum_c |w[r, c]| * e_c, with
// e_c the worst rounding error of x_c in its block (half a step of amax/127; Q8_0 also stores
// its scale as f16, which moves each level by up to 127 * 2^-11 of a step).
inline double activation_error_bound(const Weights& w, GgmlType act, const float* x, int64_t r) {
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
inline void check_matmul(const Case& c, int64_t rows, int64_t num_tokens, int threads, uint32_t seed,
                  bool packed = false, PackedLayout layout = PackedLayout::kVnniPairs) {
  SCOPED_TRACE(::testing::Message() << ggml_type_name(c.type) << " rows=" << rows << " cols="
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

// Packs view's weights in `layout` and points view.packed at the copy (null, and view unchanged
// in effect, where the layout does not run here).
inline std::unique_ptr<PackedMatrix> attach_packed(MatrixView& view, PackedLayout layout,
                                                   ThreadPool& pool) {
  auto p = pack_matrix(view, pool, layout);
  view.packed = p.get();
  return p;
}

// A random case of `tokens` x [rows, cols] packed in `layout` (p null where it does not run
// here): the weights, the activations and the view that carries the copy. Built in place.
struct PackedCase {
  Weights w;
  std::vector<float> x;
  MatrixView view;
  std::unique_ptr<PackedMatrix> p;
  PackedCase(GgmlType type, int64_t rows, int64_t cols, int64_t tokens, uint32_t seed,
             PackedLayout layout, ThreadPool& pool)
      : w(make_weights(type, rows, cols, seed)),
        x(make_activations(tokens, cols, seed + 1)),
        view(w.view()),
        p(attach_packed(view, layout, pool)) {}
  PackedCase(const PackedCase&) = delete;
  PackedCase& operator=(const PackedCase&) = delete;
};

// view times the first `tokens` rows of x: [tokens, view.rows].
inline std::vector<float> product(const MatrixView& view, const std::vector<float>& x,
                                  int64_t tokens, ThreadPool& pool, MatmulScratch& scratch) {
  std::vector<float> y(static_cast<size_t>(view.rows * tokens));
  matmul(view, x.data(), tokens, y.data(), pool, scratch);
  return y;
}

// The layouts of the AVX-512 VNNI / AMX kernels (the AVX2 row groups have tests of their own).
inline std::vector<PackedLayout> runnable_layouts() {
  std::vector<PackedLayout> out;
  for (PackedLayout l : {PackedLayout::kVnniPairs, PackedLayout::kAmxTiles}) {
    const bool runs = l == PackedLayout::kAmxTiles ? amx_kernel_usable()
                                                   : packed_layout_supported(GgmlType::Q8_0, l);
    if (runs) out.push_back(l);
  }
  return out;
}

inline const char* layout_name(PackedLayout l) {
  return l == PackedLayout::kAmxTiles ? "amx-tiles" : "vnni-pairs";
}

// Each token's result of `view` is bit-identical whether its x row (x: [tokens, view.cols]) is
// multiplied in one call of all tokens or in calls of n tokens (each n of `ns`, windows starting
// every `step` tokens).
inline void expect_batch_invariant(const MatrixView& view, const std::vector<float>& x,
                                   int64_t tokens, std::initializer_list<int64_t> ns,
                                   int64_t step, ThreadPool& pool, MatmulScratch& scratch) {
  const int64_t rows = view.rows, cols = view.cols;
  std::vector<float> y(static_cast<size_t>(rows * tokens));
  matmul(view, x.data(), tokens, y.data(), pool, scratch);
  for (int64_t n : ns) {
    std::vector<float> part(static_cast<size_t>(rows * n));
    for (int64_t t0 = 0; t0 + n <= tokens; t0 += step) {
      matmul(view, x.data() + t0 * cols, n, part.data(), pool, scratch);
      for (int64_t tt = 0; tt < n; ++tt)
        for (int64_t r = 0; r < rows; ++r)
          ASSERT_EQ(part[static_cast<size_t>(tt * rows + r)],
                    y[static_cast<size_t>((t0 + tt) * rows + r)])
              << "n=" << n << " t=" << t0 + tt << " r=" << r;
    }
  }
}

// A packed Q4_K / Q5_K matrix (row groups) holds every value (Q5_K: the fifth bit too),
// sub-block scale and min, d and dmin of its GGUF blocks; padding rows read back as zeros.
template <typename WB>
inline void expect_k_mins_layout_reads_back(GgmlType type, uint32_t seed) {
  constexpr bool q5 = std::is_same_v<WB, BlockQ5_K>;
  ThreadPool pool(2);
  const int64_t rows = 19, cols = 512;
  const Weights w = make_weights(type, rows, cols, seed);
  const auto p = pack_matrix(w.view(), pool, PackedLayout::kAmxTiles);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->nb, 2);
  EXPECT_EQ(p->rows_padded, 32);
  EXPECT_EQ(p->qs_row_bytes, 2 * packed_super_bytes(type));
  EXPECT_EQ(pack_matrix(w.view(), pool, PackedLayout::kVnniPairs), nullptr);
  const size_t rb = w.view().row_bytes;
  for (int64_t r = 0; r < p->rows_padded; ++r) {
    for (int64_t sb = 0; sb < 2; ++sb) {
      WB blk{};
      if (r < rows) std::memcpy(&blk, w.bytes.data() + r * rb + sb * sizeof blk, sizeof blk);
      const PackedQ4KMeta meta = packed_q4k_meta(*p, r, sb);
      EXPECT_EQ(meta.d, blk.d) << "r=" << r;
      EXPECT_EQ(meta.dmin, blk.dmin) << "r=" << r;
      for (int j = 0; j < 8; ++j) {
        uint8_t sc = 0, m = 0;
        scale_min_k4(j, blk.scales, &sc, &m);
        EXPECT_EQ(meta.sc[j], sc) << "r=" << r << " j=" << j;
        EXPECT_EQ(meta.m[j], m) << "r=" << r << " j=" << j;
        for (int e = 0; e < 32; ++e) {
          int want = (blk.qs[(j / 2) * 32 + e] >> (4 * (j % 2))) & 0x0F;
          if constexpr (q5) want |= ((blk.qh[e] >> j) & 1) << 4;
          ASSERT_EQ(packed_quant(*p, r, sb * 256 + j * 32 + e), want)
              << "r=" << r << " sb=" << sb << " j=" << j << " e=" << e;
        }
      }
    }
  }
}

}  // namespace hinge::kernels
