// Q5_K and Q6_K row groups (PackedLayout::kAmxTiles, matmul_packed.h) on AVX-512 VNNI: the
// same exact integer sums as the AVX2 kernels (matmul_rowgroups_q56k_avx2-inl.h) and the same
// f32 operations, so the results are bit-identical to vec_dot_q{5,6}_k_q8_k_ref and to the AVX2
// kernels: which one runs never shows in a result (AVX2 where VNNI is absent or switched off,
// HINGE_DISABLE_VNNI=1).
//
// A 512-bit vector holds one tile row of a 16-row group: lane n = row n, its 4 consecutive
// columns as bytes. Q6_K, per 32-column block b of a super-block (its parts contiguous, read
// front to back):
//   values   the nibble tile's byte rows tr = 0..3 hold tile row tr (low nibbles) and tr + 4
//            (high nibbles); the 2-bit planes' 64-byte rows rp = 0, 1 hold, per byte, the top
//            bits of tile rows 2rp, 2rp + 4, 2rp + 1, 2rp + 5 (bits 0-1, 2-3, 4-5, 6-7), rows
//            0-7 then 8-15 in the same byte order as a tile row. So a tile row is
//            (nibble & 0x0F) | (plane shifted & 0x30): values 0..63, vpdpbusd's unsigned
//            operand, with the token's 4 activations of that tile row broadcast.
//   sums     tile rows 0-3 are sub-block 2b, 4-7 sub-block 2b + 1: each a fresh vpdpbusd chain
//            of 4 (at most 16 * 63 * 127 = 128016 per lane), multiplied by the row's sub-block
//            scale (vpmulld) and added to the super-block's i32 sum.
//   offset   sum_j sc_j * bsum_j: vpdpwssd of the rows' scale pairs (sc[2b], sc[2b + 1]) by the
//            token's bsum pair; the super-block's sum is isum - 32 * offset (exact integers).
// Per super-block: acc += (d * d_x) * f32(sum), each product rounded before the sum (the
// reference's operations; an empty asm stops GCC's default -ffp-contract=fast from fusing them).
// Q5_K likewise per sub-block of 32 columns (GroupQ5KVnni).
//
// Why: on AMD Zen 4 the AVX2 kernels were compute-bound below one core's read bandwidth (Q6_K
// 28 GB/s on a matrix in L3, Q5_K 19, against 27-29 GB/s streamed by `hinge bench --membw
// -t 1`); vpdpbusd does vpmaddubsw + vpmaddwd + vpaddd's work in one instruction.
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/matmul_kernels.h"
#include "kernels/matmul_packed.h"
#include "kernels/prefetch_plan.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define HINGE_Q56K_VNNI_COMPILED 1
#include <immintrin.h>
#else
#define HINGE_Q56K_VNNI_COMPILED 0
#endif

namespace hinge::kernels {

#if HINGE_Q56K_VNNI_COMPILED

#define HINGE_Q56V_ATTR \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,f16c")))
#define HINGE_Q56V_INLINE inline __attribute__((always_inline)) HINGE_Q56V_ATTR

namespace {

// (a & 0x0F) | b, b already masked to bits 4-5: vpternlogd's A & C | B (0xEC).
HINGE_Q56V_INLINE __m512i MergeTop(__m512i a, __m512i b) {
  return _mm512_ternarylogic_epi32(a, b, _mm512_set1_epi8(0x0F), 0xEC);
}

// Block b's 8 tile rows as values 0..63 (t: its nibble tile, hb: its 128 bytes of 2-bit planes;
// a Q6_K group is 32-byte aligned, so unaligned loads).
HINGE_Q56V_INLINE void Q6KTileRows(const uint8_t* t, const uint8_t* hb, __m512i* w) {
  const __m512i top = _mm512_set1_epi8(0x30);
  for (int rp = 0; rp < 2; ++rp) {
    const __m512i h = _mm512_loadu_si512(hb + rp * 64);
    const __m512i n0 = _mm512_loadu_si512(t + (2 * rp) * 64);
    const __m512i n1 = _mm512_loadu_si512(t + (2 * rp + 1) * 64);
    // Bits 0-1, 2-3, 4-5, 6-7 of the plane: tile rows 2rp, 2rp + 4, 2rp + 1, 2rp + 5.
    w[2 * rp] = MergeTop(n0, _mm512_and_si512(_mm512_slli_epi16(h, 4), top));
    w[2 * rp + 4] =
        MergeTop(_mm512_srli_epi16(n0, 4), _mm512_and_si512(_mm512_slli_epi16(h, 2), top));
    w[2 * rp + 1] = MergeTop(n1, _mm512_and_si512(h, top));
    w[2 * rp + 5] =
        MergeTop(_mm512_srli_epi16(n1, 4), _mm512_and_si512(_mm512_srli_epi16(h, 2), top));
  }
}

// The 4 activations of tile row r of a token's block (x: its 32 quants), broadcast.
HINGE_Q56V_INLINE __m512i Bcast4(const int8_t* x, int r) {
  int32_t v;
  std::memcpy(&v, x + r * 4, 4);
  return _mm512_set1_epi32(v);
}

// One pass of MT <= 4 tokens over row group g (the arguments of GroupQ6K, AVX2). XS: token
// slots per block in xq, xs and xbs: 16 (a token tile's layout) or MT (compact).
template <int MT, int XS>
HINGE_Q56V_INLINE void GroupQ6KVnni(const PackedMatrix& p, int64_t g, const int8_t* xq,
                                    const float* xs, const int16_t* xbs, const Prefetch& pf,
                                    float* out) {
  const uint8_t* wq = p.qs.get() + static_cast<size_t>(g) * p.qs_row_bytes;
  __m512 acc[MT];
  for (int m = 0; m < MT; ++m) acc[m] = _mm512_setzero_ps();
  for (int64_t sb = 0; sb < p.nb; ++sb) {
    const uint8_t* base = wq + static_cast<size_t>(sb) * kPackedQ6KSuperBytes;
    prefetch_lines(base + pf.bytes, kPackedQ6KSuperBytes, pf.hint);
    const int8_t* xsb = xq + sb * 8 * XS * 32;
    // isum: sum over sub-blocks of sc_j * <q_j, x_j>; off: sum of sc_j * bsum_j.
    __m512i isum[MT], off[MT];
    for (int m = 0; m < MT; ++m) isum[m] = off[m] = _mm512_setzero_si512();
    for (int b = 0; b < 8; ++b) {
      const uint8_t* blk = base + b * kPackedQ6KBlockBytes;  // tile, high bits, scale pairs
      __m512i w[8];
      Q6KTileRows(blk, blk + kPackedQ6KHigh, w);
      const __m512i pair = _mm512_cvtepi8_epi16(
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + kPackedQ6KPairs)));
      const __m512i s_lo = _mm512_srai_epi32(_mm512_slli_epi32(pair, 16), 16);  // sc[2b]
      const __m512i s_hi = _mm512_srai_epi32(pair, 16);                         // sc[2b + 1]
      for (int m = 0; m < MT; ++m) {
        const int8_t* x = xsb + (b * XS + m) * 32;
        __m512i lo = _mm512_dpbusd_epi32(_mm512_setzero_si512(), w[0], Bcast4(x, 0));
        __m512i hi = _mm512_dpbusd_epi32(_mm512_setzero_si512(), w[4], Bcast4(x, 4));
        for (int r = 1; r < 4; ++r) {
          lo = _mm512_dpbusd_epi32(lo, w[r], Bcast4(x, r));
          hi = _mm512_dpbusd_epi32(hi, w[r + 4], Bcast4(x, r + 4));
        }
        isum[m] = _mm512_add_epi32(
            isum[m], _mm512_add_epi32(_mm512_mullo_epi32(lo, s_lo), _mm512_mullo_epi32(hi, s_hi)));
        int32_t bsum2;
        std::memcpy(&bsum2, xbs + (sb * XS + m) * 16 + 2 * b, 4);
        off[m] = _mm512_dpwssd_epi32(off[m], pair, _mm512_set1_epi32(bsum2));
      }
    }
    const __m512 d =
        _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(base + kPackedQ6KD)));
    for (int m = 0; m < MT; ++m) {
      const __m512i sum = _mm512_sub_epi32(isum[m], _mm512_slli_epi32(off[m], 5));
      __m512 prod =
          _mm512_mul_ps(_mm512_mul_ps(d, _mm512_set1_ps(xs[sb * XS + m])), _mm512_cvtepi32_ps(sum));
      __asm__("" : "+v"(prod));
      acc[m] = _mm512_add_ps(acc[m], prod);
    }
  }
  for (int m = 0; m < MT; ++m) _mm512_storeu_ps(out + m * 16, acc[m]);
}

// Q5_K sub-block j's 8 tile rows as values 0..31 (t: its nibble tile; f: its 64 bytes of fifth
// bits, bit 4rp + k of a byte = tile row 2rp, 2rp + 4, 2rp + 1, 2rp + 5 for k = 0..3).
HINGE_Q56V_INLINE void Q5KTileRows(const uint8_t* t, const uint8_t* fb, __m512i* w) {
  const __m512i bit4 = _mm512_set1_epi8(0x10);
  const __m512i f = _mm512_loadu_si512(fb);
  // Tile row r's fifth bit sits at bit kBit[r]; moved to bit 4 (16-bit shifts, then masked).
  constexpr int kBit[8] = {0, 2, 4, 6, 1, 3, 5, 7};
  for (int tr = 0; tr < 4; ++tr) {
    const __m512i n = _mm512_loadu_si512(t + tr * 64);
    for (int half = 0; half < 2; ++half) {
      const int r = tr + 4 * half, sh = 4 - kBit[r];
      const __m512i fr = sh >= 0 ? _mm512_slli_epi16(f, static_cast<unsigned>(sh))
                                 : _mm512_srli_epi16(f, static_cast<unsigned>(-sh));
      w[r] = MergeTop(half == 0 ? n : _mm512_srli_epi16(n, 4), _mm512_and_si512(fr, bit4));
    }
  }
}

// Q5_K: per super-block the reference's exact integers per row, sumi = sum over sub-blocks j of
// sc_j * <q_j, x_j> (a vpdpbusd chain of 8 tile rows, at most 32 * 31 * 127 = 125984 per lane,
// times sc_j by vpmulld) and summs = sum of m_j * (the token's two bsums of sub-block j)
// (vpdpwssd of (m_j, m_j) per row by the bsum pair); then (d * d_x) * f32(sumi) -
// (dmin * d_x) * f32(summs), rounded as vec_dot_q5_k_q8_k_ref (the AVX2 kernel's operations).
// XS as in GroupQ6KVnni.
template <int MT, int XS>
HINGE_Q56V_INLINE void GroupQ5KVnni(const PackedMatrix& p, int64_t g, const int8_t* xq,
                                    const float* xs, const int16_t* xbs, const Prefetch& pf,
                                    float* out) {
  const uint8_t* wq = p.qs.get() + static_cast<size_t>(g) * p.qs_row_bytes;
  __m512 acc[MT];
  for (int m = 0; m < MT; ++m) acc[m] = _mm512_setzero_ps();
  for (int64_t sb = 0; sb < p.nb; ++sb) {
    const uint8_t* base = wq + static_cast<size_t>(sb) * kPackedQ5KSuperBytes;
    prefetch_lines(base + pf.bytes, kPackedQ5KSuperBytes, pf.hint);
    const int8_t* xsb = xq + sb * 8 * XS * 32;
    __m512i sumi[MT], summs[MT];
    for (int m = 0; m < MT; ++m) sumi[m] = summs[m] = _mm512_setzero_si512();
    for (int j = 0; j < 8; ++j) {
      const uint8_t* sub = base + j * kPackedQ5KSubBytes;  // tile, fifth bits, sc, m
      const __m512i sc = _mm512_cvtepu8_epi32(
          _mm_loadu_si128(reinterpret_cast<const __m128i*>(sub + kPackedQ5KSc)));
      const __m512i m32 = _mm512_cvtepu8_epi32(
          _mm_loadu_si128(reinterpret_cast<const __m128i*>(sub + kPackedQ5KMin)));
      const __m512i mn = _mm512_or_si512(m32, _mm512_slli_epi32(m32, 16));  // (m_j, m_j)
      __m512i w[8];
      Q5KTileRows(sub, sub + kPackedQ5KFifth, w);
      for (int m = 0; m < MT; ++m) {
        const int8_t* x = xsb + (j * XS + m) * 32;
        __m512i d0 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), w[0], Bcast4(x, 0));
        __m512i d1 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), w[1], Bcast4(x, 1));
        for (int r = 2; r < 8; r += 2) {
          d0 = _mm512_dpbusd_epi32(d0, w[r], Bcast4(x, r));
          d1 = _mm512_dpbusd_epi32(d1, w[r + 1], Bcast4(x, r + 1));
        }
        sumi[m] = _mm512_add_epi32(sumi[m], _mm512_mullo_epi32(_mm512_add_epi32(d0, d1), sc));
        int32_t bsum2;
        std::memcpy(&bsum2, xbs + (sb * XS + m) * 16 + 2 * j, 4);
        summs[m] = _mm512_dpwssd_epi32(summs[m], mn, _mm512_set1_epi32(bsum2));
      }
    }
    const __m512 d =
        _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(base + kPackedQ5KD)));
    const __m512 dmin = _mm512_cvtph_ps(
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(base + kPackedQ5KD + 32)));
    for (int m = 0; m < MT; ++m) {
      const __m512 dx = _mm512_set1_ps(xs[sb * XS + m]);
      __m512 a = _mm512_mul_ps(_mm512_mul_ps(dx, d), _mm512_cvtepi32_ps(sumi[m]));
      __m512 b = _mm512_mul_ps(_mm512_mul_ps(dx, dmin), _mm512_cvtepi32_ps(summs[m]));
      __asm__("" : "+v"(a), "+v"(b));
      __m512 t = _mm512_sub_ps(a, b);
      __asm__("" : "+v"(t));
      acc[m] = _mm512_add_ps(acc[m], t);
    }
  }
  for (int m = 0; m < MT; ++m) _mm512_storeu_ps(out + m * 16, acc[m]);
}

// One pass of MT tokens over row group g with p.type's kernel.
template <int MT>
HINGE_Q56V_INLINE void GroupQ56KVnni(const PackedMatrix& p, int64_t g, bool compact,
                                     const int8_t* xq, const float* xs, const int16_t* xbs,
                                     const Prefetch& pf, float* out) {
  const bool q6k = p.type == GgmlType::Q6_K;
  if (compact) {
    if (q6k)
      GroupQ6KVnni<MT, MT>(p, g, xq, xs, xbs, pf, out);
    else
      GroupQ5KVnni<MT, MT>(p, g, xq, xs, xbs, pf, out);
  } else {
    if (q6k)
      GroupQ6KVnni<MT, 16>(p, g, xq, xs, xbs, pf, out);
    else
      GroupQ5KVnni<MT, 16>(p, g, xq, xs, xbs, pf, out);
  }
}

}  // namespace

HINGE_Q56V_ATTR void group_tokens_q56k_vnni(const PackedMatrix& p, int64_t g, int n, bool compact,
                                            const int8_t* xq, const float* xs, const int16_t* xbs,
                                            const Prefetch& pf, float* out) {
  switch (n) {
    case 4: GroupQ56KVnni<4>(p, g, compact, xq, xs, xbs, pf, out); break;
    case 3: GroupQ56KVnni<3>(p, g, compact, xq, xs, xbs, pf, out); break;
    case 2: GroupQ56KVnni<2>(p, g, compact, xq, xs, xbs, pf, out); break;
    default: GroupQ56KVnni<1>(p, g, compact, xq, xs, xbs, pf, out); break;
  }
}

bool q56k_vnni_kernel_compiled() { return true; }

#else

void group_tokens_q56k_vnni(const PackedMatrix&, int64_t, int, bool, const int8_t*, const float*,
                            const int16_t*, const Prefetch&, float*) {}
bool q56k_vnni_kernel_compiled() { return false; }

#endif

}  // namespace hinge::kernels
