// SIMD (runtime-dispatched) dequantize_row and the activation quantizer used by matmul.
//
// Dequantization is bit-exact with the scalar references: every value is one int->f32 conversion
// and one multiply by the block scale, as ggml does (no FMA). F16 uses F16C where the target has
// it (exact, like the bit-twiddling scalar conversion). The k-quant formats delegate to the
// scalar reference: they are only dequantized for rare whole-row reads (matmul never does).
//
// The activation quantizers (Q8_0, Q8_K) are byte-identical to quantize_row_ref: same f32
// operations in the same order, roundf emulated exactly (ties away from zero) for Q8_0 and
// round-to-nearest-even (ggml's nearest_int) for Q8_K.
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/matmul_kernels.h"
#include "kernels/quant.h"
#include "kernels/quant_block.h"
#include "kernels/quant_ref.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/quant_simd.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "kernels/simd_util-inl.h"

HWY_BEFORE_NAMESPACE();
namespace hinge::kernels {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

template <typename HalfT>
HWY_INLINE void PromoteHalfRow(const uint16_t* HWY_RESTRICT src, float* HWY_RESTRICT dst, int64_t n,
                               float (*scalar)(uint16_t)) {
  const hn::ScalableTag<float> df;
  const hn::Rebind<HalfT, decltype(df)> dh;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  const auto* s = reinterpret_cast<const HalfT*>(src);
  int64_t i = 0;
  for (; i + N <= n; i += N) hn::StoreU(hn::PromoteTo(df, hn::LoadU(dh, s + i)), df, dst + i);
  for (; i < n; ++i) dst[i] = scalar(src[i]);
}

HWY_INLINE float F16Scalar(uint16_t h) {
  return f16_to_f32(h);
}
HWY_INLINE float BF16Scalar(uint16_t h) {
  return bf16_to_f32(h);
}

void DequantizeF16(const void* src, float* dst, int64_t n) {
  PromoteHalfRow<hwy::float16_t>(static_cast<const uint16_t*>(src), dst, n, &F16Scalar);
}
void DequantizeBF16(const void* src, float* dst, int64_t n) {
  PromoteHalfRow<hwy::bfloat16_t>(static_cast<const uint16_t*>(src), dst, n, &BF16Scalar);
}

void DequantizeQ8_0(const void* src, float* dst, int64_t n) {
  const hn::CappedTag<float, kQK8_0> df;  // lane count divides 32
  const hn::RebindToSigned<decltype(df)> di;
  const hn::Rebind<int8_t, decltype(df)> d8;
  const int N = static_cast<int>(hn::Lanes(df));
  const auto* blocks = static_cast<const BlockQ8_0*>(src);
  for (int64_t b = 0; b < n / kQK8_0; ++b, dst += kQK8_0) {
    const auto d = hn::Set(df, F16ToF32(blocks[b].d));
    for (int j = 0; j < kQK8_0; j += N) {
      const auto q = hn::ConvertTo(df, hn::PromoteTo(di, hn::LoadU(d8, blocks[b].qs + j)));
      hn::StoreU(hn::Mul(q, d), df, dst + j);
    }
  }
}

void DequantizeQ4_0(const void* src, float* dst, int64_t n) {
  const hn::CappedTag<float, kQK4_0 / 2> df;  // lane count divides 16
  const hn::RebindToSigned<decltype(df)> di;
  const hn::RebindToUnsigned<decltype(df)> du;
  const hn::Rebind<uint8_t, decltype(df)> du8;
  const int N = static_cast<int>(hn::Lanes(df));
  const auto mask = hn::Set(du, 0x0F);
  const auto eight = hn::Set(di, 8);
  const auto* blocks = static_cast<const BlockQ4_0*>(src);
  for (int64_t b = 0; b < n / kQK4_0; ++b, dst += kQK4_0) {
    const auto d = hn::Set(df, F16ToF32(blocks[b].d));
    for (int j = 0; j < kQK4_0 / 2; j += N) {
      const auto bytes = hn::PromoteTo(du, hn::LoadU(du8, blocks[b].qs + j));
      const auto lo = hn::Sub(hn::BitCast(di, hn::And(bytes, mask)), eight);
      const auto hi = hn::Sub(hn::BitCast(di, hn::ShiftRight<4>(bytes)), eight);
      hn::StoreU(hn::Mul(hn::ConvertTo(df, lo), d), df, dst + j);
      hn::StoreU(hn::Mul(hn::ConvertTo(df, hi), d), df, dst + j + kQK4_0 / 2);
    }
  }
}

#if HWY_TARGET == HWY_SCALAR

void QuantizeQ8_0(const float* x, void* dst, int64_t n, float* scales, int32_t* sums) {
  auto* blocks = static_cast<BlockQ8_0*>(dst);
  quantize_row_q8_0_ref(x, blocks, n);
  for (int64_t b = 0; scales && b < n / kQK8_0; ++b) {
    int32_t sum = 0;
    for (int j = 0; j < kQK8_0; ++j) sum += blocks[b].qs[j];
    scales[b] = f16_to_f32(blocks[b].d);
    sums[b] = sum;
  }
}
void QuantizeQ8_K(const float* x, void* dst, int64_t n) {
  quantize_row_q8_k_ref(x, static_cast<BlockQ8_K*>(dst), n);
}

#else

void QuantizeQ8_0(const float* HWY_RESTRICT x, void* dst, int64_t n, float* scales, int32_t* sums) {
  const hn::CappedTag<float, kQK8_0> df;  // lane count divides 32
  const hn::RebindToSigned<decltype(df)> di;
  const hn::Rebind<int8_t, decltype(df)> d8;
  const int N = static_cast<int>(hn::Lanes(df));
  const auto half = hn::Set(df, 0.5f);
  const auto one = hn::Set(df, 1.0f);
  auto* blocks = static_cast<BlockQ8_0*>(dst);
  for (int64_t b = 0; b < n / kQK8_0; ++b, x += kQK8_0) {
    auto vmax = hn::Zero(df);
    for (int j = 0; j < kQK8_0; j += N) vmax = hn::Max(vmax, hn::Abs(hn::LoadU(df, x + j)));
    const float amax = hn::GetLane(hn::MaxOfLanes(df, vmax));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    blocks[b].d = f32_to_f16(d);
    const auto vid = hn::Set(df, id);
    auto vsum = hn::Zero(di);
    for (int j = 0; j < kQK8_0; j += N) {
      // roundf: truncate, then step away from zero when the (exact) fraction is >= 0.5.
      const auto v = hn::Mul(hn::LoadU(df, x + j), vid);
      const auto t = hn::Trunc(v);
      const auto r =
          hn::IfThenElse(hn::Abs(hn::Sub(v, t)) >= half, hn::Add(t, hn::CopySign(one, v)), t);
      const auto q = hn::ConvertTo(di, r);
      vsum = hn::Add(vsum, q);
      hn::StoreU(hn::DemoteTo(d8, q), d8, blocks[b].qs + j);
    }
    if (scales) {
      scales[b] = f16_to_f32(blocks[b].d);
      sums[b] = hn::GetLane(hn::SumOfLanes(di, vsum));
    }
  }
}

void QuantizeQ8_K(const float* HWY_RESTRICT x, void* dst, int64_t n) {
  const hn::CappedTag<float, 16> df;  // lane count divides 16 (one bsums group)
  const hn::RebindToSigned<decltype(df)> di;
  const hn::Rebind<int8_t, decltype(df)> d8;
  const int N = static_cast<int>(hn::Lanes(df));
  auto* blocks = static_cast<BlockQ8_K*>(dst);
  for (int64_t b = 0; b < n / kQK_K; ++b, x += kQK_K) {
    BlockQ8_K& blk = blocks[b];
    auto vmax = hn::Zero(df);
    for (int j = 0; j < kQK_K; j += N) vmax = hn::Max(vmax, hn::Abs(hn::LoadU(df, x + j)));
    const float amax = hn::GetLane(hn::MaxOfLanes(df, vmax));
    if (amax == 0.0f) {
      std::memset(&blk, 0, sizeof blk);
      continue;
    }
    // The signed value of the first element with the largest magnitude (as the scalar loop).
    float max = 0.0f;
    const auto vamax = hn::Set(df, amax);
    for (int j = 0; j < kQK_K; j += N) {
      const intptr_t i = hn::FindFirstTrue(df, hn::Abs(hn::LoadU(df, x + j)) == vamax);
      if (i >= 0) {
        max = x[j + i];
        break;
      }
    }
    const float iscale = -127.f / max;
    const auto vis = hn::Set(df, iscale);
    const auto k127 = hn::Set(di, 127);
    for (int g = 0; g < kQK_K / 16; ++g) {
      auto vsum = hn::Zero(di);
      for (int j = 16 * g; j < 16 * g + 16; j += N) {
        const auto q = hn::Min(hn::NearestInt(hn::Mul(vis, hn::LoadU(df, x + j))), k127);
        vsum = hn::Add(vsum, q);
        hn::StoreU(hn::DemoteTo(d8, q), d8, blk.qs + j);
      }
      blk.bsums[g] = static_cast<int16_t>(hn::GetLane(hn::SumOfLanes(di, vsum)));
    }
    blk.d = 1 / iscale;
  }
}

#endif  // HWY_TARGET == HWY_SCALAR

}  // namespace HWY_NAMESPACE
}  // namespace hinge::kernels
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace hinge::kernels {

HWY_EXPORT(DequantizeF16);
HWY_EXPORT(DequantizeBF16);
HWY_EXPORT(DequantizeQ8_0);
HWY_EXPORT(DequantizeQ4_0);
HWY_EXPORT(QuantizeQ8_0);
HWY_EXPORT(QuantizeQ8_K);

bool dequantize_row(GgmlType type, const void* src, float* dst, int64_t n) {
  switch (type) {
    case GgmlType::F32:
      std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
      return true;
    case GgmlType::F16:
      HWY_DYNAMIC_DISPATCH(DequantizeF16)(src, dst, n);
      return true;
    case GgmlType::BF16:
      HWY_DYNAMIC_DISPATCH(DequantizeBF16)(src, dst, n);
      return true;
    case GgmlType::Q8_0:
      HWY_DYNAMIC_DISPATCH(DequantizeQ8_0)(src, dst, n);
      return true;
    case GgmlType::Q4_0:
      HWY_DYNAMIC_DISPATCH(DequantizeQ4_0)(src, dst, n);
      return true;
    default:
      return dequantize_row_ref(type, src, dst, n);
  }
}

void quantize_activation_row(GgmlType act_type, const float* x, void* dst, int64_t n,
                             float* q8_0_scales, int32_t* q8_0_sums) {
  switch (act_type) {
    case GgmlType::Q8_0:
      HWY_DYNAMIC_DISPATCH(QuantizeQ8_0)(x, dst, n, q8_0_scales, q8_0_sums);
      break;
    case GgmlType::Q8_K:
      HWY_DYNAMIC_DISPATCH(QuantizeQ8_K)(x, dst, n);
      break;
    default:
      quantize_row_ref(act_type, x, dst, n);
      break;
  }
}

}  // namespace hinge::kernels
#endif  // HWY_ONCE
