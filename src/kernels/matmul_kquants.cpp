// matmul kernels for Q4_K and Q6_K weights against Q8_K-quantized activations (ggml's
// vec_dot_q4_K_q8_K / vec_dot_q6_K_q8_K arithmetic): per 256-element super-block an integer
// sum of sub-block scale * <q, q8>, then f32 scaling. The per-sub-block offsets (Q4_K's mins,
// Q6_K's -32) are folded in through the activation block's bsums, never touching qs again.
//
// AVX2+ uses pmaddubsw (weights are unsigned: 0..15 or 0..63) with up to 4 tokens per weight
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

template <int NT>
HWY_INLINE void DotTileQ4K(const BlockQ4_K* HWY_RESTRICT w, const BlockQ8_K* const* x, int64_t nb,
                           float* out) {
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
    for (int c = 0; c < 4; ++c) {
      const __m256i q4 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[i].qs + 32 * c));
      const __m256i lo = _mm256_and_si256(q4, m4);
      const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q4, 4), m4);
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
  if constexpr (std::is_same_v<WB, BlockQ4_K>)
    DotTileQ4K<NT>(w, x, nb, out);
  else
    DotTileQ6K<NT>(w, x, nb, out);
}

#if HINGE_SIMD_VNNI
// Q4_K with AVX-512 (BW + VNNI, runtime-checked; GCC only, see matmul_q8.cpp), in the GGUF
// layout: a 32-byte chunk of qs holds sub-blocks 2c (low nibbles) and 2c + 1 (high nibbles),
// whose activations are the contiguous 64 bytes qs[64c, 64c + 64) of the Q8_K block, so one
// broadcast + per-half shift gives the 64 weights in activation order. Per (row, token, chunk):
// vpmaddubsw (u8 x i8 -> 32 i16 pair sums, no saturation: 2 * 15 * 128 < 2^15) and vpdpwssd with
// the two sub-block scales (i16 lanes 0..15: sc[2c], 16..31: sc[2c + 1]) into an i32
// accumulator: 2 instructions per 64 products, the scales applied in integers. Per (row, token,
// super-block): one convert and FMA with d_w * d_x, and the mins term as an 8-lane FMA of
// dmin * m[j] (per row) with d_x * sum_j(x) (per token, MatmulArgs::x_min_sums).
//
// Tiles: 2 rows x 4 tokens (8 f32 + 8 i32 accumulators), 4 rows x 1 token for decode. Batch
// invariant: every (row, token) pair runs the same operations in the same order in every tile.

// vpermw indices: chunk c takes i16 lane 2c into lanes 0..15 and lane 2c + 1 into 16..31.
struct Q4KPermTable {
  alignas(64) int16_t idx[4][32];
};
constexpr Q4KPermTable MakeQ4KPerm() {
  Q4KPermTable t{};
  for (int c = 0; c < 4; ++c)
    for (int i = 0; i < 32; ++i) t.idx[c][i] = static_cast<int16_t>(2 * c + (i >= 16 ? 1 : 0));
  return t;
}
constexpr Q4KPermTable kQ4KPerm = MakeQ4KPerm();

// A row's super-block operands, shared by the tile's tokens.
struct Q4KRowOps {
  __m512i sc16;  // i16 lanes 0..7: sc[j] (8..15: m[j], unused)
  __m512 mins;   // lanes 0..7: dmin * m[j]; 8..15: 0
  __m512 dw;     // d broadcast
};

HINGE_VNNI_INLINE Q4KRowOps PrepQ4KRow(const BlockQ4_K& b) {
  // UnpackQ4KScales in registers (sc[0..7], m[0..7] as bytes): going through a byte array would
  // stall on store forwarding (four 4-byte stores read back as one 16-byte load).
  uint32_t u0, u1, u2;
  std::memcpy(&u0, b.scales, 4);
  std::memcpy(&u1, b.scales + 4, 4);
  std::memcpy(&u2, b.scales + 8, 4);
  constexpr uint32_t kLow6 = 0x3f3f3f3f, kLow4 = 0x0f0f0f0f, kLow2 = 0x03030303;
  const uint32_t sc03 = u0 & kLow6, m03 = u1 & kLow6;
  const uint32_t sc47 = (u2 & kLow4) | (((u0 >> 6) & kLow2) << 4);
  const uint32_t m47 = ((u2 >> 4) & kLow4) | (((u1 >> 6) & kLow2) << 4);
  const __m128i v = _mm_set_epi32(static_cast<int>(m47), static_cast<int>(m03),
                                  static_cast<int>(sc47), static_cast<int>(sc03));
  Q4KRowOps r;
  r.sc16 = _mm512_cvtepu8_epi16(_mm256_zextsi128_si256(v));
  const __m256 m = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(v, 8)));
  r.mins = _mm512_zextps256_ps512(_mm256_mul_ps(m, _mm256_set1_ps(F16ToF32(b.dmin))));
  r.dw = _mm512_set1_ps(F16ToF32(b.d));
  return r;
}

// i32 -> f32 for |v| < 2^22 (a super-block's lane: at most 4 * 2 * 3840 * 63 < 2^21), exactly
// as vcvtdq2ps: v + 1.5 * 2^23 as float bits minus 1.5 * 2^23. An integer add and a float
// subtract instead of the conversion, which shares its port with vpmaddubsw / vpdpwssd.
HINGE_VNNI_INLINE __m512 I32ToF32Small(__m512i v) {
  const __m512i magic = _mm512_set1_epi32(0x4B400000);
  return _mm512_sub_ps(_mm512_castsi512_ps(_mm512_add_epi32(v, magic)),
                       _mm512_castsi512_ps(magic));
}

// One chunk (64 weights: sub-blocks 2c, 2c + 1) of super-block b: sumi[i][k] += the scaled
// integer dots of row i's weights wq[i] (bytes) with token k's activations.
template <int RM, int NT>
HINGE_VNNI_INLINE void Q4KChunk(const __m512i* wq, const __m512i* sc, const BlockQ8_K* const* x,
                                int64_t b, int c, __m512i (*sumi)[NT]) {
  for (int k = 0; k < NT; ++k) {
    const __m512i xv = _mm512_loadu_si512(x[k][b].qs + 64 * c);
    for (int i = 0; i < RM; ++i)
      sumi[i][k] = _mm512_dpwssd_epi32(sumi[i][k], _mm512_maddubs_epi16(wq[i], xv), sc[i]);
  }
}

// The end of super-block b: acc += (d_w * d_x) * sumi - (dmin * m) . (d_x * sum(x)).
template <int RM, int NT>
HINGE_VNNI_INLINE void Q4KFold(const __m512* dw, const __m512* mins, const BlockQ8_K* const* x,
                               const float* const* xm, int64_t b, __m512i (*sumi)[NT],
                               __m512 (*acc)[NT]) {
  for (int k = 0; k < NT; ++k) {
    const __m512 dx = _mm512_set1_ps(x[k][b].d);
    const __m512 xmv = _mm512_zextps256_ps512(_mm256_loadu_ps(xm[k] + 8 * b));
    for (int i = 0; i < RM; ++i) {
      acc[i][k] =
          _mm512_fmadd_ps(I32ToF32Small(sumi[i][k]), _mm512_mul_ps(dw[i], dx), acc[i][k]);
      acc[i][k] = _mm512_fnmadd_ps(mins[i], xmv, acc[i][k]);
    }
  }
}

// out[i * NT + k] = <row i, token k>. w[i]: row i's blocks; x[k]: token k's Q8_K blocks;
// xm[k]: its min sums [nb * 8].
template <int RM, int NT>
HINGE_VNNI_INLINE void DotTileQ4KVnni(const BlockQ4_K* const* w, const BlockQ8_K* const* x,
                                      const float* const* xm, int64_t nb, size_t prefetch,
                                      float* out) {
  __m512 acc[RM][NT];
  for (int i = 0; i < RM; ++i)
    for (int k = 0; k < NT; ++k) acc[i][k] = _mm512_setzero_ps();
  const __m512i shifts = _mm512_set_epi64(4, 4, 4, 4, 0, 0, 0, 0);
  const __m512i m4 = _mm512_set1_epi8(0x0F);
  for (int64_t b = 0; b < nb; ++b) {
    Q4KRowOps ro[RM];
    for (int i = 0; i < RM; ++i) {
      const char* ahead = reinterpret_cast<const char*>(w[i] + b) + prefetch;
      _mm_prefetch(ahead, _MM_HINT_T0);
      _mm_prefetch(ahead + 64, _MM_HINT_T0);
      _mm_prefetch(ahead + 128, _MM_HINT_T0);
      ro[i] = PrepQ4KRow(w[i][b]);
    }
    __m512i sumi[RM][NT];
    for (int i = 0; i < RM; ++i)
      for (int k = 0; k < NT; ++k) sumi[i][k] = _mm512_setzero_si512();
    for (int c = 0; c < 4; ++c) {
      const __m512i perm = _mm512_load_si512(kQ4KPerm.idx[c]);
      __m512i wq[RM], sc[RM];
      for (int i = 0; i < RM; ++i) {
        const __m512i q = _mm512_broadcast_i64x4(
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[i][b].qs + 32 * c)));
        wq[i] = _mm512_and_si512(_mm512_srlv_epi64(q, shifts), m4);
        sc[i] = _mm512_permutexvar_epi16(perm, ro[i].sc16);
      }
      Q4KChunk<RM, NT>(wq, sc, x, b, c, sumi);
    }
    __m512 dw[RM], mins[RM];
    for (int i = 0; i < RM; ++i) {
      dw[i] = ro[i].dw;
      mins[i] = ro[i].mins;
    }
    Q4KFold<RM, NT>(dw, mins, x, xm, b, sumi, acc);
  }
  for (int i = 0; i < RM; ++i)
    for (int k = 0; k < NT; ++k) out[i * NT + k] = _mm512_reduce_add_ps(acc[i][k]);
}

// Rows [r, r + RM) x tokens [t, t + NT).
template <int RM, int NT>
HINGE_VNNI_INLINE void RunTileQ4KVnni(const MatmulArgs& a, int64_t r, int64_t t) {
  const int64_t nb = a.cols / kQK_K;
  const auto* xbase = static_cast<const uint8_t*>(a.x);
  const BlockQ4_K* w[RM];
  for (int i = 0; i < RM; ++i)
    w[i] = reinterpret_cast<const BlockQ4_K*>(a.w + static_cast<size_t>(r + i) * a.w_row_bytes);
  const BlockQ8_K* x[NT];
  const float* xm[NT];
  for (int k = 0; k < NT; ++k) {
    x[k] = reinterpret_cast<const BlockQ8_K*>(xbase + static_cast<size_t>(t + k) * a.x_row_bytes);
    xm[k] = a.x_min_sums + (t + k) * nb * 8;
  }
  float out[RM * NT];
  DotTileQ4KVnni<RM, NT>(w, x, xm, nb, 1 * RM * a.w_row_bytes, out);
  for (int i = 0; i < RM; ++i)
    for (int k = 0; k < NT; ++k) a.y[(t + k) * a.y_stride + r + i] = out[i * NT + k];
}

template <int RM>
HINGE_VNNI_INLINE void RunRowsQ4KVnni(const MatmulArgs& a, int64_t r, int64_t t0, int64_t t1) {
  int64_t t = t0;
  for (; t + 4 <= t1; t += 4) RunTileQ4KVnni<RM, 4>(a, r, t);
  switch (t1 - t) {
    case 3:
      RunTileQ4KVnni<RM, 3>(a, r, t);
      break;
    case 2:
      RunTileQ4KVnni<RM, 2>(a, r, t);
      break;
    case 1:
      RunTileQ4KVnni<RM, 1>(a, r, t);
      break;
    default:
      break;
  }
}

// A row's super-block prepared for many token tiles (prefill, batched decode): the weights as
// bytes, the four chunks' scale vectors, the mins and d, so the tile loop is two loads and two
// instructions per (chunk, row, token). Same values as PrepQ4KRow and the nibble unpacking.
struct alignas(64) Q4KPrepared {
  uint8_t w[4][64];
  int16_t sc[4][32];
  float mins[16];  // dmin * m[j] in 0..7, zero above
  float dw;
  float pad[15];
};
// Prepared blocks per row tile at most (2 rows): 16384 columns.
constexpr int64_t kQ4KPreparedBlocks = 64;

HINGE_VNNI_INLINE void PrepareQ4KRow(const BlockQ4_K* w, int64_t nb, Q4KPrepared* out) {
  const __m512i shifts = _mm512_set_epi64(4, 4, 4, 4, 0, 0, 0, 0);
  const __m512i m4 = _mm512_set1_epi8(0x0F);
  for (int64_t b = 0; b < nb; ++b) {
    const Q4KRowOps ro = PrepQ4KRow(w[b]);
    Q4KPrepared& p = out[b];
    for (int c = 0; c < 4; ++c) {
      const __m512i q = _mm512_broadcast_i64x4(
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[b].qs + 32 * c)));
      _mm512_store_si512(p.w[c], _mm512_and_si512(_mm512_srlv_epi64(q, shifts), m4));
      _mm512_store_si512(p.sc[c],
                         _mm512_permutexvar_epi16(_mm512_load_si512(kQ4KPerm.idx[c]), ro.sc16));
    }
    _mm512_store_ps(p.mins, ro.mins);
    p.dw = _mm512_cvtss_f32(ro.dw);
  }
}

// DotTileQ4KVnni on prepared rows, super-blocks [b0, b1) of the row: the accumulators start at
// zero (b0 == 0) or from accmem, and end in out (b1 == nb) or back in accmem ([RM][NT][16]
// floats). Splitting a row into such ranges keeps a range's prepared weights and activations in
// L1 across the token tiles; the accumulators take the same operations in the same order, so
// results are bit-identical to DotTileQ4KVnni.
template <int RM, int NT>
HINGE_VNNI_INLINE void DotTileQ4KPrepared(const Q4KPrepared* const* w, const BlockQ8_K* const* x,
                                          const float* const* xm, int64_t b0, int64_t b1,
                                          int64_t nb, float* accmem, float* out) {
  __m512 acc[RM][NT];
  for (int i = 0; i < RM; ++i)
    for (int k = 0; k < NT; ++k)
      acc[i][k] = b0 == 0 ? _mm512_setzero_ps() : _mm512_load_ps(accmem + (i * NT + k) * 16);
  for (int64_t b = b0; b < b1; ++b) {
    __m512i sumi[RM][NT];
    for (int i = 0; i < RM; ++i)
      for (int k = 0; k < NT; ++k) sumi[i][k] = _mm512_setzero_si512();
    for (int c = 0; c < 4; ++c) {
      __m512i wq[RM], sc[RM];
      for (int i = 0; i < RM; ++i) {
        wq[i] = _mm512_load_si512(w[i][b].w[c]);
        sc[i] = _mm512_load_si512(w[i][b].sc[c]);
      }
      Q4KChunk<RM, NT>(wq, sc, x, b, c, sumi);
    }
    __m512 dw[RM], mins[RM];
    for (int i = 0; i < RM; ++i) {
      dw[i] = _mm512_set1_ps(w[i][b].dw);
      mins[i] = _mm512_load_ps(w[i][b].mins);
    }
    Q4KFold<RM, NT>(dw, mins, x, xm, b, sumi, acc);
  }
  for (int i = 0; i < RM; ++i)
    for (int k = 0; k < NT; ++k) {
      if (b1 == nb)
        out[i * NT + k] = _mm512_reduce_add_ps(acc[i][k]);
      else
        _mm512_store_ps(accmem + (i * NT + k) * 16, acc[i][k]);
    }
}

// Super-blocks per range of DotTileQ4KPrepared (2048 columns).
constexpr int64_t kQ4KRangeBlocks = 8;
// Tokens per block of the prepared path at most (its accumulator buffer).
constexpr int64_t kQ4KMaxBlockTokens = 128;

// Prepared rows [r, r + RM) (prep[i]: row r + i) x tokens [t0, t1), t1 - t0 <=
// kQ4KMaxBlockTokens, in super-block ranges. accbuf: (t1 - t0) * RM * 16 floats.
template <int RM>
HINGE_VNNI_INLINE void RunPreparedQ4K(const MatmulArgs& a, const Q4KPrepared* const* prep,
                                      int64_t r, int64_t t0, int64_t t1, float* accbuf) {
  const int64_t nb = a.cols / kQK_K;
  const auto* xbase = static_cast<const uint8_t*>(a.x);
  for (int64_t b0 = 0; b0 < nb; b0 += kQ4KRangeBlocks) {
    const int64_t b1 = b0 + kQ4KRangeBlocks < nb ? b0 + kQ4KRangeBlocks : nb;
    auto tile = [&](auto nt_tag, int64_t t) HINGE_VNNI_LAMBDA {
      constexpr int NT = decltype(nt_tag)::value;
      const BlockQ8_K* x[NT];
      const float* xm[NT];
      for (int k = 0; k < NT; ++k) {
        x[k] = reinterpret_cast<const BlockQ8_K*>(xbase +
                                                  static_cast<size_t>(t + k) * a.x_row_bytes);
        xm[k] = a.x_min_sums + (t + k) * nb * 8;
      }
      float out[RM * NT];
      DotTileQ4KPrepared<RM, NT>(prep, x, xm, b0, b1, nb, accbuf + (t - t0) * RM * 16, out);
      if (b1 == nb)
        for (int i = 0; i < RM; ++i)
          for (int k = 0; k < NT; ++k) a.y[(t + k) * a.y_stride + r + i] = out[i * NT + k];
    };
    int64_t t = t0;
    for (; t + 4 <= t1; t += 4) tile(std::integral_constant<int, 4>(), t);
    switch (t1 - t) {
      case 3:
        tile(std::integral_constant<int, 3>(), t);
        break;
      case 2:
        tile(std::integral_constant<int, 2>(), t);
        break;
      case 1:
        tile(std::integral_constant<int, 1>(), t);
        break;
      default:
        break;
    }
  }
}

HINGE_VNNI_ATTR void MatmulRowsQ4KVnni(const MatmulArgs& a, int64_t row_begin, int64_t row_end) {
  if (a.num_tokens == 1) {
    int64_t r = row_begin;
    for (; r + 4 <= row_end; r += 4) RunTileQ4KVnni<4, 1>(a, r, 0);
    for (; r < row_end; ++r) RunTileQ4KVnni<1, 1>(a, r, 0);
    return;
  }
  // Token blocks of ~1 MiB of activations stay in L2 while a block's rows stream (large, so a
  // row's preparation is shared by many token tiles).
  int64_t tb = static_cast<int64_t>((size_t{1} << 20) / a.x_row_bytes) / 4 * 4;
  if (tb < 4) tb = 4;
  if (tb > kQ4KMaxBlockTokens) tb = kQ4KMaxBlockTokens;
  const int64_t nb = a.cols / kQK_K;
  const bool prepare = nb <= kQ4KPreparedBlocks;
  Q4KPrepared prepared[prepare ? 2 * kQ4KPreparedBlocks : 1];
  alignas(64) float accbuf[prepare ? kQ4KMaxBlockTokens * 2 * 16 : 16];
  const Q4KPrepared* rows2[2] = {prepared, prepared + nb};
  auto row_blocks = [&](int64_t r) {
    return reinterpret_cast<const BlockQ4_K*>(a.w + static_cast<size_t>(r) * a.w_row_bytes);
  };
  for (int64_t t0 = 0; t0 < a.num_tokens; t0 += tb) {
    const int64_t t1 = t0 + tb < a.num_tokens ? t0 + tb : a.num_tokens;
    // Preparing a row costs about one token tile's work: worth it from 8 tokens on.
    const bool prep = prepare && t1 - t0 >= 8;
    int64_t r = row_begin;
    for (; r + 2 <= row_end; r += 2) {
      if (prep) {
        PrepareQ4KRow(row_blocks(r), nb, prepared);
        PrepareQ4KRow(row_blocks(r + 1), nb, prepared + nb);
        RunPreparedQ4K<2>(a, rows2, r, t0, t1, accbuf);
      } else {
        RunRowsQ4KVnni<2>(a, r, t0, t1);
      }
    }
    for (; r < row_end; ++r) RunRowsQ4KVnni<1>(a, r, t0, t1);
  }
}
#endif  // HINGE_SIMD_VNNI

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

// Q4_K super-block against one Q8_K block, weights already unpacked to q[256] (0..15).
HWY_INLINE float SuperBlockDot(const BlockQ4_K& w, const uint8_t sm[16], const int8_t* q,
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

void MatmulRowsQ4K(const MatmulArgs& a, int64_t b, int64_t e) {
#if HINGE_SIMD_AVX2_PLUS && HINGE_SIMD_VNNI
  if (cpu_has_avx512_vnni() && a.x_min_sums != nullptr) return MatmulRowsQ4KVnni(a, b, e);
#endif
  MatmulRowsK<BlockQ4_K>(a, b, e);
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
HWY_EXPORT(MatmulRowsQ6K);

void matmul_rows_q4_k(const MatmulArgs& a, int64_t b, int64_t e) {
  HWY_DYNAMIC_DISPATCH(MatmulRowsQ4K)(a, b, e);
}
void matmul_rows_q6_k(const MatmulArgs& a, int64_t b, int64_t e) {
  HWY_DYNAMIC_DISPATCH(MatmulRowsQ6K)(a, b, e);
}

}  // namespace hinge::kernels
#endif  // HWY_ONCE
