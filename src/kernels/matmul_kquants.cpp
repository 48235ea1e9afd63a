// matmul kernels for Q4_K, Q5_K and Q6_K weights against Q8_K-quantized activations (ggml's
// vec_dot_q{4,5,6}_K_q8_K arithmetic): per 256-element super-block an integer sum of sub-block
// scale * <q, q8>, then f32 scaling. The per-sub-block offsets (Q4_K's and Q5_K's mins, Q6_K's
// -32) are folded in through the activation block's bsums, never touching qs again.
//
// AVX2+ uses pmaddubsw (weights are unsigned: 0..15, 0..31 or 0..63) with up to 4 tokens per weight
// load; other targets unpack a super-block to bytes once and use a portable Highway i16 dot;
// HWY_SCALAR uses the scalar reference.
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <cstring>

#include "kernels/cpu_features.h"
#include "kernels/matmul_kernels.h"
#include "kernels/quant_block.h"
#include "kernels/quant_ref.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/matmul_kquants.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "kernels/simd_util-inl.h"

HWY_BEFORE_NAMESPACE();
namespace hinge::kernels {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Unpacks the 12 packed scale bytes of a Q4_K block: out[0..7] = sc, out[8..15] = m.
HWY_INLINE void UnpackQ4KScales(const uint8_t* packed, uint8_t out[16]) {
  uint32_t u[4];
  std::memcpy(u, packed, 12);
  constexpr uint32_t kLow6 = 0x3f3f3f3f, kLow4 = 0x0f0f0f0f, kLow2 = 0x03030303;
  u[3] = ((u[2] >> 4) & kLow4) | (((u[1] >> 6) & kLow2) << 4);  // m[4..7]
  const uint32_t mins_lo = u[1] & kLow6;                        // m[0..3]
  u[1] = (u[2] & kLow4) | (((u[0] >> 6) & kLow2) << 4);         // sc[4..7]
  u[2] = mins_lo;
  u[0] &= kLow6;  // sc[0..3]
  std::memcpy(out, u, 16);
}

#if HINGE_SIMD_AVX2_PLUS

// pshufb masks: kScaleShuffles.masks[j] broadcasts i16 lane j of each 128-bit half to all its
// lanes (bytes 2j, 2j + 1 repeated).
struct ScaleShuffleTable {
  alignas(32) uint8_t masks[8][32];
};
constexpr ScaleShuffleTable MakeScaleShuffles() {
  ScaleShuffleTable t{};
  for (int j = 0; j < 8; ++j)
    for (int i = 0; i < 32; ++i) t.masks[j][i] = static_cast<uint8_t>(2 * j + (i & 1));
  return t;
}
constexpr ScaleShuffleTable kScaleShuffles = MakeScaleShuffles();

HWY_INLINE __m256i ScaleShuffle(int j) {
  return _mm256_load_si256(reinterpret_cast<const __m256i*>(kScaleShuffles.masks[j]));
}

// Q4_K, and Q5_K (WB = BlockQ5_K: the fifth bit of sub-block j's values is bit j of qh).
template <typename WB, int NT>
HWY_INLINE void DotTileQ4K(const WB* HWY_RESTRICT w, const BlockQ8_K* const* x, int64_t nb,
                           float* out) {
  constexpr bool kQ5 = std::is_same_v<WB, BlockQ5_K>;
  __m256 acc[NT];
  for (int k = 0; k < NT; ++k) acc[k] = _mm256_setzero_ps();
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  for (int64_t i = 0; i < nb; ++i) {
    alignas(16) uint8_t sm[16];
    UnpackQ4KScales(w[i].scales, sm);
    // [m0 m0 m1 m1 ... m7 m7] as i16: pairs with bsums (two per 32-element sub-block).
    const __m128i mins8 = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(sm + 8));
    const __m256i mins16 = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(mins8, mins8));
    // sc[0..7] as i16 in both 128-bit halves, for pshufb broadcasts below.
    const __m256i scales16 = _mm256_broadcastsi128_si256(
        _mm_cvtepu8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(sm))));
    __m256i sumi[NT];
    for (int k = 0; k < NT; ++k) sumi[k] = _mm256_setzero_si256();
    __m256i qh = _mm256_setzero_si256();
    if constexpr (kQ5) qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[i].qh));
    for (int c = 0; c < 4; ++c) {
      const __m256i q4 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[i].qs + 32 * c));
      __m256i lo = _mm256_and_si256(q4, m4);
      __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q4, 4), m4);
      if constexpr (kQ5) {
        // Bits 2c and 2c + 1 of each qh byte, moved to bit 4 (16-bit shifts: masked to one bit
        // per byte, neither crosses into the other byte).
        const __m256i one = _mm256_set1_epi8(1);
        lo = _mm256_or_si256(
            lo, _mm256_slli_epi16(
                    _mm256_and_si256(_mm256_srl_epi16(qh, _mm_cvtsi32_si128(2 * c)), one), 4));
        hi = _mm256_or_si256(
            hi, _mm256_slli_epi16(
                    _mm256_and_si256(_mm256_srl_epi16(qh, _mm_cvtsi32_si128(2 * c + 1)), one), 4));
      }
      const __m256i s_lo = _mm256_shuffle_epi8(scales16, ScaleShuffle(2 * c));
      const __m256i s_hi = _mm256_shuffle_epi8(scales16, ScaleShuffle(2 * c + 1));
      for (int k = 0; k < NT; ++k) {
        const int8_t* q8 = x[k][i].qs + 64 * c;
        const __m256i x_lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q8));
        const __m256i x_hi = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q8 + 32));
        const __m256i p_lo = _mm256_madd_epi16(_mm256_maddubs_epi16(lo, x_lo), s_lo);
        const __m256i p_hi = _mm256_madd_epi16(_mm256_maddubs_epi16(hi, x_hi), s_hi);
        sumi[k] = _mm256_add_epi32(sumi[k], _mm256_add_epi32(p_lo, p_hi));
      }
    }
    const float dw = F16ToF32(w[i].d), dminw = F16ToF32(w[i].dmin);
    for (int k = 0; k < NT; ++k) {
      const float dx = x[k][i].d;
      const __m256i bsums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[k][i].bsums));
      const __m256i mins = _mm256_madd_epi16(bsums, mins16);  // sum_j m[j] * bsum(sub j)
      acc[k] = _mm256_fmadd_ps(_mm256_set1_ps(dw * dx), _mm256_cvtepi32_ps(sumi[k]), acc[k]);
      acc[k] = _mm256_fnmadd_ps(_mm256_set1_ps(dminw * dx), _mm256_cvtepi32_ps(mins), acc[k]);
    }
  }
  for (int k = 0; k < NT; ++k) out[k] = HsumF32x8(acc[k]);
}

template <int NT>
HWY_INLINE void DotTileQ6K(const BlockQ6_K* HWY_RESTRICT w, const BlockQ8_K* const* x, int64_t nb,
                           float* out) {
  __m256 acc[NT];
  for (int k = 0; k < NT; ++k) acc[k] = _mm256_setzero_ps();
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  const __m256i m30 = _mm256_set1_epi8(0x30);
  for (int64_t i = 0; i < nb; ++i) {
    const int8_t* sc = w[i].scales;
    __m256i sumi[NT];
    for (int k = 0; k < NT; ++k) sumi[k] = _mm256_setzero_si256();
    for (int h = 0; h < 2; ++h) {
      const auto* ql = w[i].ql + 64 * h;
      const __m256i ql0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ql));
      const __m256i ql1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ql + 32));
      const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[i].qh + 32 * h));
      // 6-bit values (0..63) of elements 128h + 32g + l, g = 0..3 (see BlockQ6_K).
      __m256i q[4];
      q[0] = _mm256_or_si256(_mm256_and_si256(ql0, m4),
                             _mm256_and_si256(_mm256_slli_epi16(qh, 4), m30));
      q[1] = _mm256_or_si256(_mm256_and_si256(ql1, m4),
                             _mm256_and_si256(_mm256_slli_epi16(qh, 2), m30));
      q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), m4),
                             _mm256_and_si256(qh, m30));
      q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), m4),
                             _mm256_and_si256(_mm256_srli_epi16(qh, 2), m30));
      for (int g = 0; g < 4; ++g) {
        // Low 128 bits cover sub-block 8h + 2g, high 128 bits the next one.
        const int j = 8 * h + 2 * g;
        const __m256i s = _mm256_set_m128i(_mm_set1_epi16(sc[j + 1]), _mm_set1_epi16(sc[j]));
        for (int k = 0; k < NT; ++k) {
          const __m256i xq =
              _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[k][i].qs + 128 * h + 32 * g));
          sumi[k] = _mm256_add_epi32(sumi[k], _mm256_madd_epi16(_mm256_maddubs_epi16(q[g], xq), s));
        }
      }
    }
    // sum (q - 32) * x = sum q * x - 32 * bsum, per sub-block with its scale.
    const __m256i sc16 =
        _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(sc)));
    const float dw = F16ToF32(w[i].d);
    for (int k = 0; k < NT; ++k) {
      const __m256i bsums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[k][i].bsums));
      const __m256i offset = _mm256_slli_epi32(_mm256_madd_epi16(bsums, sc16), 5);
      const __m256i total = _mm256_sub_epi32(sumi[k], offset);
      acc[k] = _mm256_fmadd_ps(_mm256_set1_ps(dw * x[k][i].d), _mm256_cvtepi32_ps(total), acc[k]);
    }
  }
  for (int k = 0; k < NT; ++k) out[k] = HsumF32x8(acc[k]);
}

template <typename WB, int NT>
HWY_INLINE void DotTile(const WB* w, const BlockQ8_K* const* x, int64_t nb, float* out) {
  if constexpr (std::is_same_v<WB, BlockQ6_K>)
    DotTileQ6K<NT>(w, x, nb, out);
  else
    DotTileQ4K<WB, NT>(w, x, nb, out);
}

#if HINGE_SIMD_VNNI
// The AVX-512 VNNI Q4_K path (MatmulRowsQ4KVnni), in this target's namespace.
#include "kernels/matmul_q4k_vnni-inl.h"
#endif

template <typename WB>
HWY_INLINE void MatmulRowsK(const MatmulArgs& a, int64_t row_begin, int64_t row_end) {
  const int64_t nb = a.cols / kQK_K, nt = a.num_tokens;
  const auto* xbase = static_cast<const uint8_t*>(a.x);
  for (int64_t r = row_begin; r < row_end; ++r) {
    const WB* w = reinterpret_cast<const WB*>(a.w + static_cast<size_t>(r) * a.w_row_bytes);
    for (int64_t t = 0; t < nt; t += 4) {
      const BlockQ8_K* xs[4];
      const int64_t tile = nt - t < 4 ? nt - t : 4;
      for (int64_t k = 0; k < tile; ++k)
        xs[k] =
            reinterpret_cast<const BlockQ8_K*>(xbase + static_cast<size_t>(t + k) * a.x_row_bytes);
      float out[4];
      switch (tile) {
        case 4:
          DotTile<WB, 4>(w, xs, nb, out);
          break;
        case 3:
          DotTile<WB, 3>(w, xs, nb, out);
          break;
        case 2:
          DotTile<WB, 2>(w, xs, nb, out);
          break;
        default:
          DotTile<WB, 1>(w, xs, nb, out);
          break;
      }
      for (int64_t k = 0; k < tile; ++k) a.y[(t + k) * a.y_stride + r] = out[k];
    }
  }
}

#elif HWY_TARGET == HWY_SCALAR

template <typename WB>
HWY_INLINE void MatmulRowsK(const MatmulArgs& a, int64_t row_begin, int64_t row_end) {
  const auto* xbase = static_cast<const uint8_t*>(a.x);
  for (int64_t r = row_begin; r < row_end; ++r) {
    const WB* w = reinterpret_cast<const WB*>(a.w + static_cast<size_t>(r) * a.w_row_bytes);
    for (int64_t t = 0; t < a.num_tokens; ++t) {
      const auto* x =
          reinterpret_cast<const BlockQ8_K*>(xbase + static_cast<size_t>(t) * a.x_row_bytes);
      if constexpr (std::is_same_v<WB, BlockQ4_K>)
        a.y[t * a.y_stride + r] = vec_dot_q4_k_q8_k_ref(a.cols, w, x);
      else if constexpr (std::is_same_v<WB, BlockQ5_K>)
        a.y[t * a.y_stride + r] = vec_dot_q5_k_q8_k_ref(a.cols, w, x);
      else
        a.y[t * a.y_stride + r] = vec_dot_q6_k_q8_k_ref(a.cols, w, x);
    }
  }
}

#else  // portable Highway path

// sum a[i] * b[i] over len bytes (len a multiple of the vector length, at most 32).
HWY_INLINE int32_t DotI8(const int8_t* a, const int8_t* b, int len) {
  const hn::CappedTag<int16_t, 16> d16;
  const hn::Repartition<int32_t, decltype(d16)> d32;
  const hn::Rebind<int8_t, decltype(d16)> d8;
  const int N = static_cast<int>(hn::Lanes(d16));
  auto s0 = hn::Zero(d32), s1 = hn::Zero(d32);
  for (int j = 0; j < len; j += N)
    s0 = hn::ReorderWidenMulAccumulate(d32, hn::PromoteTo(d16, hn::LoadU(d8, a + j)),
                                       hn::PromoteTo(d16, hn::LoadU(d8, b + j)), s0, s1);
  return hn::GetLane(hn::SumOfLanes(d32, hn::RearrangeToOddPlusEven(s0, s1)));
}

// Q4_K / Q5_K super-block against one Q8_K block, weights already unpacked to q[256] (0..15 /
// 0..31).
template <typename WB>
HWY_INLINE float SuperBlockDot(const WB& w, const uint8_t sm[16], const int8_t* q,
                               const BlockQ8_K& x) {
  int32_t sumi = 0, summs = 0;
  for (int j = 0; j < 8; ++j) {
    sumi += sm[j] * DotI8(q + 32 * j, x.qs + 32 * j, 32);
    summs += sm[8 + j] * (x.bsums[2 * j] + x.bsums[2 * j + 1]);
  }
  return x.d * F16ToF32(w.d) * static_cast<float>(sumi) -
         x.d * F16ToF32(w.dmin) * static_cast<float>(summs);
}

// Q6_K super-block, weights unpacked to q[256] (0..63).
HWY_INLINE float SuperBlockDot(const BlockQ6_K& w, const uint8_t* /*unused*/, const int8_t* q,
                               const BlockQ8_K& x) {
  int32_t sumi = 0;
  for (int j = 0; j < 16; ++j)
    sumi += w.scales[j] * (DotI8(q + 16 * j, x.qs + 16 * j, 16) - 32 * x.bsums[j]);
  return F16ToF32(w.d) * x.d * static_cast<float>(sumi);
}

HWY_INLINE void Unpack(const BlockQ4_K& w, uint8_t sm[16], int8_t q[kQK_K]) {
  UnpackQ4KScales(w.scales, sm);
  for (int c = 0; c < 4; ++c)
    for (int l = 0; l < 32; ++l) {
      q[64 * c + l] = static_cast<int8_t>(w.qs[32 * c + l] & 0xF);
      q[64 * c + 32 + l] = static_cast<int8_t>(w.qs[32 * c + l] >> 4);
    }
}
HWY_INLINE void Unpack(const BlockQ5_K& w, uint8_t sm[16], int8_t q[kQK_K]) {
  UnpackQ4KScales(w.scales, sm);
  for (int c = 0; c < 4; ++c)
    for (int l = 0; l < 32; ++l) {
      q[64 * c + l] =
          static_cast<int8_t>((w.qs[32 * c + l] & 0xF) | (((w.qh[l] >> (2 * c)) & 1) << 4));
      q[64 * c + 32 + l] =
          static_cast<int8_t>((w.qs[32 * c + l] >> 4) | (((w.qh[l] >> (2 * c + 1)) & 1) << 4));
    }
}
HWY_INLINE void Unpack(const BlockQ6_K& w, uint8_t* /*unused*/, int8_t q[kQK_K]) {
  for (int h = 0; h < 2; ++h)
    for (int l = 0; l < 32; ++l) {
      const uint8_t* ql = w.ql + 64 * h;
      const uint8_t qh = w.qh[32 * h + l];
      int8_t* o = q + 128 * h;
      o[l] = static_cast<int8_t>((ql[l] & 0xF) | ((qh & 3) << 4));
      o[l + 32] = static_cast<int8_t>((ql[l + 32] & 0xF) | (((qh >> 2) & 3) << 4));
      o[l + 64] = static_cast<int8_t>((ql[l] >> 4) | (((qh >> 4) & 3) << 4));
      o[l + 96] = static_cast<int8_t>((ql[l + 32] >> 4) | (((qh >> 6) & 3) << 4));
    }
}

template <typename WB>
HWY_INLINE void MatmulRowsK(const MatmulArgs& a, int64_t row_begin, int64_t row_end) {
  const int64_t nb = a.cols / kQK_K;
  const auto* xbase = static_cast<const uint8_t*>(a.x);
  alignas(64) int8_t q[kQK_K];
  uint8_t sm[16];
  for (int64_t r = row_begin; r < row_end; ++r) {
    const WB* w = reinterpret_cast<const WB*>(a.w + static_cast<size_t>(r) * a.w_row_bytes);
    for (int64_t t = 0; t < a.num_tokens; ++t) a.y[t * a.y_stride + r] = 0.0f;
    for (int64_t i = 0; i < nb; ++i) {
      Unpack(w[i], sm, q);  // once per super-block, shared by all tokens
      for (int64_t t = 0; t < a.num_tokens; ++t) {
        const auto* x =
            reinterpret_cast<const BlockQ8_K*>(xbase + static_cast<size_t>(t) * a.x_row_bytes);
        a.y[t * a.y_stride + r] += SuperBlockDot(w[i], sm, q, x[i]);
      }
    }
  }
}

#endif

// Q4_K and Q5_K: the AVX-512 VNNI kernel where it runs (it needs the scaled sub-block sums),
// else this target's.
template <typename WB>
HWY_INLINE void MatmulRowsQ4KOrQ5K(const MatmulArgs& a, int64_t b, int64_t e) {
#if HINGE_SIMD_AVX2_PLUS && HINGE_SIMD_VNNI
  if (cpu_has_avx512_vnni() && a.x_min_sums != nullptr) return MatmulRowsQ4KVnni<WB>(a, b, e);
#endif
  MatmulRowsK<WB>(a, b, e);
}
void MatmulRowsQ4K(const MatmulArgs& a, int64_t b, int64_t e) {
  MatmulRowsQ4KOrQ5K<BlockQ4_K>(a, b, e);
}
void MatmulRowsQ5K(const MatmulArgs& a, int64_t b, int64_t e) {
  MatmulRowsQ4KOrQ5K<BlockQ5_K>(a, b, e);
}
void MatmulRowsQ6K(const MatmulArgs& a, int64_t b, int64_t e) {
  MatmulRowsK<BlockQ6_K>(a, b, e);
}

}  // namespace HWY_NAMESPACE
}  // namespace hinge::kernels
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace hinge::kernels {

HWY_EXPORT(MatmulRowsQ4K);
HWY_EXPORT(MatmulRowsQ5K);
HWY_EXPORT(MatmulRowsQ6K);

void matmul_rows_q4_k(const MatmulArgs& a, int64_t b, int64_t e) {
  HWY_DYNAMIC_DISPATCH(MatmulRowsQ4K)(a, b, e);
}
void matmul_rows_q5_k(const MatmulArgs& a, int64_t b, int64_t e) {
  HWY_DYNAMIC_DISPATCH(MatmulRowsQ5K)(a, b, e);
}
void matmul_rows_q6_k(const MatmulArgs& a, int64_t b, int64_t e) {
  HWY_DYNAMIC_DISPATCH(MatmulRowsQ6K)(a, b, e);
}

}  // namespace hinge::kernels
#endif  // HWY_ONCE
