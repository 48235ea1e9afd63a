// Included by matmul_kquants.cpp inside its per-Highway-target namespace, on the AVX3 targets
// (HINGE_SIMD_VNNI), once per target: no include guard. It uses what that file defines before
// the include (UnpackQ4KScales, the block layouts, MatmulArgs).
//
// Q4_K and Q5_K (WB = BlockQ4_K / BlockQ5_K: the fifth bit of sub-block j's values ORed in from
// bit j of qh, values 0..31) with AVX-512 (BW + VNNI, runtime-checked: cpu_has_avx512_vnni), in
// the GGUF layout: a 32-byte chunk of qs holds sub-blocks 2c (low nibbles) and 2c + 1 (high nibbles),
// whose activations are the contiguous 64 bytes qs[64c, 64c + 64) of the Q8_K block, so one
// broadcast + per-half shift gives the 64 weights in activation order. Per (row, token, chunk):
// vpmaddubsw (u8 x i8 -> 32 i16 pair sums, no saturation: 2 * 31 * 128 < 2^15) and vpdpwssd with
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

template <typename WB>
HINGE_VNNI_INLINE Q4KRowOps PrepQ4KRow(const WB& b) {
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

// The 64 weights of chunk c (sub-blocks 2c, 2c + 1) as bytes in activation order: the low
// nibbles of qs[32c, 32c + 32) then the high ones; Q5_K ORs in bits 2c / 2c + 1 of qh as bit 4.
template <typename WB>
HINGE_VNNI_INLINE __m512i LoadKChunk(const WB& blk, int c) {
  const __m512i shifts = _mm512_set_epi64(4, 4, 4, 4, 0, 0, 0, 0);
  const __m512i q = _mm512_broadcast_i64x4(
      _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk.qs + 32 * c)));
  __m512i v = _mm512_and_si512(_mm512_srlv_epi64(q, shifts), _mm512_set1_epi8(0x0F));
  if constexpr (std::is_same_v<WB, BlockQ5_K>) {
    const __m512i h =
        _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk.qh)));
    const int lo = 2 * c, hi = 2 * c + 1;
    const __m512i hs = _mm512_set_epi64(hi, hi, hi, hi, lo, lo, lo, lo);
    // One bit per byte after the mask: the 64-bit shifts move no bit across bytes.
    v = _mm512_or_si512(
        v, _mm512_slli_epi64(_mm512_and_si512(_mm512_srlv_epi64(h, hs), _mm512_set1_epi8(1)), 4));
  }
  return v;
}

// i32 -> f32 for |v| < 2^22 (a super-block's lane: at most 4 * 2 * (2 * 31 * 128) * 63 < 2^22), exactly
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
template <typename WB, int RM, int NT>
HINGE_VNNI_INLINE void DotTileQ4KVnni(const WB* const* w, const BlockQ8_K* const* x,
                                      const float* const* xm, int64_t nb, size_t prefetch,
                                      float* out) {
  __m512 acc[RM][NT];
  for (int i = 0; i < RM; ++i)
    for (int k = 0; k < NT; ++k) acc[i][k] = _mm512_setzero_ps();
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
        wq[i] = LoadKChunk(w[i][b], c);
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
template <typename WB, int RM, int NT>
HINGE_VNNI_INLINE void RunTileQ4KVnni(const MatmulArgs& a, int64_t r, int64_t t) {
  const int64_t nb = a.cols / kQK_K;
  const auto* xbase = static_cast<const uint8_t*>(a.x);
  const WB* w[RM];
  for (int i = 0; i < RM; ++i)
    w[i] = reinterpret_cast<const WB*>(a.w + static_cast<size_t>(r + i) * a.w_row_bytes);
  const BlockQ8_K* x[NT];
  const float* xm[NT];
  for (int k = 0; k < NT; ++k) {
    x[k] = reinterpret_cast<const BlockQ8_K*>(xbase + static_cast<size_t>(t + k) * a.x_row_bytes);
    xm[k] = a.x_min_sums + (t + k) * nb * 8;
  }
  float out[RM * NT];
  DotTileQ4KVnni<WB, RM, NT>(w, x, xm, nb, 1 * RM * a.w_row_bytes, out);
  for (int i = 0; i < RM; ++i)
    for (int k = 0; k < NT; ++k) a.y[(t + k) * a.y_stride + r + i] = out[i * NT + k];
}

template <typename WB, int RM>
HINGE_VNNI_INLINE void RunRowsQ4KVnni(const MatmulArgs& a, int64_t r, int64_t t0, int64_t t1) {
  int64_t t = t0;
  for (; t + 4 <= t1; t += 4) RunTileQ4KVnni<WB, RM, 4>(a, r, t);
  switch (t1 - t) {
    case 3:
      RunTileQ4KVnni<WB, RM, 3>(a, r, t);
      break;
    case 2:
      RunTileQ4KVnni<WB, RM, 2>(a, r, t);
      break;
    case 1:
      RunTileQ4KVnni<WB, RM, 1>(a, r, t);
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

template <typename WB>
HINGE_VNNI_INLINE void PrepareQ4KRow(const WB* w, int64_t nb, Q4KPrepared* out) {
  for (int64_t b = 0; b < nb; ++b) {
    const Q4KRowOps ro = PrepQ4KRow(w[b]);
    Q4KPrepared& p = out[b];
    for (int c = 0; c < 4; ++c) {
      _mm512_store_si512(p.w[c], LoadKChunk(w[b], c));
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

template <typename WB>
HINGE_VNNI_ATTR void MatmulRowsQ4KVnni(const MatmulArgs& a, int64_t row_begin, int64_t row_end) {
  if (a.num_tokens == 1) {
    int64_t r = row_begin;
    for (; r + 4 <= row_end; r += 4) RunTileQ4KVnni<WB, 4, 1>(a, r, 0);
    for (; r < row_end; ++r) RunTileQ4KVnni<WB, 1, 1>(a, r, 0);
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
    return reinterpret_cast<const WB*>(a.w + static_cast<size_t>(r) * a.w_row_bytes);
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
        RunRowsQ4KVnni<WB, 2>(a, r, t0, t1);
      }
    }
    for (; r < row_end; ++r) RunRowsQ4KVnni<WB, 1>(a, r, t0, t1);
  }
}
