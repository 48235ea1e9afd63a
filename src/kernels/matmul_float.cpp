// matmul kernels for float weights (F32, F16, BF16): f32 FMA dot products, f16/bf16 promoted to
// f32 in registers. Highway runtime dispatch; every target uses the same portable code.
//
// Loop order: for each pair of weight rows, all tokens in tiles of 4 (2 rows x 4 tokens per
// register tile; two rows are a few KB, so they stay in L1 while the tiles reuse them: weights
// stream from memory once per call). Decode (1 token) runs 1 row x 1 token with 4 accumulators.
#include <cstddef>
#include <cstdint>

#include "common/half.h"
#include "kernels/matmul_kernels.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/matmul_float.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "kernels/simd_util-inl.h"

HWY_BEFORE_NAMESPACE();
namespace hinge::kernels {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Weight element types as stored; loads promote to f32.
template <class DF>
HWY_INLINE hn::Vec<DF> LoadWeights(DF df, const float* p) {
  return hn::LoadU(df, p);
}
template <class DF>
HWY_INLINE hn::Vec<DF> LoadWeights(DF df, const hwy::float16_t* p) {
  const hn::Rebind<hwy::float16_t, DF> dh;
  return hn::PromoteTo(df, hn::LoadU(dh, p));
}
template <class DF>
HWY_INLINE hn::Vec<DF> LoadWeights(DF df, const hwy::bfloat16_t* p) {
  const hn::Rebind<hwy::bfloat16_t, DF> dh;
  return hn::PromoteTo(df, hn::LoadU(dh, p));
}

HWY_INLINE float WeightToF32(float v) {
  return v;
}
HWY_INLINE float WeightToF32(hwy::float16_t v) {
  uint16_t bits;
  __builtin_memcpy(&bits, &v, 2);
  return F16ToF32(bits);
}
HWY_INLINE float WeightToF32(hwy::bfloat16_t v) {
  uint16_t bits;
  __builtin_memcpy(&bits, &v, 2);
  return bf16_to_f32(bits);
}

// One weight row with one token.
template <typename WT>
HWY_INLINE float Dot1(const WT* HWY_RESTRICT w, const float* HWY_RESTRICT x, int64_t n) {
  const hn::ScalableTag<float> df;
  return Dot4Acc([&](int64_t i) { return LoadWeights(df, w + i); },
                 [&](int64_t i) { return WeightToF32(w[i]); }, x, n);
}

// One weight row with 4 tokens: each weight vector is loaded (and converted) once for 4 FMAs.
template <typename WT>
HWY_INLINE void Dot4(const WT* HWY_RESTRICT w, const float* x0, const float* x1, const float* x2,
                     const float* x3, int64_t n, float out[4]) {
  const hn::ScalableTag<float> df;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  auto a0 = hn::Zero(df), a1 = hn::Zero(df), a2 = hn::Zero(df), a3 = hn::Zero(df);
  auto b0 = hn::Zero(df), b1 = hn::Zero(df), b2 = hn::Zero(df), b3 = hn::Zero(df);
  int64_t i = 0;
  for (; i + 2 * N <= n; i += 2 * N) {
    const auto w0 = LoadWeights(df, w + i);
    const auto w1 = LoadWeights(df, w + i + N);
    a0 = hn::MulAdd(w0, hn::LoadU(df, x0 + i), a0);
    a1 = hn::MulAdd(w0, hn::LoadU(df, x1 + i), a1);
    a2 = hn::MulAdd(w0, hn::LoadU(df, x2 + i), a2);
    a3 = hn::MulAdd(w0, hn::LoadU(df, x3 + i), a3);
    b0 = hn::MulAdd(w1, hn::LoadU(df, x0 + i + N), b0);
    b1 = hn::MulAdd(w1, hn::LoadU(df, x1 + i + N), b1);
    b2 = hn::MulAdd(w1, hn::LoadU(df, x2 + i + N), b2);
    b3 = hn::MulAdd(w1, hn::LoadU(df, x3 + i + N), b3);
  }
  for (; i + N <= n; i += N) {
    const auto w0 = LoadWeights(df, w + i);
    a0 = hn::MulAdd(w0, hn::LoadU(df, x0 + i), a0);
    a1 = hn::MulAdd(w0, hn::LoadU(df, x1 + i), a1);
    a2 = hn::MulAdd(w0, hn::LoadU(df, x2 + i), a2);
    a3 = hn::MulAdd(w0, hn::LoadU(df, x3 + i), a3);
  }
  out[0] = hn::GetLane(hn::SumOfLanes(df, hn::Add(a0, b0)));
  out[1] = hn::GetLane(hn::SumOfLanes(df, hn::Add(a1, b1)));
  out[2] = hn::GetLane(hn::SumOfLanes(df, hn::Add(a2, b2)));
  out[3] = hn::GetLane(hn::SumOfLanes(df, hn::Add(a3, b3)));
  for (; i < n; ++i) {
    const float wv = WeightToF32(w[i]);
    out[0] += wv * x0[i];
    out[1] += wv * x1[i];
    out[2] += wv * x2[i];
    out[3] += wv * x3[i];
  }
}

// Two weight rows with 4 tokens: each activation load feeds 2 FMAs and each weight load 4, which
// halves the activation traffic from L2 (the bottleneck of a 1-row tile in prefill).
template <typename WT>
HWY_INLINE void Dot2x4(const WT* HWY_RESTRICT w0, const WT* HWY_RESTRICT w1, const float* x0,
                       const float* x1, const float* x2, const float* x3, int64_t n, float out[8]) {
  const hn::ScalableTag<float> df;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  auto a0 = hn::Zero(df), a1 = hn::Zero(df), a2 = hn::Zero(df), a3 = hn::Zero(df);
  auto b0 = hn::Zero(df), b1 = hn::Zero(df), b2 = hn::Zero(df), b3 = hn::Zero(df);
  int64_t i = 0;
  for (; i + N <= n; i += N) {
    const auto u = LoadWeights(df, w0 + i);
    const auto v = LoadWeights(df, w1 + i);
    auto x = hn::LoadU(df, x0 + i);
    a0 = hn::MulAdd(u, x, a0);
    b0 = hn::MulAdd(v, x, b0);
    x = hn::LoadU(df, x1 + i);
    a1 = hn::MulAdd(u, x, a1);
    b1 = hn::MulAdd(v, x, b1);
    x = hn::LoadU(df, x2 + i);
    a2 = hn::MulAdd(u, x, a2);
    b2 = hn::MulAdd(v, x, b2);
    x = hn::LoadU(df, x3 + i);
    a3 = hn::MulAdd(u, x, a3);
    b3 = hn::MulAdd(v, x, b3);
  }
  out[0] = hn::GetLane(hn::SumOfLanes(df, a0));
  out[1] = hn::GetLane(hn::SumOfLanes(df, a1));
  out[2] = hn::GetLane(hn::SumOfLanes(df, a2));
  out[3] = hn::GetLane(hn::SumOfLanes(df, a3));
  out[4] = hn::GetLane(hn::SumOfLanes(df, b0));
  out[5] = hn::GetLane(hn::SumOfLanes(df, b1));
  out[6] = hn::GetLane(hn::SumOfLanes(df, b2));
  out[7] = hn::GetLane(hn::SumOfLanes(df, b3));
  for (; i < n; ++i) {
    const float u = WeightToF32(w0[i]), v = WeightToF32(w1[i]);
    out[0] += u * x0[i];
    out[1] += u * x1[i];
    out[2] += u * x2[i];
    out[3] += u * x3[i];
    out[4] += v * x0[i];
    out[5] += v * x1[i];
    out[6] += v * x2[i];
    out[7] += v * x3[i];
  }
}

// Row r against tokens [t, num_tokens), 4 at a time.
template <typename WT>
HWY_INLINE void OneRow(const MatmulArgs& a, const WT* w, int64_t r, int64_t t) {
  const auto* x = static_cast<const float*>(a.x);
  const int64_t n = a.cols, nt = a.num_tokens;
  for (; t + 4 <= nt; t += 4) {
    float out[4];
    Dot4(w, x + t * n, x + (t + 1) * n, x + (t + 2) * n, x + (t + 3) * n, n, out);
    for (int k = 0; k < 4; ++k) a.y[(t + k) * a.y_stride + r] = out[k];
  }
  if (nt - t >= 2) {
    // 2 or 3 tokens left: one 4-wide pass with the last token repeated (results discarded).
    const float* xl = x + (nt - 1) * n;
    float out[4];
    Dot4(w, x + t * n, x + (t + 1) * n, t + 2 < nt ? x + (t + 2) * n : xl, xl, n, out);
    for (int64_t k = 0; t + k < nt; ++k) a.y[(t + k) * a.y_stride + r] = out[k];
  } else if (t < nt) {
    a.y[t * a.y_stride + r] = Dot1(w, x + t * n, n);
  }
}

template <typename WT>
HWY_INLINE void MatmulRowsFloat(const MatmulArgs& a, int64_t row_begin, int64_t row_end) {
  const auto* x = static_cast<const float*>(a.x);
  const int64_t n = a.cols, nt = a.num_tokens;
  auto row = [&](int64_t r) {
    return reinterpret_cast<const WT*>(a.w + static_cast<size_t>(r) * a.w_row_bytes);
  };
  int64_t r = row_begin;
  if (nt >= 4) {
    for (; r + 2 <= row_end; r += 2) {
      int64_t t = 0;
      for (; t + 4 <= nt; t += 4) {
        float out[8];
        Dot2x4(row(r), row(r + 1), x + t * n, x + (t + 1) * n, x + (t + 2) * n, x + (t + 3) * n, n,
               out);
        for (int k = 0; k < 4; ++k) {
          a.y[(t + k) * a.y_stride + r] = out[k];
          a.y[(t + k) * a.y_stride + r + 1] = out[4 + k];
        }
      }
      OneRow(a, row(r), r, t);
      OneRow(a, row(r + 1), r + 1, t);
    }
  }
  for (; r < row_end; ++r) OneRow(a, row(r), r, 0);
}

void MatmulRowsF32(const MatmulArgs& a, int64_t b, int64_t e) {
  MatmulRowsFloat<float>(a, b, e);
}
void MatmulRowsF16(const MatmulArgs& a, int64_t b, int64_t e) {
  MatmulRowsFloat<hwy::float16_t>(a, b, e);
}
void MatmulRowsBF16(const MatmulArgs& a, int64_t b, int64_t e) {
  MatmulRowsFloat<hwy::bfloat16_t>(a, b, e);
}

}  // namespace HWY_NAMESPACE
}  // namespace hinge::kernels
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace hinge::kernels {

HWY_EXPORT(MatmulRowsF32);
HWY_EXPORT(MatmulRowsF16);
HWY_EXPORT(MatmulRowsBF16);

void matmul_rows_f32(const MatmulArgs& a, int64_t b, int64_t e) {
  HWY_DYNAMIC_DISPATCH(MatmulRowsF32)(a, b, e);
}
void matmul_rows_f16(const MatmulArgs& a, int64_t b, int64_t e) {
  HWY_DYNAMIC_DISPATCH(MatmulRowsF16)(a, b, e);
}
void matmul_rows_bf16(const MatmulArgs& a, int64_t b, int64_t e) {
  HWY_DYNAMIC_DISPATCH(MatmulRowsBF16)(a, b, e);
}

}  // namespace hinge::kernels
#endif  // HWY_ONCE
