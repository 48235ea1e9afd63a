// Per-target dequantization of one stored KV row (f32, f16, bf16, fp8, int8, int4) into f32,
// for the paged attention kernel (paged_attention.cpp): bit-identical to kv_dequantize_row_ref
// on every target (tested). Included once per Highway target through foreach_target.h, hence
// the toggling include guard instead of #pragma once.
#if defined(HINGE_KERNELS_KV_ROW_DEQUANT_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef HINGE_KERNELS_KV_ROW_DEQUANT_INL_H_
#undef HINGE_KERNELS_KV_ROW_DEQUANT_INL_H_
#else
#define HINGE_KERNELS_KV_ROW_DEQUANT_INL_H_
#endif

#include <hwy/highway.h>

#include <cstdint>
#include <cstring>

#include "common/half.h"
#include "kernels/kv_quant.h"

HWY_BEFORE_NAMESPACE();
namespace hinge::kernels {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using DF = hn::ScalableTag<float>;

template <class D>
HWY_INLINE hn::Vec<D> LoadKv(D df, const hwy::float16_t* p) {
  const hn::Rebind<uint16_t, D> du16;
  return F16BitsToF32(df, hn::LoadU(du16, reinterpret_cast<const uint16_t*>(p)));
}
template <class D>
HWY_INLINE hn::Vec<D> LoadKv(D df, const hwy::bfloat16_t* p) {
  return hn::PromoteTo(df, hn::LoadU(hn::Rebind<hwy::bfloat16_t, D>(), p));
}
template <class D>
HWY_INLINE hn::Vec<D> LoadKv(D df, const int8_t* p) {
  const hn::Rebind<int32_t, D> di;
  return hn::ConvertTo(df, hn::PromoteTo(di, hn::LoadU(hn::Rebind<int8_t, D>(), p)));
}

// One element (possibly unaligned) to f32.
HWY_INLINE float ElemToF32(const hwy::float16_t* p) {
  uint16_t b;
  std::memcpy(&b, p, 2);
  return F16ToF32(b);
}
HWY_INLINE float ElemToF32(const hwy::bfloat16_t* p) {
  uint16_t b;
  std::memcpy(&b, p, 2);
  return bf16_to_f32(b);
}
HWY_INLINE float ElemToF32(const int8_t* p) {
  return static_cast<float>(*p);
}

// dst[i] = scale * row[i]: one rounding, as kv_dequantize_row_ref, hence bit-identical to it.
template <typename T>
HWY_INLINE void ConvertRow(const T* HWY_RESTRICT row, float scale, float* HWY_RESTRICT dst,
                           size_t n) {
  const DF df;
  const size_t N = hn::Lanes(df);
  const auto vs = hn::Set(df, scale);
  size_t i = 0;
  for (; i + N <= n; i += N) hn::StoreU(hn::Mul(vs, LoadKv(df, row + i)), df, dst + i);
  for (; i < n; ++i) dst[i] = scale * ElemToF32(row + i);
}

HWY_INLINE float RowScale(const uint8_t* row) {
  uint16_t h;
  std::memcpy(&h, row, 2);
  return F16ToF32(h);
}

// fp8 bytes -> f32 through f16 (exact): e5m2 is the high byte of an f16; e4m3 is an f16 with
// the exponent bias 15 - 7 = 8 lower (value = f16(sign << 8 | magnitude << 7) * 256), and its
// magnitude 0x7F is NaN. Then one rounding by the tensor scale, as the reference's table[b] * s.
template <bool kE4m3>
HWY_INLINE void Fp8Row(const uint8_t* HWY_RESTRICT row, float scale, float* HWY_RESTRICT dst,
                       size_t n, const float* HWY_RESTRICT table) {
  const DF df;
  const hn::Rebind<uint8_t, DF> d8;
  const hn::Rebind<uint16_t, DF> d16;
  const size_t N = hn::Lanes(df);
  const auto vs = hn::Set(df, scale);
  size_t i = 0;
  for (; i + N <= n; i += N) {
    const auto b = hn::PromoteTo(d16, hn::LoadU(d8, row + i));
    if constexpr (kE4m3) {
      const auto mag = hn::And(b, hn::Set(d16, 0x7F));
      const auto bits =
          hn::Or(hn::ShiftLeft<8>(hn::And(b, hn::Set(d16, 0x80))), hn::ShiftLeft<7>(mag));
      auto v = hn::Mul(F16BitsToF32(df, bits), hn::Set(df, 256.0f));
      // Magnitude 0x7F (the NaN code) maps to 480, beyond the largest finite 448.
      v = hn::IfThenElse(hn::Eq(hn::Abs(v), hn::Set(df, 480.0f)), hn::Set(df, NAN), v);
      hn::StoreU(hn::Mul(v, vs), df, dst + i);
    } else {
      const auto v = F16BitsToF32(df, hn::ShiftLeft<8>(b));
      hn::StoreU(hn::Mul(v, vs), df, dst + i);
    }
  }
  for (; i < n; ++i) dst[i] = table[row[i]];
}

// int4 row: nibbles -> int8 (scalar, vectorized by the compiler), then the int8 path.
HWY_INLINE void Int4Row(const uint8_t* HWY_RESTRICT packed, float d, float* HWY_RESTRICT dst,
                        size_t n) {
  alignas(64) int8_t q[kKvMaxHeadDim + 2];
  const size_t bytes = (n + 1) / 2;
  for (size_t j = 0; j < bytes; ++j) {
    q[2 * j] = static_cast<int8_t>((packed[j] & 0x0f) - 8);
    q[2 * j + 1] = static_cast<int8_t>((packed[j] >> 4) - 8);
  }
  ConvertRow(q, d, dst, n);
}

// One stored row -> dst[0, n) f32, zeros in [n, hdp). Bit-identical to kv_dequantize_row_ref.
HWY_INLINE void DequantRow(KvDtype dtype, const uint8_t* row, const float* fp8_table,
                           float fp8_scale, float* HWY_RESTRICT dst, size_t n, size_t hdp) {
  switch (dtype) {
    case KvDtype::kF32: {
      const DF df;
      const size_t N = hn::Lanes(df);
      const auto* src = reinterpret_cast<const float*>(row);
      size_t i = 0;
      for (; i + N <= n; i += N) hn::StoreU(hn::LoadU(df, src + i), df, dst + i);
      if (i < n) std::memcpy(dst + i, src + i, (n - i) * sizeof(float));
      break;
    }
    case KvDtype::kF16:
      ConvertRow(reinterpret_cast<const hwy::float16_t*>(row), 1.0f, dst, n);
      break;
    case KvDtype::kBf16:
      ConvertRow(reinterpret_cast<const hwy::bfloat16_t*>(row), 1.0f, dst, n);
      break;
    case KvDtype::kFp8E4m3:
      Fp8Row<true>(row, fp8_scale, dst, n, fp8_table);
      break;
    case KvDtype::kFp8E5m2:
      Fp8Row<false>(row, fp8_scale, dst, n, fp8_table);
      break;
    case KvDtype::kInt8:
      ConvertRow(reinterpret_cast<const int8_t*>(row + 2), RowScale(row), dst, n);
      break;
    case KvDtype::kInt4:
      Int4Row(row + 2, RowScale(row), dst, n);
      break;
  }
  for (size_t i = n; i < hdp; ++i) dst[i] = 0.0f;
}

// Up to kMaxRows K or V rows read in place (paged attention's decode units): f16, bf16 or int8
// rows of the arena, for loops that convert them in registers (int8 times its row scale) to
// exactly the values DequantRow would write, without its store and reload.
template <size_t kMaxRows>
struct KvRowsInPlace {
  KvDtype dtype = KvDtype::kF32;  // kF16, kBf16 or kInt8
  const hwy::float16_t* h[kMaxRows];
  const hwy::bfloat16_t* b[kMaxRows];
  const int8_t* q[kMaxRows];
  float sc[kMaxRows];

  static bool Reads(KvDtype t) {
    return t == KvDtype::kF16 || t == KvDtype::kBf16 || t == KvDtype::kInt8;
  }
  // Rows [0, n) at (tokens[t] + head_off), stored as t's first row onwards.
  void Point(const uint8_t* const* tokens, int64_t head_off, size_t n, size_t first) {
    for (size_t t = 0; t < n; ++t) {
      const uint8_t* row = tokens[t] + head_off;
      if (dtype == KvDtype::kF16) {
        h[first + t] = reinterpret_cast<const hwy::float16_t*>(row);
      } else if (dtype == KvDtype::kBf16) {
        b[first + t] = reinterpret_cast<const hwy::bfloat16_t*>(row);
      } else {
        sc[first + t] = RowScale(row);
        q[first + t] = reinterpret_cast<const int8_t*>(row + 2);
      }
    }
  }
  // f(rows from `from`, their scales or null) with the rows' element type.
  template <class F>
  void With(size_t from, F&& f) const {
    if (dtype == KvDtype::kF16)
      f(h + from, static_cast<const float*>(nullptr));
    else if (dtype == KvDtype::kBf16)
      f(b + from, static_cast<const float*>(nullptr));
    else
      f(q + from, sc + from);
  }
};

}  // namespace HWY_NAMESPACE
}  // namespace hinge::kernels
HWY_AFTER_NAMESPACE();

#endif  // include guard
