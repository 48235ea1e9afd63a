// matmul kernels for Q8_0 and Q4_0 weights against Q8_0-quantized activations: integer dot
// product per 32-element block, then one f32 FMA per block with scale d_w * d_x (ggml's
// vec_dot_q8_0_q8_0 / vec_dot_q4_0_q8_0 arithmetic).
//
// AVX2+ uses pmaddubsw (Q8_0: sign trick, |w| as u8 times x carrying w's sign; Q4_0: the
// unsigned nibbles directly, the -8 offset applied through per-block activation sums) and
// processes up to 4 tokens per weight-block load; other targets use a portable Highway path (i8 ->
// i16 widen, pairwise multiply-add to i32), one token at a time; HWY_SCALAR uses the scalar
// reference.
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "kernels/matmul_kernels.h"
#include "kernels/quant_block.h"
#include "kernels/quant_ref.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/matmul_q8.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "kernels/simd_util-inl.h"

HWY_BEFORE_NAMESPACE();
namespace hinge::kernels {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

#if HINGE_SIMD_AVX2_PLUS

// The block's 32 weights as bytes in element order: Q8_0's signed values (multiplied with the
// sign trick) or Q4_0's unsigned nibbles 0..15 (the -8 offset is folded in by BlockDot).
HWY_INLINE __m256i LoadWeightBlock(const BlockQ8_0& b) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs));
}
HWY_INLINE __m256i LoadWeightBlock(const BlockQ4_0& b) {
  // Low nibbles are elements 0..15 (low 128-bit lane), high nibbles 16..31 (high lane).
  const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs));
  return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(packed, 4), packed),
                          _mm256_set1_epi8(0x0F));
}

// <w, x> of one block as 8 i32 lanes whose sum is exact. Q4_0: sum(q x) - 8 sum(x) with q the
// nibble, the offset spread as sum(x) off each of the 8 lanes (xsum: the block's sum(x)).
HWY_INLINE __m256i BlockDot(const BlockQ8_0&, __m256i wq, __m256i wabs, __m256i xq,
                            const int32_t* /*xsum*/) {
  return DotU8I8(wabs, _mm256_sign_epi8(xq, wq));
}
HWY_INLINE __m256i BlockDot(const BlockQ4_0&, __m256i wq, __m256i /*wabs*/, __m256i xq,
                            const int32_t* xsum) {
  return _mm256_sub_epi32(DotU8I8(wq, xq), _mm256_set1_epi32(*xsum));
}
HWY_INLINE __m256i AbsIfSigned(const BlockQ8_0&, __m256i wq) {
  return _mm256_sign_epi8(wq, wq);
}
HWY_INLINE __m256i AbsIfSigned(const BlockQ4_0&, __m256i wq) {
  return wq;
}

// One weight row (nb blocks) against NT activation rows. xd[k] / xs[k]: token k's block scales
// and sums (MatmulArgs::x_scales / x_sums).
template <int NT, typename WB>
HWY_INLINE void DotTile(const WB* HWY_RESTRICT w, const BlockQ8_0* const* x, const float* const* xd,
                        const int32_t* const* xs, int64_t nb, float* out) {
  // Two accumulator sets (even / odd blocks) so consecutive FMAs do not wait on each other.
  __m256 acc0[NT], acc1[NT];
  for (int k = 0; k < NT; ++k) acc0[k] = acc1[k] = _mm256_setzero_ps();
  auto block = [&](int64_t b, __m256* acc) HWY_ATTR {
    const __m256i wq = LoadWeightBlock(w[b]);
    const __m256i wabs = AbsIfSigned(w[b], wq);
    const __m256 dw = _mm256_set1_ps(F16ToF32(w[b].d));
    for (int k = 0; k < NT; ++k) {
      const __m256i xq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[k][b].qs));
      const __m256 dot = _mm256_cvtepi32_ps(BlockDot(w[b], wq, wabs, xq, xs[k] + b));
      acc[k] = _mm256_fmadd_ps(_mm256_mul_ps(dw, _mm256_broadcast_ss(xd[k] + b)), dot, acc[k]);
    }
  };
  int64_t b = 0;
  for (; b + 2 <= nb; b += 2) {
    block(b, acc0);
    block(b + 1, acc1);
  }
  if (b < nb) block(b, acc0);
  for (int k = 0; k < NT; ++k) out[k] = HsumF32x8(_mm256_add_ps(acc0[k], acc1[k]));
}

template <typename WB>
HWY_INLINE void MatmulRowsQ(const MatmulArgs& a, int64_t row_begin, int64_t row_end) {
  const int64_t nb = a.cols / kQK8_0, nt = a.num_tokens;
  const auto* xbase = static_cast<const uint8_t*>(a.x);
  for (int64_t r = row_begin; r < row_end; ++r) {
    const WB* w = reinterpret_cast<const WB*>(a.w + static_cast<size_t>(r) * a.w_row_bytes);
    for (int64_t t = 0; t < nt; t += 4) {
      const BlockQ8_0* xs[4];
      const float* xd[4];
      const int32_t* xsum[4];
      const int64_t tile = nt - t < 4 ? nt - t : 4;
      for (int64_t k = 0; k < tile; ++k) {
        xs[k] =
            reinterpret_cast<const BlockQ8_0*>(xbase + static_cast<size_t>(t + k) * a.x_row_bytes);
        xd[k] = a.x_scales + (t + k) * nb;
        xsum[k] = a.x_sums + (t + k) * nb;
      }
      float out[4];
      switch (tile) {
        case 4:
          DotTile<4>(w, xs, xd, xsum, nb, out);
          break;
        case 3:
          DotTile<3>(w, xs, xd, xsum, nb, out);
          break;
        case 2:
          DotTile<2>(w, xs, xd, xsum, nb, out);
          break;
        default:
          DotTile<1>(w, xs, xd, xsum, nb, out);
          break;
      }
      for (int64_t k = 0; k < tile; ++k) a.y[(t + k) * a.y_stride + r] = out[k];
    }
  }
}

#elif HWY_TARGET == HWY_SCALAR

template <typename WB>
HWY_INLINE float DotRow(const WB* w, const BlockQ8_0* x, int64_t n) {
  if constexpr (std::is_same_v<WB, BlockQ8_0>)
    return vec_dot_q8_0_q8_0_ref(n, w, x);
  else
    return vec_dot_q4_0_q8_0_ref(n, w, x);
}

template <typename WB>
HWY_INLINE void MatmulRowsQ(const MatmulArgs& a, int64_t row_begin, int64_t row_end) {
  const auto* xbase = static_cast<const uint8_t*>(a.x);
  for (int64_t r = row_begin; r < row_end; ++r) {
    const WB* w = reinterpret_cast<const WB*>(a.w + static_cast<size_t>(r) * a.w_row_bytes);
    for (int64_t t = 0; t < a.num_tokens; ++t)
      a.y[t * a.y_stride + r] = DotRow(
          w, reinterpret_cast<const BlockQ8_0*>(xbase + static_cast<size_t>(t) * a.x_row_bytes),
          a.cols);
  }
}

#else  // portable Highway path

// Vectors of at most 16 i16 lanes, so a 32-element block is a whole number of vectors.
using D16 = hn::CappedTag<int16_t, 16>;
using D32 = hn::Repartition<int32_t, D16>;
using DF = hn::Rebind<float, D32>;

// Accumulates one block's weights (as i16) times activations into two i32 partial sums.
HWY_INLINE void BlockDot(const BlockQ8_0& w, const BlockQ8_0& x, hn::Vec<D32>& s0,
                         hn::Vec<D32>& s1) {
  const D16 d16;
  const D32 d32;
  const hn::Rebind<int8_t, D16> d8;
  const int N = static_cast<int>(hn::Lanes(d16));
  for (int j = 0; j < kQK8_0; j += N) {
    const auto wv = hn::PromoteTo(d16, hn::LoadU(d8, w.qs + j));
    const auto xv = hn::PromoteTo(d16, hn::LoadU(d8, x.qs + j));
    s0 = hn::ReorderWidenMulAccumulate(d32, wv, xv, s0, s1);
  }
}
HWY_INLINE void BlockDot(const BlockQ4_0& w, const BlockQ8_0& x, hn::Vec<D32>& s0,
                         hn::Vec<D32>& s1) {
  const D16 d16;
  const D32 d32;
  const hn::Rebind<int8_t, D16> d8;
  const hn::Rebind<uint8_t, D16> du8;
  const hn::RebindToUnsigned<D16> du16;
  const int N = static_cast<int>(hn::Lanes(d16));
  const auto eight = hn::Set(d16, 8);
  const auto mask = hn::Set(du16, 0x0F);
  for (int j = 0; j < kQK4_0 / 2; j += N) {
    const auto bytes = hn::PromoteTo(du16, hn::LoadU(du8, w.qs + j));
    const auto lo = hn::Sub(hn::BitCast(d16, hn::And(bytes, mask)), eight);
    const auto hi = hn::Sub(hn::BitCast(d16, hn::ShiftRight<4>(bytes)), eight);
    s0 =
        hn::ReorderWidenMulAccumulate(d32, lo, hn::PromoteTo(d16, hn::LoadU(d8, x.qs + j)), s0, s1);
    s0 = hn::ReorderWidenMulAccumulate(
        d32, hi, hn::PromoteTo(d16, hn::LoadU(d8, x.qs + j + kQK4_0 / 2)), s0, s1);
  }
}

template <typename WB>
HWY_INLINE float DotRow(const WB* HWY_RESTRICT w, const BlockQ8_0* HWY_RESTRICT x, int64_t nb) {
  const D32 d32;
  const DF df;
  auto acc = hn::Zero(df);
  for (int64_t b = 0; b < nb; ++b) {
    auto s0 = hn::Zero(d32), s1 = hn::Zero(d32);
    BlockDot(w[b], x[b], s0, s1);
    const auto sum = hn::RearrangeToOddPlusEven(s0, s1);
    acc = hn::MulAdd(hn::Set(df, F16ToF32(w[b].d) * F16ToF32(x[b].d)), hn::ConvertTo(df, sum), acc);
  }
  return hn::GetLane(hn::SumOfLanes(df, acc));
}

template <typename WB>
HWY_INLINE void MatmulRowsQ(const MatmulArgs& a, int64_t row_begin, int64_t row_end) {
  const int64_t nb = a.cols / kQK8_0;
  const auto* xbase = static_cast<const uint8_t*>(a.x);
  for (int64_t r = row_begin; r < row_end; ++r) {
    const WB* w = reinterpret_cast<const WB*>(a.w + static_cast<size_t>(r) * a.w_row_bytes);
    for (int64_t t = 0; t < a.num_tokens; ++t)
      a.y[t * a.y_stride + r] = DotRow(
          w, reinterpret_cast<const BlockQ8_0*>(xbase + static_cast<size_t>(t) * a.x_row_bytes),
          nb);
  }
}

#endif

void MatmulRowsQ8_0(const MatmulArgs& a, int64_t b, int64_t e) {
  MatmulRowsQ<BlockQ8_0>(a, b, e);
}
void MatmulRowsQ4_0(const MatmulArgs& a, int64_t b, int64_t e) {
  MatmulRowsQ<BlockQ4_0>(a, b, e);
}

}  // namespace HWY_NAMESPACE
}  // namespace hinge::kernels
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace hinge::kernels {

HWY_EXPORT(MatmulRowsQ8_0);
HWY_EXPORT(MatmulRowsQ4_0);

void matmul_rows_q8_0(const MatmulArgs& a, int64_t b, int64_t e) {
  HWY_DYNAMIC_DISPATCH(MatmulRowsQ8_0)(a, b, e);
}
void matmul_rows_q4_0(const MatmulArgs& a, int64_t b, int64_t e) {
  HWY_DYNAMIC_DISPATCH(MatmulRowsQ4_0)(a, b, e);
}

}  // namespace hinge::kernels
#endif  // HWY_ONCE
