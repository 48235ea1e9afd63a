// The 16-row-group layout (PackedLayout::kAmxTiles, "row-groups") of Q4_0, Q8_0 and Q4_K on AVX2,
// for CPUs without AVX-512 (AMD Zen 3 and Zen 2, Intel client cores): the same packed copy and
// the same activation tiles as the AMX / AVX-512 VNNI kernels (matmul_amx.cpp), read in 8-row
// halves.
//
// A tile row of a (group, block) tile holds 4 consecutive weights of each of the 16 rows, so a
// 256-bit half holds 8 rows x 4 weights: vpmaddubsw with the token's 4 activations broadcast
// gives row n's two pair sums in i16 lanes 2n and 2n + 1, the 8 tile rows of the block add up
// in i16 (nibbles 0..15 times |x| <= 127: at most 8 * 2 * 15 * 127 = 30480, no saturation), and
// one vpmaddwd by ones leaves row n's exact block dot product in i32 lane n: no horizontal sums,
// and per block and 8 rows one vpmaddwd, one conversion and one FMA instead of one of each per
// row as in the GGUF-layout kernel (matmul_q8.cpp). The integer dots equal the VNNI path's and
// the f32 operations are ScaleBlock's lane for lane, so results are bit-identical to it.
// Q8_0 (GroupQ8) reads the same way with |w| and sign(x, w) in place of the nibbles and x;
// Q4_K (GroupQ4K) as Q4_0 per 32-element sub-block, scaled once per super-block. Q5_K and Q6_K
// (matmul_rowgroups_q56k_avx2-inl.h, which only this file runs) end each super-block with the
// scalar references' exact integers and f32 operations.
//
// Measured on an AMD EPYC Zen 3 (docs/kernels.md); chosen by calibration (kernel_choice.h).
#include <cstdint>
#include <cstring>

#include "kernels/cpu_features.h"
#include "kernels/matmul_kernels.h"
#include "kernels/matmul_packed.h"
#include "kernels/prefetch_plan.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define HINGE_RG_AVX2_COMPILED 1
#include <immintrin.h>
#else
#define HINGE_RG_AVX2_COMPILED 0
#endif

namespace hinge::kernels {

#if HINGE_RG_AVX2_COMPILED
namespace {

#define HINGE_RG_ATTR __attribute__((target("avx2,fma,f16c")))
#define HINGE_RG_INLINE inline __attribute__((always_inline)) HINGE_RG_ATTR

constexpr int kMaxTokens = 4;              // tokens per pass over a group's weights

// Software prefetch of the weights, by measurement on AMD Zen 3 (hinge_kernel_bench
// --benchmark_filter='MatmulDecode/type:[012]/layout:1/threads:2', 2048 x 8192 streamed from
// DRAM, medians of 5 interleaved runs, GB/s):
//   Q8_0 into L1 (T0) 2 KiB (4 blocks) ahead: 24.1 / 26.3 against 19.0 / 21.2 without (1 KiB
//     21.6, 4 KiB 22.5, T1 8 / 16 KiB 22.0 / 21.6); llama-1b q8_0 decode end to end 23.4
//     against 19.4 tok/s, smollm-135m q8_0 133.6 against 116.2 (medians of 4 alternating
//     pairs, each pair faster with it).
//   Q4_0 into L1 2 KiB (8 blocks) ahead: first measured within noise (19.4-21.2 against
//     19.5-19.6), then on 2026-12-07 in 5 of 5 rounds faster: 22.4-27.7 (median 24.3) against
//     20.0-24.9 (21.4; T1 8 KiB 22.1-28.1, T1 4 KiB 22.6-23.6); end to end llama-1b q4_0 decode
//     36.1 / 30.0 / 36.7 / 38.8 -> 40.0 / 37.7 / 38.8 / 45.7 tok/s and smollm-135m q4_0 172 /
//     179 / 167 -> 193 / 196 / 240 (alternating pairs, each faster with it).
//   Q4_K into L1 2 KiB ahead: in the kernel bench every plan was slower (16.2-19.6 against
//     19.3-20.3; again 2026-12-07: T0 2 KiB 16.3-19.4, T1 8 KiB 17.6-19.7 against 18.4-21.2),
//     but end to end, after NibbleDots and the huge pages, llama-1b q4_k decode was faster with
//     T0 2 KiB in 12 of 14 alternating rounds (medians 39.9 / 36.4 against 36.1 / 34.0 tok/s).
// AMD with AVX-512 (Zen 4; there Q5_K and Q6_K run these row groups on their VNNI kernels,
// matmul_rowgroups_q56k_vnni.cpp): no software prefetch. With each block's parts contiguous
// (matmul_packed.h) the hardware prefetcher follows the stream: 2048 x 8192 from DRAM, 3
// interleaved runs, 2026-12-07, 1 / 2 threads: Q6_K 21.8-23.4 / 28.2-30.9 GB/s without, 19.3-19.5
// / 25.7-32.2 with T1 16 KiB ahead, 17.6-20.0 / 26.0-27.4 with T1 8 KiB; Q5_K 22.1-27.7 /
// 27.4-43.7 without, 17.1-18.5 / 20.3-28.0 with T1 16 KiB. (With the parts in separate regions,
// the layout before, the stream was 7 GB/s per core without software prefetch and T1 16 KiB
// was best: llama-1b q4_k decode, whose output matrix is Q6_K, 32.3 / 34.0 / 42.9 / 43.9 ->
// 39.3 / 41.7 / 46.9 / 43.8 tok/s against Zen 3's T0 4 KiB.) Zen 3's plan above was measured
// on that earlier layout.
// HINGE_RG_PREFETCH=none | t0:BYTES | t1:BYTES sets one plan for every type (A/B runs).
struct RgPrefetchPlan {
  Prefetch q8{0, 2048}, q4{0, 2048}, q4k{0, 2048}, q5k{0, 4096}, q6k{0, 4096};
};
inline const RgPrefetchPlan& GetRgPrefetchPlan() {
  static const RgPrefetchPlan plan = [] {
    RgPrefetchPlan p;
    const CpuIdentity& cpu = cpu_identity();
    if (cpu.vendor == CpuVendor::kAmd && cpu.avx512f) p.q5k = p.q6k = {-1, 0};
    if (const auto all = prefetch_from_env("HINGE_RG_PREFETCH"))
      p.q8 = p.q4 = p.q4k = p.q5k = p.q6k = *all;
    return p;
  }();
  return plan;
}

constexpr size_t kTokenBlockBytes = size_t{1} << 20;  // activation bytes per token block

// MT tokens' 32 activations (token m's at xq + m * 32) against a whole 256-byte nibble tile:
// token m's block dots minus off[m] of rows 0-7 in c[m][0..8), of rows 8-15 in c[m][8..16)
// (off: Q4_0's 8 * sum of the token's quants, the nibbles' offset; Q4_K none). Both 8-row halves
// are read together, so each 4-byte activation broadcast serves 16 rows (per half, each was
// broadcast twice: Q4_K decode on Zen 3, one core, 7-13% faster). Tile row r is the low nibbles
// of the tile's 64-byte chunk r % 4 (r < 4) or its high nibbles; a row's 8 pair sums add up in
// i16 exactly (nibbles 0..15 times |x| <= 127: every partial sum within +-30480).
template <int MT>
HINGE_RG_INLINE void NibbleDots(const uint8_t* t, const int8_t* xq, const int32_t* off,
                                int32_t (*c)[16]) {
  const __m256i low = _mm256_set1_epi8(0x0F);
  __m256i s[MT][2];
  for (int m = 0; m < MT; ++m) s[m][0] = s[m][1] = _mm256_setzero_si256();
  for (int r = 0; r < 4; ++r) {
    const __m256i v0 = _mm256_load_si256(reinterpret_cast<const __m256i*>(t + r * 64));
    const __m256i v1 = _mm256_load_si256(reinterpret_cast<const __m256i*>(t + r * 64 + 32));
    const __m256i w0l = _mm256_and_si256(v0, low);
    const __m256i w0h = _mm256_and_si256(_mm256_srli_epi16(v0, 4), low);
    const __m256i w1l = _mm256_and_si256(v1, low);
    const __m256i w1h = _mm256_and_si256(_mm256_srli_epi16(v1, 4), low);
    for (int m = 0; m < MT; ++m) {
      int32_t xl, xh;  // tile rows r and r + 4
      std::memcpy(&xl, xq + m * 32 + r * 4, 4);
      std::memcpy(&xh, xq + m * 32 + (r + 4) * 4, 4);
      const __m256i bl = _mm256_set1_epi32(xl), bh = _mm256_set1_epi32(xh);
      s[m][0] = _mm256_add_epi16(s[m][0], _mm256_maddubs_epi16(w0l, bl));
      s[m][1] = _mm256_add_epi16(s[m][1], _mm256_maddubs_epi16(w1l, bl));
      s[m][0] = _mm256_add_epi16(s[m][0], _mm256_maddubs_epi16(w0h, bh));
      s[m][1] = _mm256_add_epi16(s[m][1], _mm256_maddubs_epi16(w1h, bh));
    }
  }
  const __m256i ones = _mm256_set1_epi16(1);
  for (int m = 0; m < MT; ++m) {
    const __m256i o = off != nullptr ? _mm256_set1_epi32(off[m]) : _mm256_setzero_si256();
    _mm256_store_si256(reinterpret_cast<__m256i*>(c[m]),
                       _mm256_sub_epi32(_mm256_madd_epi16(s[m][0], ones), o));
    _mm256_store_si256(reinterpret_cast<__m256i*>(c[m] + 8),
                       _mm256_sub_epi32(_mm256_madd_epi16(s[m][1], ones), o));
  }
}

// ScaleBlock's arithmetic for one block of MT tokens: acc += f32(dot) * (d_w * d_x), per lane.
// c[m]: token m's 16 dots; wd: the block's 16 f16 row scales; xs: the tokens' scales.
template <int MT>
HINGE_RG_INLINE void ScaleBlockAvx2(const int32_t (*c)[16], const uint16_t* wd, const float* xs,
                                    __m256 (*acc)[2]) {
  for (int h = 0; h < 2; ++h) {
    const __m256 dw =
        _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(wd + h * 8)));
    for (int m = 0; m < MT; ++m) {
      const __m256 s = _mm256_mul_ps(dw, _mm256_set1_ps(xs[m]));
      acc[m][h] = _mm256_fmadd_ps(
          _mm256_cvtepi32_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(c[m] + h * 8))),
          s, acc[m][h]);
    }
  }
}

// The kernel call CALL(k, XS) for n = k (1..kMaxTokens) tokens, the activations read compact
// (XS = n, FewTokens' copy) or in a token tile's layout (XS = 16).
#define HINGE_RG_TOKEN_CASES(CALL)        \
  switch (n) {                            \
    case 4:                               \
      compact ? CALL(4, 4) : CALL(4, 16); \
      break;                              \
    case 3:                               \
      compact ? CALL(3, 3) : CALL(3, 16); \
      break;                              \
    case 2:                               \
      compact ? CALL(2, 2) : CALL(2, 16); \
      break;                              \
    default:                              \
      compact ? CALL(1, 1) : CALL(1, 16); \
      break;                              \
  }

template <int MT>
HINGE_RG_INLINE void StoreAcc(__m256 (*acc)[2], float* out) {
  for (int m = 0; m < MT; ++m) {
    _mm256_storeu_ps(out + m * 16, acc[m][0]);
    _mm256_storeu_ps(out + m * 16 + 8, acc[m][1]);
  }
}

// One pass of MT <= kMaxTokens tokens over row group g: out[m * 16 + n] = <row 16g + n, token m>.
// xq: block j of token m at (j * XS + m) * 32 (XS 16: the AMX "A" tile order; XS = MT: the
// compact copy of FewTokens); xs: its scale at j * XS + m; sums[m][j]: sum of token m's quants
// in block j.
template <int MT, int XS>
HINGE_RG_INLINE void GroupQ4(const PackedMatrix& p, int64_t g, const int8_t* xq, const float* xs,
                             const int32_t* const* sums, const Prefetch& pf, float* out) {
  const int64_t nb = p.nb;
  const uint8_t* wq = p.qs.get() + static_cast<size_t>(g) * p.qs_row_bytes;
  const uint16_t* wd = p.d.get() + g * nb * 16;
  __m256 acc[MT][2];
  for (int m = 0; m < MT; ++m) acc[m][0] = acc[m][1] = _mm256_setzero_ps();
  for (int64_t j = 0; j < nb; ++j) {
    prefetch_lines(wq + j * 256 + pf.bytes, 256, pf.hint);
    // The dots go through c and are scaled after both halves (as ScaleBlock does): scaling
    // inside the token loop kept dw and the 2 * MT accumulators live next to the 8 weight
    // vectors, past AVX2's 16 registers (llama-1b q4_0 prefill of 128 tokens over the gguf
    // layout's, 3 alternating pairs on Zen 3: 1.39-1.80x fused, 1.79-2.02x this way).
    alignas(32) int32_t c[MT][16];
    int32_t off[MT];
    for (int m = 0; m < MT; ++m) off[m] = 8 * sums[m][j];
    NibbleDots<MT>(wq + j * 256, xq + j * XS * 32, off, c);
    ScaleBlockAvx2<MT>(c, wd + j * 16, xs + j * XS, acc);
  }
  StoreAcc<MT>(acc, out);
}

// Q8_0: the same pass with 8-bit weights. vpmaddubsw needs one unsigned operand and its pair
// sums must fit i16, so the weights go in as |w| (vpabsb, once per tile row and half, for all
// the tokens) and the activations as sign(x, w) (vpsignb, per token): |w| * |x| <= 128 * 127,
// a pair at most 32512, exact for every quant -128..127 (activations are -127..127). Two pair
// sums can pass i16, so each tile row goes to i32 at once (vpmaddwd by ones). kU8: the packed
// copy holds q + 128 (p.u8_quants, the VNNI form), flipped back to q with one xor. XS as in
// GroupQ4.
template <int MT, bool kU8, int XS>
HINGE_RG_INLINE void GroupQ8(const PackedMatrix& p, int64_t g, const int8_t* xq, const float* xs,
                             const Prefetch& pf, float* out) {
  const int64_t nb = p.nb;
  const uint8_t* wq = p.qs.get() + static_cast<size_t>(g) * p.qs_row_bytes;
  const uint16_t* wd = p.d.get() + g * nb * 16;
  const __m256i flip = _mm256_set1_epi8(static_cast<char>(0x80));
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 acc[MT][2];
  for (int m = 0; m < MT; ++m) acc[m][0] = acc[m][1] = _mm256_setzero_ps();
  for (int64_t j = 0; j < nb; ++j) {
    const uint8_t* t = wq + j * 512;
    prefetch_lines(t + pf.bytes, 512, pf.hint);
    alignas(32) int32_t c[MT][16];
    for (int h = 0; h < 2; ++h) {
      __m256i dot[MT];
      for (int m = 0; m < MT; ++m) dot[m] = _mm256_setzero_si256();
      // Two tile rows at a time: unrolled over all 8, GCC loads every row first and spills the
      // dot vectors (Zen 3, one core, Q8_0 prefill of 512 tokens over 2048 x 8192: 65 GOP/s
      // fully unrolled, 80 this way, 60 not unrolled).
#pragma GCC unroll 2
      for (int r = 0; r < 8; ++r) {
        __m256i w = _mm256_load_si256(reinterpret_cast<const __m256i*>(t + r * 64 + h * 32));
        if constexpr (kU8) w = _mm256_xor_si256(w, flip);
        const __m256i aw = _mm256_abs_epi8(w);
        for (int m = 0; m < MT; ++m) {
          int32_t x4;
          std::memcpy(&x4, xq + (j * XS + m) * 32 + r * 4, 4);
          const __m256i sx = _mm256_sign_epi8(_mm256_set1_epi32(x4), w);
          dot[m] = _mm256_add_epi32(dot[m], _mm256_madd_epi16(_mm256_maddubs_epi16(aw, sx), ones));
        }
      }
      for (int m = 0; m < MT; ++m)
        _mm256_store_si256(reinterpret_cast<__m256i*>(c[m] + h * 8), dot[m]);
    }
    ScaleBlockAvx2<MT>(c, wd + j * 16, xs + j * XS, acc);
  }
  StoreAcc<MT>(acc, out);
}

// 8 bytes (u8) as 8 floats.
HINGE_RG_INLINE __m256 Bytes8(const uint8_t* b) {
  return _mm256_cvtepi32_ps(
      _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(b))));
}

// Q4_K: per super-block, each of the 8 sub-block tiles as GroupQ4's blocks (nibbles 0..15, no
// offset: the mins enter through the sub-block sums), then ScaleSuperBlockQ4K's arithmetic
// lane for lane: t = sum over j of f32(c_j) * (d * sc_j) - (dmin * m_j) * bsum_j, then
// acc += t * d_x. xq: sub-block s of token m at (s * XS + m) * 32; xs: [nb, XS] super-block
// scales; xbs: [nb * 8, XS] sub-block sums (XS as in GroupQ4).
template <int MT, int XS>
HINGE_RG_INLINE void GroupQ4K(const PackedMatrix& p, int64_t g, const int8_t* xq, const float* xs,
                              const float* xbs, const Prefetch& pf, float* out) {
  const uint8_t* wq = p.qs.get() + static_cast<size_t>(g) * p.qs_row_bytes;
  __m256 acc[MT][2];
  for (int m = 0; m < MT; ++m) acc[m][0] = acc[m][1] = _mm256_setzero_ps();
  alignas(32) int32_t c[8][MT][16];
  for (int64_t sb = 0; sb < p.nb; ++sb) {
    const uint8_t* base = wq + static_cast<size_t>(sb) * kPackedQ4KSuperBytes;
    prefetch_lines(base + pf.bytes + 8 * 256, kPackedQ4KSuperBytes - 8 * 256, pf.hint);
    for (int j = 0; j < 8; ++j) {
      const uint8_t* t = base + j * 256;
      prefetch_lines(t + pf.bytes, 256, pf.hint);
      NibbleDots<MT>(t, xq + (sb * 8 + j) * XS * 32, nullptr, c[j]);
    }
    const uint8_t* meta = base + 8 * 256;  // sc[8][16], m[8][16], d[16], dmin[16]
    for (int h = 0; h < 2; ++h) {
      const __m256 d = _mm256_cvtph_ps(
          _mm_loadu_si128(reinterpret_cast<const __m128i*>(meta + 256 + h * 16)));
      const __m256 dmin = _mm256_cvtph_ps(
          _mm_loadu_si128(reinterpret_cast<const __m128i*>(meta + 288 + h * 16)));
      // Each sub-block's scale products once, in registers, for every token's chain (they
      // went through a small array when tokens were the outer loop: one-token decode 9-11%
      // faster on Zen 3 without it). Per token the same operations in the same order.
      __m256 t[MT];
      for (int m = 0; m < MT; ++m) t[m] = _mm256_setzero_ps();
      for (int j = 0; j < 8; ++j) {
        const __m256 dsc = _mm256_mul_ps(d, Bytes8(meta + j * 16 + h * 8));
        const __m256 dmv = _mm256_mul_ps(dmin, Bytes8(meta + 128 + j * 16 + h * 8));
        for (int m = 0; m < MT; ++m) {
          const __m256 cj = _mm256_cvtepi32_ps(
              _mm256_load_si256(reinterpret_cast<const __m256i*>(c[j][m] + h * 8)));
          t[m] = _mm256_fmadd_ps(cj, dsc, t[m]);
          t[m] = _mm256_fnmadd_ps(dmv, _mm256_set1_ps(xbs[(sb * 8 + j) * XS + m]), t[m]);
        }
      }
      for (int m = 0; m < MT; ++m)
        acc[m][h] = _mm256_fmadd_ps(t[m], _mm256_set1_ps(xs[sb * XS + m]), acc[m][h]);
    }
  }
  StoreAcc<MT>(acc, out);
}

HINGE_RG_ATTR void GroupTokensQ4K(const PackedMatrix& p, int64_t g, int n, bool compact,
                                  const int8_t* xq, const float* xs, const float* xbs,
                                  const Prefetch& pf, float* out) {
#define HINGE_RG_CALL(k, xs_) GroupQ4K<k, xs_>(p, g, xq, xs, xbs, pf, out)
  HINGE_RG_TOKEN_CASES(HINGE_RG_CALL)
#undef HINGE_RG_CALL
}

#include "kernels/matmul_rowgroups_q56k_avx2-inl.h"  // GroupTokensQ56K

template <bool kU8>
HINGE_RG_ATTR void GroupTokensQ8(const PackedMatrix& p, int64_t g, int n, bool compact,
                                 const int8_t* xq, const float* xs, const Prefetch& pf, float* out) {
#define HINGE_RG_CALL(k, xs_) GroupQ8<k, kU8, xs_>(p, g, xq, xs, pf, out)
  HINGE_RG_TOKEN_CASES(HINGE_RG_CALL)
#undef HINGE_RG_CALL
}

// Q8_0 and Q4_0; plan: the prefetch of each (none for prefill, matmul_rows_rowgroups_avx2).
HINGE_RG_ATTR void GroupTokens(const PackedMatrix& p, int64_t g, int n, bool compact,
                               const int8_t* xq, const float* xs, const int32_t* const* sums,
                               const RgPrefetchPlan& plan, float* out) {
  if (p.type == GgmlType::Q8_0) {
    if (p.u8_quants)
      GroupTokensQ8<true>(p, g, n, compact, xq, xs, plan.q8, out);
    else
      GroupTokensQ8<false>(p, g, n, compact, xq, xs, plan.q8, out);
    return;
  }
#define HINGE_RG_CALL(k, xs_) GroupQ4<k, xs_>(p, g, xq, xs, sums, plan.q4, out)
  HINGE_RG_TOKEN_CASES(HINGE_RG_CALL)
#undef HINGE_RG_CALL
}

// Decode (at most kMaxTokens tokens): the activations copied once per call into [block][n]
// order, where a token tile's layout had each token's block and scale on cache lines of their
// own (matmul_amx.cpp, VnniFewTokens, says why that costs), and every kernel reads them with
// XS = n. vnni: Q5_K / Q6_K on their AVX-512 VNNI kernels.
void FewTokens(const AmxArgs& a, int64_t g0, int64_t g1, int64_t row_end, bool vnni,
               const RgPrefetchPlan& plan) {
  const PackedMatrix& p = *a.w;
  const bool q4k = p.type == GgmlType::Q4_K, q5k = p.type == GgmlType::Q5_K,
             q6k = p.type == GgmlType::Q6_K;
  const int n = static_cast<int>(a.num_tokens);
  const int64_t nsub = packed_super_bytes(p.type) != 0 ? p.nb * 8 : p.nb;  // 32-element blocks
  const size_t x_bytes = static_cast<size_t>(nsub) * n * 32;
  const size_t xs_bytes = static_cast<size_t>(p.nb) * n * sizeof(float);
  // Q4_K: a float sub-block sum per (sub-block, token); Q5_K / Q6_K: 16 i16 bsums per
  // (super-block, token).
  const size_t extra_bytes = q4k ? static_cast<size_t>(nsub) * n * sizeof(float)
                             : (q5k || q6k) ? static_cast<size_t>(p.nb) * n * 16 * 2
                                            : 0;
  auto* buf = static_cast<uint8_t*>(kernel_thread_buffer(x_bytes + xs_bytes + extra_bytes));
  auto* xq = reinterpret_cast<int8_t*>(buf);
  auto* xs = reinterpret_cast<float*>(buf + x_bytes);
  uint8_t* extra = buf + x_bytes + xs_bytes;
  for (int64_t j = 0; j < nsub; ++j)
    for (int m = 0; m < n; ++m) std::memcpy(xq + (j * n + m) * 32, a.x + (j * 16 + m) * 32, 32);
  for (int64_t b = 0; b < p.nb; ++b)
    for (int m = 0; m < n; ++m) xs[b * n + m] = a.x_scales[b * 16 + m];
  auto* xms = reinterpret_cast<float*>(extra);
  auto* xbs = reinterpret_cast<int16_t*>(extra);
  if (q4k) {
    for (int64_t j = 0; j < nsub; ++j)
      for (int m = 0; m < n; ++m) xms[j * n + m] = a.x_min_sums[j * 16 + m];
  } else if (q5k || q6k) {
    for (int64_t sb = 0; sb < p.nb; ++sb)
      for (int m = 0; m < n; ++m)
        std::memcpy(xbs + (sb * n + m) * 16, a.x_bsums + (sb * 16 + m) * 16, 32);
  }
  const int32_t* sums[kMaxTokens];
  for (int m = 0; m < n; ++m) sums[m] = a.x_sums + m * p.nb;
  alignas(32) float out[kMaxTokens * 16];
  for (int64_t g = g0; g < g1; ++g) {
    if (q5k || q6k) {
      const Prefetch& pf = q6k ? plan.q6k : plan.q5k;
      if (vnni)
        group_tokens_q56k_vnni(p, g, n, /*compact=*/true, xq, xs, xbs, pf, out);
      else
        GroupTokensQ56K(p, g, n, true, xq, xs, xbs, pf, out);
    } else if (q4k) {
      GroupTokensQ4K(p, g, n, true, xq, xs, xms, plan.q4k, out);
    } else {
      GroupTokens(p, g, n, true, xq, xs, sums, plan, out);
    }
    const int64_t r0 = g * 16;
    const int64_t n_valid = row_end - r0 < 16 ? row_end - r0 : 16;
    for (int m = 0; m < n; ++m) {
      float* dst = a.y + m * a.y_stride + r0;
      if (n_valid == 16)
        std::memcpy(dst, out + m * 16, 16 * sizeof(float));
      else
        std::memcpy(dst, out + m * 16, static_cast<size_t>(n_valid) * sizeof(float));
    }
  }
}

}  // namespace

bool rowgroups_avx2_usable(GgmlType type) {
  static const bool cpu = cpu_identity().avx2_fma && cpu_identity().f16c;
  return (type == GgmlType::Q4_0 || type == GgmlType::Q8_0 || type == GgmlType::Q4_K ||
          type == GgmlType::Q5_K || type == GgmlType::Q6_K) &&
         cpu;
}

void matmul_rows_rowgroups_avx2(const AmxArgs& a, int64_t row_begin, int64_t row_end) {
  const PackedMatrix& p = *a.w;
  const bool q4k = p.type == GgmlType::Q4_K, q5k = p.type == GgmlType::Q5_K,
             q6k = p.type == GgmlType::Q6_K;
  // Q5_K and Q6_K on AVX-512 VNNI where it runs: the same results
  // (matmul_rowgroups_q56k_vnni.cpp).
  const bool vnni = (q5k || q6k) && q56k_vnni_kernel_compiled() && cpu_has_avx512_vnni();
  // 32-element blocks per row (the k-quants' nb counts super-blocks)
  const int64_t nsub = packed_super_bytes(p.type) != 0 ? p.nb * 8 : p.nb;
  const int64_t tiles = (a.num_tokens + 15) / 16;
  const size_t tile_bytes = static_cast<size_t>(nsub) * 512;  // one token tile's activations
  int64_t tb = static_cast<int64_t>(kTokenBlockBytes / tile_bytes);
  if (tb < 1) tb = 1;
  const int64_t g0 = row_begin / 16, g1 = (row_end + 15) / 16;
  // Prefetch only where the weights stream once (decode, up to 4 tokens): prefill reads each
  // group's weights once per 4 tokens, from the caches after the first (llama-1b q8_0 prefill of
  // 128 tokens was 59-76 tok/s with the Q8_0 prefetch against 65-71 without).
  static const RgPrefetchPlan kNone{{-1, 0}, {-1, 0}, {-1, 0}, {-1, 0}, {-1, 0}};
  const RgPrefetchPlan& plan = a.num_tokens <= kMaxTokens ? GetRgPrefetchPlan() : kNone;
  if (a.num_tokens <= kMaxTokens) {
    FewTokens(a, g0, g1, row_end, vnni, plan);
    return;
  }
  alignas(32) float out[16 * 16];
  for (int64_t t0 = 0; t0 < tiles; t0 += tb) {
    const int64_t t1 = t0 + tb < tiles ? t0 + tb : tiles;
    for (int64_t g = g0; g < g1; ++g) {
      const int64_t r0 = g * 16;
      const int64_t n_valid = row_end - r0 < 16 ? row_end - r0 : 16;
      for (int64_t tt = t0; tt < t1; ++tt) {
        const int8_t* xq = a.x + static_cast<size_t>(tt * nsub) * 512;
        const float* xs = a.x_scales + tt * p.nb * 16;
        const int64_t left = a.num_tokens - tt * 16;
        const int mt = static_cast<int>(left < 16 ? left : 16);
        for (int m0 = 0; m0 < mt; m0 += kMaxTokens) {
          const int n = mt - m0 < kMaxTokens ? mt - m0 : kMaxTokens;
          if (q6k || q5k) {
            const int16_t* xbs = a.x_bsums + (tt * p.nb * 16 + m0) * 16;
            const Prefetch& pf = q6k ? plan.q6k : plan.q5k;
            if (vnni)
              group_tokens_q56k_vnni(p, g, n, false, xq + m0 * 32, xs + m0, xbs, pf, out);
            else
              GroupTokensQ56K(p, g, n, false, xq + m0 * 32, xs + m0, xbs, pf, out);
          } else if (q4k) {
            GroupTokensQ4K(p, g, n, false, xq + m0 * 32, xs + m0,
                           a.x_min_sums + tt * nsub * 16 + m0, plan.q4k, out);
          } else {
            const int32_t* sums[kMaxTokens];
            for (int m = 0; m < n; ++m) sums[m] = a.x_sums + (tt * 16 + m0 + m) * p.nb;
            GroupTokens(p, g, n, false, xq + m0 * 32, xs + m0, sums, plan, out);
          }
          // A whole group's 16 outputs as a fixed-size copy (two vector stores): a copy of
          // n_valid floats is a libc call per group and token (1% of smollm-135m's decode).
          for (int m = 0; m < n; ++m) {
            float* dst = a.y + (tt * 16 + m0 + m) * a.y_stride + r0;
            if (n_valid == 16)
              std::memcpy(dst, out + m * 16, 16 * sizeof(float));
            else
              std::memcpy(dst, out + m * 16, static_cast<size_t>(n_valid) * sizeof(float));
          }
        }
      }
    }
  }
}

#else

bool rowgroups_avx2_usable(GgmlType /*type*/) { return false; }
void matmul_rows_rowgroups_avx2(const AmxArgs& /*a*/, int64_t /*row_begin*/, int64_t /*row_end*/) {}

#endif

}  // namespace hinge::kernels
