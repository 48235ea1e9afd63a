// matmul kernels for Q8_0 and Q4_0 weights against Q8_0-quantized activations: integer dot
// product per 32-element block, then one f32 FMA per block with scale d_w * d_x (ggml's
// vec_dot_q8_0_q8_0 / vec_dot_q4_0_q8_0 arithmetic).
//
// AVX2+ computes register tiles of RM weight rows x NT tokens (2 x 4 for batches; 4 x 1 for
// one token), so each activation block is loaded once per RM rows and each weight block once per
// NT tokens. Q8_0 widens both operands to i16 (vpmovsxbw) and uses vpmaddwd (no sign trick; the
// widened weights are reused across the tile's tokens); Q4_0 uses pmaddubsw on the unsigned
// nibbles, the -8 offset applied through per-block activation sums. The d_w * d_x products are
// computed 8 blocks per vector multiply ahead of the dot loop. Other targets use a portable
// Highway path (i8 -> i16 widen, pairwise multiply-add to i32), one token at a time; HWY_SCALAR
// uses the scalar reference.
//
// Batch invariance (AVX2+): the value of a (row, token) pair is computed by the same sequence of
// operations whatever the tile it falls in (see DotTile), hence bit-identical whatever the
// number of tokens in the call and the token's position in it.
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "kernels/cpu_features.h"
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

// Q4_0's 32 unsigned nibbles 0..15 as bytes in element order: low nibbles are elements 0..15
// (low 128-bit lane), high nibbles 16..31 (high lane).
HWY_INLINE __m256i LoadNibbles(const BlockQ4_0& b) {
  const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs));
  return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(packed, 4), packed),
                          _mm256_set1_epi8(0x0F));
}

// Blocks per scale chunk: DotTile computes the d_w * d_x products of this many blocks at a time
// into a stack buffer (RM * NT * kChunk floats).
constexpr int64_t kChunk = 128;

// f32 of the f16 scales of blocks w[0..8). Same conversion as F16ToF32 (F16C), bit for bit.
template <typename WB>
HWY_INLINE __m256 LoadWeightScales8(const WB* w) {
  return _mm256_cvtph_ps(_mm_setr_epi16(
      static_cast<int16_t>(w[0].d), static_cast<int16_t>(w[1].d), static_cast<int16_t>(w[2].d),
      static_cast<int16_t>(w[3].d), static_cast<int16_t>(w[4].d), static_cast<int16_t>(w[5].d),
      static_cast<int16_t>(w[6].d), static_cast<int16_t>(w[7].d)));
}

// One block's operand in registers. Q8_0 (weights and activations): elements 0..15 and 16..31
// as i16. Q4_0 weights: the nibbles as u8 (in both); activations for Q4_0: the i8 block.
struct BlockRegs {
  __m256i a, b;
};
HWY_INLINE BlockRegs LoadWeightRegs(const BlockQ8_0& w) {
  return {_mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w.qs))),
          _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w.qs + 16)))};
}
HWY_INLINE BlockRegs LoadWeightRegs(const BlockQ4_0& w) {
  const __m256i wq = LoadNibbles(w);
  return {wq, wq};
}
// Token block x for weights of type WB (the tag).
HWY_INLINE BlockRegs LoadActRegs(const BlockQ8_0* /*tag*/, const BlockQ8_0& x) {
  return LoadWeightRegs(x);
}
HWY_INLINE BlockRegs LoadActRegs(const BlockQ4_0* /*tag*/, const BlockQ8_0& x) {
  const __m256i xq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.qs));
  return {xq, xq};
}
// VNNI (AVX-512 VNNI on 256-bit vectors, chosen at run time on the AVX3 targets): a block's
// bytes stay i8 and vpdpbusd sums 4 u8 x i8 products per i32 lane. Q8_0 weights keep |w| as u8
// in `a` and w in `b` (its sign moves onto the activations); Q4_0 weights are the nibbles as
// before. For Q4_0 the 8 lanes equal the pmaddubsw path's lane for lane (same 4-byte groups,
// exact integers), so both paths give bit-identical results; for Q8_0 the lanes group the
// elements differently from the i16 path, so results may differ from it in the last bits (each
// path is batch invariant on its own).
// GCC only: GCC checks an intrinsic's target after inlining, so the always_inline tile functions
// can carry VNNI into the one function compiled with it; clang checks each function on its own
// (it would need the attribute on the whole template chain), so clang builds (the sanitizer
// build) keep the pmaddubsw / pmaddwd path here (HINGE_SIMD_VNNI256 is 0 there).

template <bool kVnni>
HWY_INLINE BlockRegs LoadWeightRegsV(const BlockQ8_0& w) {
  if constexpr (kVnni) {
    const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w.qs));
    return {_mm256_abs_epi8(q), q};
  } else {
    return LoadWeightRegs(w);
  }
}
template <bool kVnni>
HWY_INLINE BlockRegs LoadWeightRegsV(const BlockQ4_0& w) {
  return LoadWeightRegs(w);
}
template <bool kVnni>
HWY_INLINE BlockRegs LoadActRegsV(const BlockQ8_0* tag, const BlockQ8_0& x) {
  if constexpr (kVnni) {
    const __m256i xq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.qs));
    return {xq, xq};
  } else {
    return LoadActRegs(tag, x);
  }
}
template <bool kVnni>
HWY_INLINE BlockRegs LoadActRegsV(const BlockQ4_0* tag, const BlockQ8_0& x) {
  return LoadActRegs(tag, x);
}

// <w, x> of one block as 8 i32 lanes whose sum is exact. Q4_0: sum(q x) - 8 sum(x) with q the
// nibble, the offset spread as sum(x) off each of the 8 lanes (xsum: the block's sum(x)).
HWY_INLINE __m256i TileDot(const BlockQ8_0* /*tag*/, const BlockRegs& w, const BlockRegs& x,
                           const int32_t* /*xsum*/) {
  return _mm256_add_epi32(_mm256_madd_epi16(w.a, x.a), _mm256_madd_epi16(w.b, x.b));
}
HWY_INLINE __m256i TileDot(const BlockQ4_0* /*tag*/, const BlockRegs& w, const BlockRegs& x,
                           const int32_t* xsum) {
  return _mm256_sub_epi32(DotU8I8(w.a, x.a), _mm256_set1_epi32(*xsum));
}
template <bool kVnni, typename WB>
HWY_INLINE __m256i TileDotV(const WB* tag, const BlockRegs& w, const BlockRegs& x,
                            const int32_t* xsum) {
#if HINGE_SIMD_VNNI256
  if constexpr (kVnni) {
    if constexpr (std::is_same_v<WB, BlockQ8_0>)
      return HINGE_DPBUSD256(_mm256_setzero_si256(), w.a, _mm256_sign_epi8(x.a, w.b));
    else
      return HINGE_DPBUSD256(_mm256_set1_epi32(-*xsum), w.a, x.a);
  }
#endif
  return TileDot(tag, w, x, xsum);
}

// RM weight rows (nb blocks each) against NT activation rows: every activation block load is
// reused across the RM rows and every weight block across the NT tokens. w[i]: row i's blocks;
// x[k], xd[k], xs[k]: token k's blocks, block scales and sums (MatmulArgs::x_scales / x_sums).
// out[i * NT + k] = <row i, token k>.
//
// Batch invariance: each (row, token) pair owns one 8-lane f32 accumulator that takes the blocks
// in order, acc = fma(f32(d_w) * d_x, f32(8-lane block dot), acc), and ends in HsumF32x8. Every
// tile shape performs exactly this per pair, so a result depends neither on the tile nor on the
// number of tokens in the call; the RM * NT independent accumulators give the FMA chains their
// parallelism. The scale products are computed up front per chunk of blocks (one vector multiply
// per 8 blocks) and read back by broadcast loads, keeping the multiply ports for the dots.
template <int RM, int NT, typename WB, bool kVnni>
HWY_INLINE void DotTile(const WB* const* w, const BlockQ8_0* const* x, const float* const* xd,
                        const int32_t* const* xs, int64_t nb, float* out) {
  __m256 acc[RM][NT];
  for (int i = 0; i < RM; ++i)
    for (int k = 0; k < NT; ++k) acc[i][k] = _mm256_setzero_ps();
  alignas(32) float scale[RM][NT][kChunk];
  for (int64_t c0 = 0; c0 < nb; c0 += kChunk) {
    const int64_t n = nb - c0 < kChunk ? nb - c0 : kChunk;
    int64_t j = 0;
    for (; j + 8 <= n; j += 8) {
      for (int i = 0; i < RM; ++i) {
        const __m256 dw = LoadWeightScales8(w[i] + c0 + j);
        for (int k = 0; k < NT; ++k)
          _mm256_store_ps(&scale[i][k][j], _mm256_mul_ps(dw, _mm256_loadu_ps(xd[k] + c0 + j)));
      }
    }
    for (; j < n; ++j)
      for (int i = 0; i < RM; ++i)
        for (int k = 0; k < NT; ++k) scale[i][k][j] = F16ToF32(w[i][c0 + j].d) * xd[k][c0 + j];
    for (j = 0; j < n; ++j) {
      const int64_t b = c0 + j;
      // Weights stream from memory: fetch the same block 4 tiles (4 * RM rows) ahead (rows are
      // nb blocks apart; a prefetch past the matrix is harmless).
      for (int i = 0; i < RM; ++i) {
        const uintptr_t ahead = reinterpret_cast<uintptr_t>(w[i] + b) + 4 * RM * nb * sizeof(WB);
        _mm_prefetch(reinterpret_cast<const char*>(ahead), _MM_HINT_T0);
      }
      BlockRegs wr[RM];
      for (int i = 0; i < RM; ++i) wr[i] = LoadWeightRegsV<kVnni>(w[i][b]);
      for (int k = 0; k < NT; ++k) {
        const BlockRegs xr = LoadActRegsV<kVnni>(static_cast<const WB*>(nullptr), x[k][b]);
        for (int i = 0; i < RM; ++i) {
          const __m256 dot = _mm256_cvtepi32_ps(TileDotV<kVnni>(w[i], wr[i], xr, xs[k] + b));
          acc[i][k] = _mm256_fmadd_ps(_mm256_broadcast_ss(&scale[i][k][j]), dot, acc[i][k]);
        }
      }
    }
  }
  for (int i = 0; i < RM; ++i)
    for (int k = 0; k < NT; ++k) out[i * NT + k] = HsumF32x8(acc[i][k]);
}

// Rows [r, r + RM) against tokens [t, t + NT).
template <int RM, int NT, typename WB, bool kVnni>
HWY_INLINE void RunTile(const MatmulArgs& a, int64_t r, int64_t t) {
  const int64_t nb = a.cols / kQK8_0;
  const auto* xbase = static_cast<const uint8_t*>(a.x);
  const WB* w[RM];
  for (int i = 0; i < RM; ++i)
    w[i] = reinterpret_cast<const WB*>(a.w + static_cast<size_t>(r + i) * a.w_row_bytes);
  const BlockQ8_0* x[NT];
  const float* xd[NT];
  const int32_t* xs[NT];
  for (int k = 0; k < NT; ++k) {
    x[k] = reinterpret_cast<const BlockQ8_0*>(xbase + static_cast<size_t>(t + k) * a.x_row_bytes);
    xd[k] = a.x_scales + (t + k) * nb;
    xs[k] = a.x_sums + (t + k) * nb;
  }
  float out[RM * NT];
  DotTile<RM, NT, WB, kVnni>(w, x, xd, xs, nb, out);
  for (int i = 0; i < RM; ++i)
    for (int k = 0; k < NT; ++k) a.y[(t + k) * a.y_stride + r + i] = out[i * NT + k];
}

// Rows [r, r + 2 * RM2) against every token: 2 * RM2 rows x 4 tokens as RM2-row tiles, then the
// 1..3 tokens left (one token: all rows in one tile, for enough independent accumulators).
template <int RM2, typename WB, bool kVnni>
HWY_INLINE void RunRows(const MatmulArgs& a, int64_t r) {
  int64_t t = 0;
  for (; t + 4 <= a.num_tokens; t += 4) {
    RunTile<RM2, 4, WB, kVnni>(a, r, t);
    RunTile<RM2, 4, WB, kVnni>(a, r + RM2, t);
  }
  switch (a.num_tokens - t) {
    case 3:
      RunTile<RM2, 3, WB, kVnni>(a, r, t);
      RunTile<RM2, 3, WB, kVnni>(a, r + RM2, t);
      break;
    case 2:
      RunTile<RM2, 2, WB, kVnni>(a, r, t);
      RunTile<RM2, 2, WB, kVnni>(a, r + RM2, t);
      break;
    case 1:
      RunTile<2 * RM2, 1, WB, kVnni>(a, r, t);
      break;
    default:
      break;
  }
}

template <typename WB, bool kVnni>
HWY_INLINE void MatmulRowsQImpl(const MatmulArgs& a, int64_t row_begin, int64_t row_end) {
  int64_t r = row_begin;
  for (; r + 4 <= row_end; r += 4) RunRows<2, WB, kVnni>(a, r);
  for (; r < row_end; ++r) {  // up to 3 rows left: one row at a time
    int64_t t = 0;
    for (; t + 4 <= a.num_tokens; t += 4) RunTile<1, 4, WB, kVnni>(a, r, t);
    switch (a.num_tokens - t) {
      case 3:
        RunTile<1, 3, WB, kVnni>(a, r, t);
        break;
      case 2:
        RunTile<1, 2, WB, kVnni>(a, r, t);
        break;
      case 1:
        RunTile<1, 1, WB, kVnni>(a, r, t);
        break;
      default:
        break;
    }
  }
}

#if HINGE_SIMD_VNNI256
// The VNNI instantiations, compiled with AVX-512 VNNI (AVX3) or AVX-VNNI (AVX2) on top of this
// target's flags (the full list: clang's target attribute replaces the pragma's rather than
// adding to it); called only when the CPU reports it (the tile functions above are
// always_inline, so they inline here).
HINGE_VNNI256_ATTR void MatmulRowsQ8_0Vnni(const MatmulArgs& a, int64_t b, int64_t e) {
  MatmulRowsQImpl<BlockQ8_0, true>(a, b, e);
}
HINGE_VNNI256_ATTR void MatmulRowsQ4_0Vnni(const MatmulArgs& a, int64_t b, int64_t e) {
  MatmulRowsQImpl<BlockQ4_0, true>(a, b, e);
}
#endif

template <typename WB>
HWY_INLINE void MatmulRowsQ(const MatmulArgs& a, int64_t row_begin, int64_t row_end) {
#if HINGE_SIMD_VNNI256
  if (hinge_vnni256_available()) {
    if constexpr (std::is_same_v<WB, BlockQ8_0>)
      return MatmulRowsQ8_0Vnni(a, row_begin, row_end);
    else
      return MatmulRowsQ4_0Vnni(a, row_begin, row_end);
  }
#endif
  MatmulRowsQImpl<WB, false>(a, row_begin, row_end);
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
