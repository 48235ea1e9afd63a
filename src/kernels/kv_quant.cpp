// SIMD paths of the KV-cache row kernels (dequantize, dot, axpy) for f32, f16, bf16 and int8:
// elements are promoted to f32 in registers and combined with f32 FMAs; and the f16 quantize
// (the KV write of the default dtype). Highway runtime dispatch; every target compiles the same
// portable code. fp8 and int4 (and the other quantizes) run the scalar reference in
// kv_quant_ref.cpp. Layouts and policies: kv_quant.h.
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "common/half.h"
#include "common/status.h"
#include "kernels/kv_quant.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/kv_quant.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "kernels/simd_util-inl.h"

HWY_BEFORE_NAMESPACE();
namespace hinge::kernels {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

template <class DF>
HWY_INLINE hn::Vec<DF> LoadKv(DF df, const float* p) {
  return hn::LoadU(df, p);
}
template <class DF>
HWY_INLINE hn::Vec<DF> LoadKv(DF df, const hwy::float16_t* p) {
  // Not hn::PromoteTo: Highway 1.0.3's emulated f16 -> f32 turns inf / NaN into finite numbers.
  const hn::Rebind<uint16_t, DF> du16;
  return F16BitsToF32(df, hn::LoadU(du16, reinterpret_cast<const uint16_t*>(p)));
}
template <class DF>
HWY_INLINE hn::Vec<DF> LoadKv(DF df, const hwy::bfloat16_t* p) {
  const hn::Rebind<hwy::bfloat16_t, DF> dh;
  return hn::PromoteTo(df, hn::LoadU(dh, p));
}
template <class DF>
HWY_INLINE hn::Vec<DF> LoadKv(DF df, const int8_t* p) {
  const hn::Rebind<int32_t, DF> di;
  const hn::Rebind<int8_t, DF> d8;
  return hn::ConvertTo(df, hn::PromoteTo(di, hn::LoadU(d8, p)));
}

HWY_INLINE float KvToF32(float v) { return v; }
HWY_INLINE float KvToF32(hwy::float16_t v) {
  uint16_t bits;
  __builtin_memcpy(&bits, &v, 2);
  return F16ToF32(bits);
}
HWY_INLINE float KvToF32(hwy::bfloat16_t v) {
  uint16_t bits;
  __builtin_memcpy(&bits, &v, 2);
  return bf16_to_f32(bits);
}
HWY_INLINE float KvToF32(int8_t v) { return static_cast<float>(v); }

// dst[i] = scale * row[i]; same single rounding as the reference, hence bit-exact.
template <typename T>
HWY_INLINE void DequantT(const T* HWY_RESTRICT row, float scale, float* HWY_RESTRICT dst, int n) {
  const hn::ScalableTag<float> df;
  const int N = static_cast<int>(hn::Lanes(df));
  const auto vs = hn::Set(df, scale);
  int i = 0;
  for (; i + N <= n; i += N) hn::StoreU(hn::Mul(vs, LoadKv(df, row + i)), df, dst + i);
  for (; i < n; ++i) dst[i] = scale * KvToF32(row[i]);
}

// sum q[i] * row[i] (unscaled).
template <typename T>
HWY_INLINE float DotT(const float* HWY_RESTRICT q, const T* HWY_RESTRICT row, int n) {
  const hn::ScalableTag<float> df;
  return Dot4Acc([&](int64_t i) { return LoadKv(df, row + i); },
                 [&](int64_t i) { return KvToF32(row[i]); }, q, n);
}

// out[i] += as * row[i].
template <typename T>
HWY_INLINE void AxpyT(float as, const T* HWY_RESTRICT row, float* HWY_RESTRICT out, int n) {
  const hn::ScalableTag<float> df;
  const int N = static_cast<int>(hn::Lanes(df));
  const auto va = hn::Set(df, as);
  int i = 0;
  for (; i + N <= n; i += N) {
    hn::StoreU(hn::MulAdd(va, LoadKv(df, row + i), hn::LoadU(df, out + i)), df, out + i);
  }
  for (; i < n; ++i) out[i] += as * KvToF32(row[i]);
}

// Calls fn(typed element pointer, scale) for the dtypes with a SIMD path.
template <class Fn>
HWY_INLINE void WithRow(KvDtype dtype, const void* row, Fn&& fn) {
  const auto* p = static_cast<const uint8_t*>(row);
  switch (dtype) {
    case KvDtype::kF32:
      fn(reinterpret_cast<const float*>(p), 1.0f);
      return;
    case KvDtype::kF16:
      fn(reinterpret_cast<const hwy::float16_t*>(p), 1.0f);
      return;
    case KvDtype::kBf16:
      fn(reinterpret_cast<const hwy::bfloat16_t*>(p), 1.0f);
      return;
    case KvDtype::kInt8: {
      uint16_t h;
      std::memcpy(&h, p, 2);
      fn(reinterpret_cast<const int8_t*>(p + 2), F16ToF32(h));
      return;
    }
    default:
      HINGE_CHECK_MSG(false, "no SIMD KV path for dtype {}", static_cast<int>(dtype));
  }
}

// f32 -> f16 bits, round to nearest even, NaN -> 0x7E00 with the sign: f32_to_f16's integer
// and f32 operations (common/half.h) lane for lane, hence bit-exact on every target (not
// hn::DemoteTo: F16C keeps NaN payloads, and Highway 1.0.3's emulation is not exact).
void KvQuantF16Simd(const float* HWY_RESTRICT src, uint16_t* HWY_RESTRICT dst, int n) {
  const hn::ScalableTag<float> df;
  const hn::RebindToUnsigned<decltype(df)> du;
  const hn::RebindToSigned<decltype(df)> di;
  const hn::Rebind<uint16_t, decltype(df)> d16;
  const int N = static_cast<int>(hn::Lanes(df));
  const auto to_inf = hn::Set(df, fp32_from_bits(0x77800000u));
  const auto to_zero = hn::Set(df, fp32_from_bits(0x08800000u));
  const auto sign_mask = hn::Set(du, 0x80000000u), exp_mask = hn::Set(du, 0xFF000000u);
  const auto min_bias = hn::Set(du, 0x71000000u), bias_add = hn::Set(du, 0x07800000u);
  const auto nan_f16 = hn::Set(du, 0x7E00u);
  int i = 0;
  for (; i + N <= n; i += N) {
    const auto f = hn::LoadU(df, src + i);
    auto base = hn::Mul(hn::Mul(hn::Abs(f), to_inf), to_zero);
    const auto w = hn::BitCast(du, f);
    const auto shl1 = hn::Add(w, w);
    const auto sign = hn::And(w, sign_mask);
    const auto bias = hn::Max(hn::And(shl1, exp_mask), min_bias);
    base = hn::Add(hn::BitCast(df, hn::Add(hn::ShiftRight<1>(bias), bias_add)), base);
    const auto bits = hn::BitCast(du, base);
    const auto nonsign = hn::Add(hn::And(hn::ShiftRight<13>(bits), hn::Set(du, 0x7C00u)),
                                 hn::And(bits, hn::Set(du, 0x0FFFu)));
    const auto h = hn::Or(hn::ShiftRight<16>(sign),
                          hn::IfThenElse(hn::Gt(shl1, exp_mask), nan_f16, nonsign));
    hn::StoreU(hn::DemoteTo(d16, hn::BitCast(di, h)), d16, dst + i);  // h <= 0xFFFF
  }
  for (; i < n; ++i) {
    const uint16_t h = f32_to_f16(src[i]);
    std::memcpy(dst + i, &h, sizeof h);
  }
}

void KvDequantSimd(KvDtype dtype, const void* src, float* dst, int n) {
  WithRow(dtype, src, [&](const auto* row, float scale) { DequantT(row, scale, dst, n); });
}

float KvDotSimd(KvDtype dtype, const float* q, const void* k_row, int n) {
  float result = 0.0f;
  WithRow(dtype, k_row, [&](const auto* row, float scale) { result = DotT(q, row, n) * scale; });
  return result;
}

void KvAxpySimd(KvDtype dtype, float a, const void* v_row, float* out, int n) {
  WithRow(dtype, v_row, [&](const auto* row, float scale) { AxpyT(a * scale, row, out, n); });
}

}  // namespace HWY_NAMESPACE
}  // namespace hinge::kernels
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace hinge::kernels {

HWY_EXPORT(KvQuantF16Simd);
HWY_EXPORT(KvDequantSimd);
HWY_EXPORT(KvDotSimd);
HWY_EXPORT(KvAxpySimd);

namespace {
bool has_simd_path(KvDtype dtype) {
  return dtype == KvDtype::kF32 || dtype == KvDtype::kF16 || dtype == KvDtype::kBf16 ||
         dtype == KvDtype::kInt8;
}
void check_head_dim(int head_dim) {
  HINGE_CHECK_MSG(head_dim > 0 && head_dim <= kKvMaxHeadDim, "head_dim {}", head_dim);
}
}  // namespace

void kv_quantize_row(KvDtype dtype, const float* src, void* dst, int head_dim,
                     float tensor_scale) {
  if (dtype != KvDtype::kF16) return kv_quantize_row_ref(dtype, src, dst, head_dim, tensor_scale);
  check_head_dim(head_dim);
  HWY_DYNAMIC_DISPATCH(KvQuantF16Simd)(src, static_cast<uint16_t*>(dst), head_dim);
}

void kv_dequantize_row(KvDtype dtype, const void* src, float* dst, int head_dim,
                       float tensor_scale) {
  if (!has_simd_path(dtype)) return kv_dequantize_row_ref(dtype, src, dst, head_dim, tensor_scale);
  check_head_dim(head_dim);
  HWY_DYNAMIC_DISPATCH(KvDequantSimd)(dtype, src, dst, head_dim);
}

float kv_dot_row(KvDtype dtype, const float* q, const void* k_row, int head_dim,
                 float tensor_scale) {
  if (!has_simd_path(dtype)) return kv_dot_row_ref(dtype, q, k_row, head_dim, tensor_scale);
  check_head_dim(head_dim);
  return HWY_DYNAMIC_DISPATCH(KvDotSimd)(dtype, q, k_row, head_dim);
}

void kv_axpy_row(KvDtype dtype, float a, const void* v_row, float* out, int head_dim,
                 float tensor_scale) {
  if (!has_simd_path(dtype)) return kv_axpy_row_ref(dtype, a, v_row, out, head_dim, tensor_scale);
  check_head_dim(head_dim);
  HWY_DYNAMIC_DISPATCH(KvAxpySimd)(dtype, a, v_row, out, head_dim);
}

}  // namespace hinge::kernels
#endif  // HWY_ONCE
