// The AMX-INT8 matmul kernel for packed Q8_0 / Q4_0 / Q4_K weights (layout kAmxTiles,
// matmul_packed.h).
//
// Per (16 tokens, 16 rows, block of 32): one tdpbssd (A: the tokens' signed activation quants,
// B: the rows' signed weight quants, C: the 16 x 16 exact i32 block dot products), the C tile
// stored to L1, and per token one i32 -> f32 conversion and one FMA with d_w (16 rows, one
// vector) * d_x (the token's, broadcast). Q4_K uses tdpbsud (unsigned nibbles) per 32-element
// sub-block and scales in f32 once per super-block (ScaleSuperBlockQ4K).
//
// AMX has no 4-bit operand: Q4_0 / Q4_K tiles are unpacked to bytes first. With several token
// tiles per row group (prefill) a group's tiles are unpacked once per token block into a
// per-thread buffer (UnpackGroup) and shared by the token tiles; with one (batched decode) they
// are unpacked kUnpackAhead blocks ahead into an L1 ring. A tile load right after the stores
// that unpacked it waits for them.
//
// Blocks alternate between two sets of tiles (C0/A0/B0, C1/A1/B1) and two C buffers (TilePair),
// so the tile unit works on one block while the vector units scale the previous one. The 16 f32
// accumulators of a (token tile, row group) live in registers for the whole row.
//
// Token tiles of 1..4 tokens (decode) run on AVX-512 VNNI instead (GroupVnni*): the same exact
// i32 per (row, block) in the lanes of vpdpbusd, then the same f32 operations, so their results
// are bit-identical to the tile path's. Without AMX (a VNNI-only CPU such as AMD Zen 4, or
// HINGE_DISABLE_AMX=1) the layout still runs: every token tile goes through VNNI in chunks of 4
// tokens ("16-row groups on VNNI", kernels/kernel_choice.h).
//
// Cache blocking: tokens in blocks of ~1 MiB of activations (the L2 holds them while every row
// group of the chunk streams its weights once per token block); inside a block, each row
// group's weights (<= nb * 512 bytes) stay in L1/L2 across the token tiles.
//
// Batch invariance: every (token, row) output is the same sequence of f32 FMAs over the blocks
// in order, whatever the token tile, token block, batch size or path around it.
//
// Tile state: the tiles are configured at the start of every call that uses them (rows = the
// token count when it is below 16, else 16: a short last tile is zero-padded in x) and released
// at its end, so pool threads hold no tile state between matmuls. GCC on x86-64 only (target
// attributes); elsewhere amx_kernel_compiled() is false and matmul never calls it.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>

#include "kernels/amx_tile_config.h"
#include "kernels/cpu_features.h"
#include "kernels/matmul_kernels.h"
#include "kernels/matmul_packed.h"
#include "kernels/prefetch_plan.h"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define HINGE_AMX_COMPILED 1
#include <immintrin.h>
#else
#define HINGE_AMX_COMPILED 0
#endif

namespace hinge::kernels {

#if HINGE_AMX_COMPILED

#define HINGE_AMX_ATTR \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,f16c,fma,amx-tile,amx-int8")))
#define HINGE_AMX_INLINE inline __attribute__((always_inline)) HINGE_AMX_ATTR

namespace {

// Tiles: 0, 1: C (i32 results); 2, 3: A (activations); 4, 5: B (weights). Even blocks use
// 0/2/4, odd blocks 1/3/5.

HINGE_AMX_INLINE void Configure(int token_rows) {
  AmxTileConfig cfg;
  for (int c : {0, 1}) {
    cfg.rows[c] = static_cast<uint8_t>(token_rows);
    cfg.colsb[c] = 64;
  }
  for (int a : {2, 3}) {
    cfg.rows[a] = static_cast<uint8_t>(token_rows);
    cfg.colsb[a] = 32;
  }
  for (int b : {4, 5}) {
    cfg.rows[b] = 8;
    cfg.colsb[b] = 64;
  }
  _tile_loadconfig(&cfg);
}

// Two consecutive blocks of one token tile on the two tile sets: A tiles xa and xa + 512 (16
// rows of 32 bytes), B tiles w0 and w1 (8 rows of 64), their i32 products stored to c0 and c1
// (16 rows of 64 bytes). kSignedWeights: tdpbssd (Q8_0, Q4_0 as q - 8), else tdpbsud (Q4_K's
// unsigned nibbles).
template <bool kSignedWeights>
HINGE_AMX_INLINE void TilePair(const int8_t* xa, const void* w0, const void* w1, int32_t* c0,
                               int32_t* c1) {
  _tile_zero(0);
  _tile_zero(1);
  _tile_loadd(2, xa, 32);
  _tile_loadd(3, xa + 512, 32);
  _tile_loadd(4, w0, 64);
  _tile_loadd(5, w1, 64);
  if constexpr (kSignedWeights) {
    _tile_dpbssd(0, 2, 4);
    _tile_dpbssd(1, 3, 5);
  } else {
    _tile_dpbsud(0, 2, 4);
    _tile_dpbsud(1, 3, 5);
  }
  _tile_stored(0, c0, 64);
  _tile_stored(1, c1, 64);
}

// Activation bytes per token block.
constexpr size_t kTokenBlockBytes = size_t{1} << 20;

// A Q4_0 tile's 256 bytes of nibbles to its 512 signed bytes (q - 8).
HINGE_AMX_INLINE void UnpackQ4Tile(const uint8_t* src, int8_t* dst) {
  const __m512i lut = _mm512_broadcast_i32x4(
      _mm_setr_epi8(-8, -7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7));
  const __m512i low = _mm512_set1_epi8(0x0F);
  for (int c = 0; c < 4; ++c) {
    const __m512i v = _mm512_load_si512(src + c * 64);
    _mm512_store_si512(dst + c * 64, _mm512_shuffle_epi8(lut, _mm512_and_si512(v, low)));
    _mm512_store_si512(dst + 256 + c * 64,
                       _mm512_shuffle_epi8(lut, _mm512_and_si512(_mm512_srli_epi16(v, 4), low)));
  }
}

// acc[m] += f32(c[m]) * (d_w * d_x[m]) for the tile's MT tokens. wd: the block's 16 f16 row
// scales (PackedMatrix::d is only 16-byte aligned: an unaligned load).
template <int MT>
HINGE_AMX_INLINE void ScaleBlock(const int32_t* c, const uint16_t* wd, const float* xs,
                                 __m512* acc) {
  const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(wd)));
  for (int m = 0; m < MT; ++m) {
    const __m512 s = _mm512_mul_ps(dw, _mm512_set1_ps(xs[m]));
    acc[m] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_load_si512(c + m * 16)), s, acc[m]);
  }
}

// One token tile (MT valid tokens) x one row group (16 rows) over all blocks; out[m * 16 + n].
// wt: the group's signed weight tiles, 512 bytes per block (Q8_0: the packed copy itself;
// Q4_0: unpacked by UnpackGroup).
// kPipe (Q4_0 with a single token tile per group): wt is null and the tiles are unpacked here
// kUnpackAhead blocks ahead of their use into a ring of L1 buffers, which keeps the stream of
// nibble loads overlapped with the tile work without a tile load waiting on its own stores.
constexpr int kRing = 8;
constexpr int kUnpackAhead = 6;

template <int MT, bool kPipe>
HINGE_AMX_INLINE void GroupTile(const PackedMatrix& p, int64_t g, const int8_t* wt,
                                const int8_t* xq, const float* xs, float* out) {
  const int64_t nb = p.nb;
  const uint16_t* wd = p.d.get() + g * nb * 16;
  __m512 acc[MT];
  for (int m = 0; m < MT; ++m) acc[m] = _mm512_setzero_ps();
  alignas(64) int32_t c[2][256];
  alignas(64) int8_t ring[kPipe ? kRing : 1][kPipe ? 512 : 64];
  const uint8_t* nib = p.qs.get() + static_cast<size_t>(g) * p.qs_row_bytes;
  auto tile = [&](int64_t b) -> const int8_t* {
    if constexpr (kPipe) return ring[b % kRing];
    return wt + b * 512;
  };
  if constexpr (kPipe)
    for (int64_t b = 0; b < kUnpackAhead && b < nb; ++b) UnpackQ4Tile(nib + b * 256, ring[b]);
  int64_t j = 0;
  for (; j + 2 <= nb; j += 2) {
    if constexpr (kPipe) {
      for (int64_t b = j + kUnpackAhead; b < j + kUnpackAhead + 2 && b < nb; ++b)
        UnpackQ4Tile(nib + b * 256, ring[b % kRing]);
    }
    TilePair<true>(xq + j * 512, tile(j), tile(j + 1), c[0], c[1]);
    ScaleBlock<MT>(c[0], wd + j * 16, xs + j * 16, acc);
    ScaleBlock<MT>(c[1], wd + (j + 1) * 16, xs + (j + 1) * 16, acc);
  }
  if (j < nb) {
    _tile_zero(0);
    _tile_loadd(2, xq + j * 512, 32);
    _tile_loadd(4, tile(j), 64);
    _tile_dpbssd(0, 2, 4);
    _tile_stored(0, c[0], 64);
    ScaleBlock<MT>(c[0], wd + j * 16, xs + j * 16, acc);
  }
  for (int m = 0; m < MT; ++m) _mm512_store_ps(out + m * 16, acc[m]);
}

// The 8 tile rows of a (group, block) weight tile: Q8_0 as the signed quants, Q4_0 as the
// nibbles q (0..15) as u8.
template <bool kQ4>
HINGE_AMX_INLINE void LoadWeightRows(const uint8_t* t, __m512i* w) {
  if constexpr (kQ4) {
    const __m512i low = _mm512_set1_epi8(0x0F);
    for (int c = 0; c < 4; ++c) {
      const __m512i v = _mm512_load_si512(t + c * 64);
      w[c] = _mm512_and_si512(v, low);
      w[c + 4] = _mm512_and_si512(_mm512_srli_epi16(v, 4), low);
    }
  } else {
    for (int r = 0; r < 8; ++r) w[r] = _mm512_load_si512(t + r * 64);
  }
}

// Q4_K: a sub-block tile's 256 bytes of nibbles to its 512 bytes q (0..15).
HINGE_AMX_INLINE void UnpackNibbleTile(const uint8_t* src, uint8_t* dst) {
  __m512i w[8];
  LoadWeightRows<true>(src, w);  // tile row r is w[r]
  for (int r = 0; r < 8; ++r) _mm512_store_si512(dst + r * 64, w[r]);
}

// A Q4_K super-block's per-row scale vectors for sub-block j: d * sc_j and dmin * m_j.
HINGE_AMX_INLINE __m512 SubBlockVec(const uint8_t* bytes16, __m512 d) {
  const __m128i b = _mm_load_si128(reinterpret_cast<const __m128i*>(bytes16));
  return _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(b)));
}

// Q4_K, the 8 sub-blocks j of one super-block, their i32 tiles in c[j]: per token m,
//   t = sum over j of f32(c[j][m]) * (d * sc_j) - (dmin * m_j) * bsum_j[m]   (FMAs, j in order)
//   acc[m] += t * d_x[m]
// (bsum_j: the token's sum of activation quants over sub-block j, as f32). Rows go in two
// halves of 8 so the 8 partial sums t stay in registers next to the 16 accumulators; the
// per-row scale vectors are computed once into dsc / dmv. XS: token slots per sub-block in xbs
// (16, a token tile's; or MT, the compact decode copy).
template <int MT, int XS = 16>
HINGE_AMX_INLINE void ScaleSuperBlockQ4K(const int32_t (*c)[256], const uint8_t* meta,
                                         const float* xs, const float* xbs, __m512* acc) {
  const __m512 d = _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(meta + 256)));
  const __m512 dmin =
      _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(meta + 288)));
  alignas(64) float dsc[8][16], dmv[8][16];
  for (int j = 0; j < 8; ++j) {
    _mm512_store_ps(dsc[j], SubBlockVec(meta + j * 16, d));
    _mm512_store_ps(dmv[j], SubBlockVec(meta + 128 + j * 16, dmin));
  }
  constexpr int kHalf = 8;
  for (int h = 0; h < MT; h += kHalf) {
    __m512 t[kHalf];
    for (int i = 0; i < kHalf && h + i < MT; ++i) t[i] = _mm512_setzero_ps();
    for (int j = 0; j < 8; ++j) {
      const __m512 sj = _mm512_load_ps(dsc[j]), mj = _mm512_load_ps(dmv[j]);
      for (int i = 0; i < kHalf && h + i < MT; ++i) {
        const int m = h + i;
        t[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_load_si512(c[j] + m * 16)), sj, t[i]);
        t[i] = _mm512_fnmadd_ps(mj, _mm512_set1_ps(xbs[j * XS + m]), t[i]);
      }
    }
    for (int i = 0; i < kHalf && h + i < MT; ++i)
      acc[h + i] = _mm512_fmadd_ps(t[i], _mm512_set1_ps(xs[h + i]), acc[h + i]);
  }
}

// Q4_K, one token tile x one row group over all super-blocks, on the tile unit (tdpbsud: signed
// activations, unsigned nibbles). xs: the tile's [nb, 16] super-block scales; xbs: its
// [nb * 8, 16] sub-block sums.
// wt: the group's sub-block tiles unpacked to bytes by UnpackGroup, 512 bytes each.
// kPipe: wt is null; sub-block tiles are unpacked kUnpackAhead ahead into a ring (GroupTile).
template <int MT, bool kPipe>
HINGE_AMX_INLINE void GroupTileQ4K(const PackedMatrix& p, int64_t g, const uint8_t* wt,
                                   const int8_t* xq, const float* xs, const float* xbs,
                                   float* out) {
  const uint8_t* wq = p.qs.get() + static_cast<size_t>(g) * p.qs_row_bytes;
  __m512 acc[MT];
  for (int m = 0; m < MT; ++m) acc[m] = _mm512_setzero_ps();
  alignas(64) int32_t c[8][256];
  alignas(64) uint8_t ring[kPipe ? kRing : 1][kPipe ? 512 : 64];
  const int64_t nsub = p.nb * 8;
  auto nibbles = [&](int64_t s) {
    return wq + static_cast<size_t>(s / 8) * kPackedQ4KSuperBytes + (s % 8) * 256;
  };
  auto tile = [&](int64_t s) -> const uint8_t* {
    if constexpr (kPipe) return ring[s % kRing];
    return wt + s * 512;
  };
  if constexpr (kPipe)
    for (int64_t s = 0; s < kUnpackAhead && s < nsub; ++s) UnpackNibbleTile(nibbles(s), ring[s]);
  for (int64_t sb = 0; sb < p.nb; ++sb) {
    const uint8_t* base = wq + static_cast<size_t>(sb) * kPackedQ4KSuperBytes;
    const int8_t* xsb = xq + sb * 8 * 512;
    for (int j = 0; j < 8; j += 2) {
      const int64_t s0 = sb * 8 + j;
      if constexpr (kPipe) {
        for (int64_t s = s0 + kUnpackAhead; s < s0 + kUnpackAhead + 2 && s < nsub; ++s)
          UnpackNibbleTile(nibbles(s), ring[s % kRing]);
      }
      TilePair<false>(xsb + j * 512, tile(s0), tile(s0 + 1), c[j], c[j + 1]);
    }
    ScaleSuperBlockQ4K<MT>(c, base + 8 * 256, xs + sb * 16, xbs + sb * 8 * 16, acc);
  }
  for (int m = 0; m < MT; ++m) _mm512_store_ps(out + m * 16, acc[m]);
}

// The VNNI half: GroupVnni, GroupVnniQ4K, VnniTokens.
#include "kernels/matmul_amx_vnni-inl.h"

// Stores a finished tile's outputs: rows [g * 16, min(g * 16 + 16, row_end)) of tokens
// [tt * 16, tt * 16 + mt).
HINGE_AMX_INLINE void StoreTile(const AmxArgs& a, int64_t g, int64_t tt, int mt, int64_t row_end,
                                const float* out) {
  const int64_t r0 = g * 16;
  const int64_t n_valid = row_end - r0 < 16 ? row_end - r0 : 16;
  const __mmask16 mask = static_cast<__mmask16>((1u << n_valid) - 1);
  for (int m = 0; m < mt; ++m)
    _mm512_mask_storeu_ps(a.y + (tt * 16 + m) * a.y_stride + r0, mask,
                          _mm512_load_ps(out + m * 16));
}

HINGE_AMX_INLINE void RunGroupTileQ4K(const AmxArgs& a, int64_t g, int64_t tt, int mt,
                                      int64_t row_end, const uint8_t* wt, bool tiles) {
  const PackedMatrix& p = *a.w;
  const int8_t* xq = a.x + static_cast<size_t>(tt * p.nb * 8) * 512;
  const float* xs = a.x_scales + tt * p.nb * 16;
  const float* xbs = a.x_min_sums + tt * p.nb * 8 * 16;
  alignas(64) float out[16 * 16];
  if (!tiles && mt > kVnniMaxTokens) {
    // Without the tile unit: the tile's tokens in chunks of 4 on VNNI (same results).
    for (int m0 = 0; m0 < mt; m0 += kVnniMaxTokens) {
      const int n = mt - m0 < kVnniMaxTokens ? mt - m0 : kVnniMaxTokens;
      const int8_t* xc = xq + m0 * 32;
      float* oc = out + m0 * 16;
      if (n == 4) GroupVnniQ4K<4>(p, g, xc, xs + m0, xbs + m0, oc);
      else if (n == 3) GroupVnniQ4K<3>(p, g, xc, xs + m0, xbs + m0, oc);
      else if (n == 2) GroupVnniQ4K<2>(p, g, xc, xs + m0, xbs + m0, oc);
      else GroupVnniQ4K<1>(p, g, xc, xs + m0, xbs + m0, oc);
    }
    StoreTile(a, g, tt, mt, row_end, out);
    return;
  }
  switch (mt) {
#define HINGE_Q4K_VNNI_CASE(n)                  \
  case n:                                       \
    GroupVnniQ4K<n>(p, g, xq, xs, xbs, out);    \
    break;
#define HINGE_Q4K_CASE(n)                                \
  case n:                                                \
    if (wt == nullptr)                                   \
      GroupTileQ4K<n, true>(p, g, wt, xq, xs, xbs, out); \
    else                                                 \
      GroupTileQ4K<n, false>(p, g, wt, xq, xs, xbs, out); \
    break;
    HINGE_Q4K_VNNI_CASE(1) HINGE_Q4K_VNNI_CASE(2) HINGE_Q4K_VNNI_CASE(3) HINGE_Q4K_VNNI_CASE(4)
    HINGE_Q4K_CASE(5) HINGE_Q4K_CASE(6) HINGE_Q4K_CASE(7) HINGE_Q4K_CASE(8) HINGE_Q4K_CASE(9)
    HINGE_Q4K_CASE(10) HINGE_Q4K_CASE(11) HINGE_Q4K_CASE(12) HINGE_Q4K_CASE(13)
    HINGE_Q4K_CASE(14) HINGE_Q4K_CASE(15) HINGE_Q4K_CASE(16)
#undef HINGE_Q4K_CASE
#undef HINGE_Q4K_VNNI_CASE
    default:
      return;
  }
  StoreTile(a, g, tt, mt, row_end, out);
}

template <bool kQ4>
HINGE_AMX_INLINE void RunGroupTile(const AmxArgs& a, int64_t g, int64_t tt, int mt,
                                   int64_t row_end, const int8_t* wt, bool tiles) {
  const bool pipe = kQ4 && wt == nullptr;
  const PackedMatrix& p = *a.w;
  const int8_t* xq = a.x + static_cast<size_t>(tt * p.nb) * 512;
  const float* xs = a.x_scales + tt * p.nb * 16;
  alignas(64) float out[16 * 16];
  const int32_t* sums[kVnniMaxTokens];
  const bool u8 = !kQ4 && p.u8_quants;  // never on the tiles: AmxRows passes tiles = false
  if (!tiles && mt > kVnniMaxTokens) {
    // Without the tile unit: the tile's tokens in chunks of 4 on VNNI (same results).
    for (int m0 = 0; m0 < mt; m0 += kVnniMaxTokens) {
      const int n = mt - m0 < kVnniMaxTokens ? mt - m0 : kVnniMaxTokens;
      for (int m = 0; m < n; ++m) sums[m] = a.x_sums + (tt * 16 + m0 + m) * p.nb;
      VnniTokens<kQ4>(p, g, n, u8, xq + m0 * 32, xs + m0, sums, out + m0 * 16);
    }
    StoreTile(a, g, tt, mt, row_end, out);
    return;
  }
  for (int m = 0; m < kVnniMaxTokens && m < mt; ++m) sums[m] = a.x_sums + (tt * 16 + m) * p.nb;
  switch (mt) {
#define HINGE_VNNI_CASE(n)                                \
  case n:                                                 \
    VnniTokens<kQ4>(p, g, n, u8, xq, xs, sums, out);      \
    break;
    HINGE_VNNI_CASE(1) HINGE_VNNI_CASE(2) HINGE_VNNI_CASE(3) HINGE_VNNI_CASE(4)
#undef HINGE_VNNI_CASE
#define HINGE_AMX_CASE(n)                          \
  case n:                                          \
    if (pipe)                                      \
      GroupTile<n, kQ4>(p, g, wt, xq, xs, out);    \
    else                                           \
      GroupTile<n, false>(p, g, wt, xq, xs, out);  \
    break;
    HINGE_AMX_CASE(5) HINGE_AMX_CASE(6) HINGE_AMX_CASE(7) HINGE_AMX_CASE(8)
    HINGE_AMX_CASE(9) HINGE_AMX_CASE(10) HINGE_AMX_CASE(11) HINGE_AMX_CASE(12)
    HINGE_AMX_CASE(13) HINGE_AMX_CASE(14) HINGE_AMX_CASE(15) HINGE_AMX_CASE(16)
#undef HINGE_AMX_CASE
    default:
      return;
  }
  StoreTile(a, g, tt, mt, row_end, out);
}

// The calling thread's unpack buffer (kernel_thread_buffer), at least `bytes`.
int8_t* UnpackBuffer(size_t bytes) { return static_cast<int8_t*>(kernel_thread_buffer(bytes)); }

// All of group g's weight tiles as bytes, 512 per 32-element block: Q4_0 as q - 8 (signed),
// Q4_K as q.
template <bool kQ4K>
HINGE_AMX_INLINE void UnpackGroup(const PackedMatrix& p, int64_t g, int8_t* dst) {
  const uint8_t* wq = p.qs.get() + static_cast<size_t>(g) * p.qs_row_bytes;
  if constexpr (kQ4K) {
    for (int64_t sb = 0; sb < p.nb; ++sb)
      for (int j = 0; j < 8; ++j)
        UnpackNibbleTile(wq + static_cast<size_t>(sb) * kPackedQ4KSuperBytes + j * 256,
                         reinterpret_cast<uint8_t*>(dst) + (sb * 8 + j) * 512);
  } else {
    for (int64_t j = 0; j < p.nb; ++j) UnpackQ4Tile(wq + j * 256, dst + j * 512);
  }
}

// Decode and batches of at most kVnniMaxTokens tokens on VNNI (no token tile on the tile unit).
// A token tile's layout puts block j of token m at (j * 16 + m) * 32 and its scale at j * 16 + m,
// so for one token every block's 32 activation bytes and its scale each sit on a cache line of
// their own: per 256 bytes of Q4_0 weights two more lines came from L2, and a row's activations
// (144 KB at 8192 columns) did not stay in L1 from one row group to the next. They are copied
// once per call into [block][N] order (9 KB per token at 8192 columns) and the kernels read
// that (XS = N): the same values in the same operations, so the same results.
template <int kType, int N>
HINGE_AMX_INLINE void VnniFewTokens(const AmxArgs& a, int64_t g0, int64_t g1, int64_t row_end) {
  const PackedMatrix& p = *a.w;
  const int64_t nsub = kType == 2 ? p.nb * 8 : p.nb;  // 32-element blocks per row
  const size_t x_bytes = static_cast<size_t>(nsub) * N * 32;
  const size_t xs_count = static_cast<size_t>(p.nb) * N;
  const size_t xbs_count = kType == 2 ? static_cast<size_t>(nsub) * N : 0;
  int8_t* buf = UnpackBuffer(x_bytes + (xs_count + xbs_count) * sizeof(float));
  int8_t* xq = buf;
  float* xs = reinterpret_cast<float*>(buf + x_bytes);
  float* xbs = xs + xs_count;
  for (int64_t j = 0; j < nsub; ++j)
    for (int m = 0; m < N; ++m) std::memcpy(xq + (j * N + m) * 32, a.x + (j * 16 + m) * 32, 32);
  for (int64_t b = 0; b < p.nb; ++b)
    for (int m = 0; m < N; ++m) xs[b * N + m] = a.x_scales[b * 16 + m];
  if constexpr (kType == 2) {
    for (int64_t j = 0; j < nsub; ++j)
      for (int m = 0; m < N; ++m) xbs[j * N + m] = a.x_min_sums[j * 16 + m];
  }
  const int32_t* sums[N];
  for (int m = 0; m < N; ++m) sums[m] = a.x_sums + m * p.nb;
  alignas(64) float out[N * 16];
  for (int64_t g = g0; g < g1; ++g) {
    if constexpr (kType == 2) {
      GroupVnniQ4K<N, N>(p, g, xq, xs, xbs, out);
    } else if constexpr (kType == 1) {
      GroupVnni<N, true, false, N>(p, g, xq, xs, sums, out);
    } else {
      if (p.u8_quants)
        GroupVnni<N, false, true, N>(p, g, xq, xs, sums, out);
      else
        GroupVnni<N, false, false, N>(p, g, xq, xs, sums, out);
    }
    StoreTile(a, g, 0, N, row_end, out);
  }
}

// kType: 0 Q8_0, 1 Q4_0, 2 Q4_K.
template <int kType>
HINGE_AMX_ATTR void AmxRows(const AmxArgs& a, int64_t row_begin, int64_t row_end) {
  const PackedMatrix& p = *a.w;
  // Without AMX (a VNNI-only CPU, or HINGE_DISABLE_AMX) every token tile runs on VNNI.
  const bool amx = cpu_has_amx_int8() && !p.u8_quants;
  const bool tiles_used = amx && a.num_tokens > kVnniMaxTokens;
  const int64_t g0 = row_begin / 16, g1 = (row_end + 15) / 16;
  static_assert(kVnniMaxTokens == 4, "a VnniFewTokens case per token count up to it");
  switch (a.num_tokens) {
    case 1: return VnniFewTokens<kType, 1>(a, g0, g1, row_end);
    case 2: return VnniFewTokens<kType, 2>(a, g0, g1, row_end);
    case 3: return VnniFewTokens<kType, 3>(a, g0, g1, row_end);
    case 4: return VnniFewTokens<kType, 4>(a, g0, g1, row_end);
    default: break;
  }
  if (tiles_used) Configure(a.num_tokens < 16 ? static_cast<int>(a.num_tokens) : 16);
  const int64_t tiles = (a.num_tokens + 15) / 16;
  const size_t tile_bytes = static_cast<size_t>(p.cols / 32) * 512;  // one token tile's A tiles
  int64_t tb = static_cast<int64_t>(kTokenBlockBytes / tile_bytes);
  if (tb < 1) tb = 1;
  // Q4_0 / Q4_K: a group's tiles are unpacked to bytes once per token block (when some token
  // tile of it runs on the tile unit) and every token tile loads them from there: tile loads
  // right after the unpacking stores stalled on them (a third of Q4_0's time), and the
  // unpacking is no longer repeated per token tile.
  int8_t* unpacked = nullptr;
  if constexpr (kType != 0) {
    if (tiles_used) unpacked = UnpackBuffer(static_cast<size_t>(p.cols / 32) * 512);
  }
  for (int64_t t0 = 0; t0 < tiles; t0 += tb) {
    const int64_t t1 = t0 + tb < tiles ? t0 + tb : tiles;
    // Token tiles of this block on the tile unit (only the last tile of the call can be short).
    const int64_t last_mt = a.num_tokens - (t1 - 1) * 16;
    const int64_t amx_tiles = (t1 - t0) - (last_mt <= kVnniMaxTokens ? 1 : 0);
    // One such tile per group (batched decode): unpack in the tile loop, pipelined (wt null).
    const bool whole = tiles_used && amx_tiles >= 2;
    for (int64_t g = g0; g < g1; ++g) {
      if constexpr (kType != 0) {
        if (whole) UnpackGroup<kType == 2>(p, g, unpacked);
      }
      for (int64_t tt = t0; tt < t1; ++tt) {
        const int64_t left = a.num_tokens - tt * 16;
        const int mt = static_cast<int>(left < 16 ? left : 16);
        if constexpr (kType == 2) {
          RunGroupTileQ4K(a, g, tt, mt, row_end,
                          whole ? reinterpret_cast<const uint8_t*>(unpacked) : nullptr, amx);
        } else if constexpr (kType == 1) {
          RunGroupTile<true>(a, g, tt, mt, row_end, whole ? unpacked : nullptr, amx);
        } else {
          RunGroupTile<false>(a, g, tt, mt, row_end,
                              reinterpret_cast<const int8_t*>(p.qs.get() + static_cast<size_t>(g) *
                                                                               p.qs_row_bytes),
                              amx);
        }
      }
    }
  }
  if (tiles_used) _tile_release();
}

}  // namespace

void matmul_rows_amx(const AmxArgs& a, int64_t row_begin, int64_t row_end) {
  if (a.w->type == GgmlType::Q4_K)
    AmxRows<2>(a, row_begin, row_end);
  else if (a.w->type == GgmlType::Q4_0)
    AmxRows<1>(a, row_begin, row_end);
  else
    AmxRows<0>(a, row_begin, row_end);
}

bool amx_kernel_compiled() { return true; }
bool amx_kernel_usable() { return cpu_has_amx_int8() || cpu_has_avx512_vnni(); }

#else

void matmul_rows_amx(const AmxArgs& /*a*/, int64_t /*row_begin*/, int64_t /*row_end*/) {}
bool amx_kernel_compiled() { return false; }
bool amx_kernel_usable() { return false; }

#endif

}  // namespace hinge::kernels
