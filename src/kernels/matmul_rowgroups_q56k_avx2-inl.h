// Included by matmul_rowgroups_avx2.cpp inside its anonymous namespace, after the helpers it
// uses (HINGE_RG_INLINE / HINGE_RG_ATTR, StoreAcc, Prefetch): the Q5_K and Q6_K row-group
// kernels on AVX2 (layouts in matmul_packed.h, docs/kernels.md). No include guard.

// Token m's broadcasts of tile rows 2rp, 2rp + 4, 2rp + 1, 2rp + 5 of a block (x: its 32 quants).
HINGE_RG_INLINE void TileRowBroadcasts(const int8_t* x, int rp, __m256i* out) {
  const int rows[4] = {2 * rp, 2 * rp + 4, 2 * rp + 1, 2 * rp + 5};
  for (int k = 0; k < 4; ++k) {
    int32_t v;
    std::memcpy(&v, x + rows[k] * 4, 4);
    out[k] = _mm256_set1_epi32(v);
  }
}

// The 16 bytes at b16 (one byte per row) with half h's 8 rows' bytes in both i16 lanes of the
// row (2n, 2n + 1): the sub-block scales and mins as vpmaddwd operands.
HINGE_RG_INLINE __m256i RowBytesDup(const uint8_t* b16, int h) {
  const __m128i dup = h == 0 ? _mm_setr_epi8(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7)
                             : _mm_setr_epi8(8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13, 14, 14,
                                             15, 15);
  return _mm256_cvtepu8_epi16(
      _mm_shuffle_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b16)), dup));
}

// Tile rows 2rp, 2rp + 4, 2rp + 1, 2rp + 5 of a Q5_K sub-block's 8-row half as values 0..31
// (nibbles at t, fifth bits hv), into w[0..3]: unpacked once for every token.
HINGE_RG_INLINE void Q5KWeights(const uint8_t* t, __m256i hv, int rp, __m256i* w) {
  const __m256i low = _mm256_set1_epi8(0x0F), bit4 = _mm256_set1_epi8(0x10);
  const __m256i v0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(t + rp * 128));
  const __m256i v1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(t + rp * 128 + 64));
  // Fifth bits 4rp + k (tile rows 2rp, 2rp + 4, 2rp + 1, 2rp + 5) to bit 4.
  const __m256i f0 = rp == 0 ? _mm256_slli_epi16(hv, 4) : hv;
  const __m256i f1 = rp == 0 ? _mm256_slli_epi16(hv, 3) : _mm256_srli_epi16(hv, 1);
  const __m256i f2 = rp == 0 ? _mm256_slli_epi16(hv, 2) : _mm256_srli_epi16(hv, 2);
  const __m256i f3 = rp == 0 ? _mm256_slli_epi16(hv, 1) : _mm256_srli_epi16(hv, 3);
  w[0] = _mm256_or_si256(_mm256_and_si256(v0, low), _mm256_and_si256(f0, bit4));
  w[1] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(v0, 4), low),
                         _mm256_and_si256(f1, bit4));
  w[2] = _mm256_or_si256(_mm256_and_si256(v1, low), _mm256_and_si256(f2, bit4));
  w[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(v1, 4), low),
                         _mm256_and_si256(f3, bit4));
}

// One token's products with those 4 tile rows (x: its broadcasts in the same order) times the
// sub-block's scale: the half's 8 rows' i32 sums. Four rows' pair sums fit i16 (<= 31496).
HINGE_RG_INLINE __m256i Q5KDot(const __m256i* w, const __m256i* x, __m256i sc) {
  const __m256i ab =
      _mm256_add_epi16(_mm256_maddubs_epi16(w[0], x[0]), _mm256_maddubs_epi16(w[1], x[1]));
  const __m256i cd =
      _mm256_add_epi16(_mm256_maddubs_epi16(w[2], x[2]), _mm256_maddubs_epi16(w[3], x[3]));
  return _mm256_madd_epi16(_mm256_add_epi16(ab, cd), sc);
}

// acc += (d * d_x) * f32(sumi) - (dmin * d_x) * f32(summs) for half h of a super-block (dd:
// its d[16], dmin[16]), each product rounded before the difference and the sum as the
// reference does (no FMA: GCC's C++ default is -ffp-contract=fast).
HINGE_RG_INLINE __m256 Q5KAccumulate(__m256 acc, const uint8_t* dd, int h, float x_scale,
                                     __m256i sumi, __m256i summs) {
  const __m256 d =
      _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(dd + h * 16)));
  const __m256 dmin =
      _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(dd + 32 + h * 16)));
  const __m256 dx = _mm256_set1_ps(x_scale);
  __m256 a = _mm256_mul_ps(_mm256_mul_ps(dx, d), _mm256_cvtepi32_ps(sumi));
  __m256 b = _mm256_mul_ps(_mm256_mul_ps(dx, dmin), _mm256_cvtepi32_ps(summs));
  __asm__("" : "+x"(a), "+x"(b));
  __m256 t = _mm256_sub_ps(a, b);
  __asm__("" : "+x"(t));
  return _mm256_add_ps(acc, t);
}

// Q5_K: per super-block and 8-row half the reference's two exact integer sums per row,
// sumi = sum over sub-blocks j of sc_j * <q_j, x_j> and summs = sum of m_j * (the token's sum
// over sub-block j), then (d * d_x) * f32(sumi) - (dmin * d_x) * f32(summs) as
// vec_dot_q5_k_q8_k_ref rounds it. q: Q4_K's nibble tile or'ed with the fifth bit at bit 4
// (0..31); four tile rows' pair sums add up in i16 exactly (at most 4 * 2 * 31 * 127 = 31496),
// and vpmaddwd by the sub-block's scale (duplicated per row) takes them to i32; the mins' term
// is vpmaddwd of the duplicated mins by the token's two bsums of the sub-block.
template <int MT, int XS>
HINGE_RG_INLINE void GroupQ5K(const PackedMatrix& p, int64_t g, const int8_t* xq, const float* xs,
                              const int16_t* xbs, const Prefetch& pf, float* out) {
  const uint8_t* wq = p.qs.get() + static_cast<size_t>(g) * p.qs_row_bytes;
  __m256 acc[MT][2];
  for (int m = 0; m < MT; ++m) acc[m][0] = acc[m][1] = _mm256_setzero_ps();
  for (int64_t sb = 0; sb < p.nb; ++sb) {
    const uint8_t* base = wq + static_cast<size_t>(sb) * kPackedQ5KSuperBytes;
    prefetch_lines(base + pf.bytes, kPackedQ5KSuperBytes, pf.hint);
    const int16_t* bs = xbs + sb * XS * 16;
    const int8_t* xsb = xq + sb * 8 * XS * 32;
    // Each 8-row half on its own: 2 * MT sums in registers, not 4 * MT (one token with both
    // halves per sub-block, sharing the broadcasts as Q6_K does, measured slower: 2048 x 8192
    // from DRAM 1022 -> 1063 us on 1 thread, 592 -> 636 on 2, 4 alternating rounds, Zen 3).
    for (int h = 0; h < 2; ++h) {
      __m256i sumi[MT], summs[MT];
      for (int m = 0; m < MT; ++m) sumi[m] = summs[m] = _mm256_setzero_si256();
      for (int j = 0; j < 8; ++j) {
        const uint8_t* sub = base + j * kPackedQ5KSubBytes;  // tile, fifth bits, sc, m
        const __m256i sc = RowBytesDup(sub + kPackedQ5KSc, h);
        const __m256i mn = RowBytesDup(sub + kPackedQ5KMin, h);
        for (int m = 0; m < MT; ++m) {
          int32_t bsum2;
          std::memcpy(&bsum2, bs + m * 16 + 2 * j, 4);
          summs[m] = _mm256_add_epi32(summs[m], _mm256_madd_epi16(mn, _mm256_set1_epi32(bsum2)));
        }
        const __m256i hv =
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(sub + kPackedQ5KFifth + h * 32));
        for (int rp = 0; rp < 2; ++rp) {
          __m256i w[4];
          Q5KWeights(sub + h * 32, hv, rp, w);
          for (int m = 0; m < MT; ++m) {
            __m256i xb[4];
            TileRowBroadcasts(xsb + j * XS * 32 + m * 32, rp, xb);
            sumi[m] = _mm256_add_epi32(sumi[m], Q5KDot(w, xb, sc));
          }
        }
      }
      for (int m = 0; m < MT; ++m)
        acc[m][h] = Q5KAccumulate(acc[m][h], base + kPackedQ5KD, h, xs[sb * XS + m], sumi[m],
                                  summs[m]);
    }
  }
  StoreAcc<MT>(acc, out);
}

// Tile rows 2rp, 2rp + 4, 2rp + 1, 2rp + 5 of a Q6_K block's 8-row half as values 0..63
// (nibbles at t, high bits at hb), into w[0..3]: unpacked once for every token.
HINGE_RG_INLINE void Q6KWeights(const uint8_t* t, const uint8_t* hb, int rp, __m256i* w) {
  const __m256i low = _mm256_set1_epi8(0x0F), high = _mm256_set1_epi8(0x30);
  const __m256i hv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(hb + rp * 64));
  const __m256i v0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(t + rp * 128));
  const __m256i v1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(t + rp * 128 + 64));
  w[0] =
      _mm256_or_si256(_mm256_and_si256(v0, low), _mm256_and_si256(_mm256_slli_epi16(hv, 4), high));
  w[1] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(v0, 4), low),
                         _mm256_and_si256(_mm256_slli_epi16(hv, 2), high));
  w[2] = _mm256_or_si256(_mm256_and_si256(v1, low), _mm256_and_si256(hv, high));
  w[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(v1, 4), low),
                         _mm256_and_si256(_mm256_srli_epi16(hv, 2), high));
}

// One token's products with those 4 tile rows (x: its broadcasts in the same order), two rows'
// pair sums in i16 (<= 32004), scaled per sub-block: the half's 8 rows' i32 sums.
HINGE_RG_INLINE __m256i Q6KDot(const __m256i* w, const __m256i* x, __m256i s_lo, __m256i s_hi) {
  const __m256i lo =
      _mm256_add_epi16(_mm256_maddubs_epi16(w[0], x[0]), _mm256_maddubs_epi16(w[2], x[2]));
  const __m256i hi =
      _mm256_add_epi16(_mm256_maddubs_epi16(w[1], x[1]), _mm256_maddubs_epi16(w[3], x[3]));
  return _mm256_add_epi32(_mm256_madd_epi16(lo, s_lo), _mm256_madd_epi16(hi, s_hi));
}

// -32 * sum over sub-blocks j of sc_j * bsum_j for a half's 8 rows (the offset of the stored
// values 0..63): the rows' scale pairs by the token's bsum pairs (base: the super-block; bs:
// the token's 16 bsums).
HINGE_RG_INLINE __m256i Q6KOffset(const uint8_t* base, int h, const int16_t* bs) {
  __m256i off = _mm256_setzero_si256();
  for (int b = 0; b < 8; ++b) {
    const __m256i pair = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(
        base + b * kPackedQ6KBlockBytes + kPackedQ6KPairs + h * 16)));
    int32_t bsum2;
    std::memcpy(&bsum2, bs + 2 * b, 4);
    off = _mm256_add_epi32(off, _mm256_madd_epi16(pair, _mm256_set1_epi32(bsum2)));
  }
  return _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(off, 5));
}

// acc += (d * d_x) * f32(isum), the product rounded before the sum as the reference does (an
// empty asm keeps GCC, whose C++ default is -ffp-contract=fast, from fusing them).
HINGE_RG_INLINE __m256 Q6KAccumulate(__m256 acc, __m256 d, float dx, __m256i isum) {
  __m256 prod = _mm256_mul_ps(_mm256_mul_ps(d, _mm256_set1_ps(dx)), _mm256_cvtepi32_ps(isum));
  __asm__("" : "+x"(prod));
  return _mm256_add_ps(acc, prod);
}

// Q6_K: per super-block an exact integer sum per row, sum over sub-blocks j of
// sc_j * <q_j - 32, x_j>, as vec_dot_q6_k_q8_k_ref: first -32 * sum_j sc_j * bsum_j (vpmaddwd of
// the rows' scale pairs by the token's bsum pairs), then each block's values 0..63 (the
// nibble tile or'ed with the high bits shifted to bits 4-5) against the activations with
// vpmaddubsw; two tile rows' pair sums add up in i16 exactly (at most 2 * 2 * 63 * 127 =
// 32004), and vpmaddwd by the sub-block's scale (duplicated per row) takes them to i32. Then
// acc += (d * d_x) * f32(sum), the reference's operations. xq: block b of token m at
// (b * XS + m) * 32; xs: [nb, XS] super-block scales; xbs: [nb, XS tokens, 16] bsums (XS 16:
// a token tile's layout; XS = MT: the compact copy).
template <int MT, int XS>
HINGE_RG_INLINE void GroupQ6K(const PackedMatrix& p, int64_t g, const int8_t* xq, const float* xs,
                              const int16_t* xbs, const Prefetch& pf, float* out) {
  const uint8_t* wq = p.qs.get() + static_cast<size_t>(g) * p.qs_row_bytes;
  // Row n's scale pair (sc[2b], sc[2b + 1]) to (sc[2b], sc[2b]) and (sc[2b + 1], sc[2b + 1]).
  const __m128i even = _mm_setr_epi8(0, 0, 2, 2, 4, 4, 6, 6, 8, 8, 10, 10, 12, 12, 14, 14);
  const __m128i odd = _mm_setr_epi8(1, 1, 3, 3, 5, 5, 7, 7, 9, 9, 11, 11, 13, 13, 15, 15);
  __m256 acc[MT][2];
  for (int m = 0; m < MT; ++m) acc[m][0] = acc[m][1] = _mm256_setzero_ps();
  for (int64_t sb = 0; sb < p.nb; ++sb) {
    const uint8_t* base = wq + static_cast<size_t>(sb) * kPackedQ6KSuperBytes;
    prefetch_lines(base + pf.bytes, kPackedQ6KSuperBytes, pf.hint);
    const int16_t* bs = xbs + sb * XS * 16;
    const int8_t* xsb = xq + sb * 8 * XS * 32;
    if constexpr (MT == 1) {
      // One token: both halves per block, so each activation broadcast serves 16 rows.
      __m256i isum[2] = {Q6KOffset(base, 0, bs), Q6KOffset(base, 1, bs)};
      for (int b = 0; b < 8; ++b) {
        const uint8_t* t = base + b * kPackedQ6KBlockBytes;  // tile, high bits, scale pairs
        const uint8_t* hb = t + kPackedQ6KHigh;
        const __m128i p0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(t + kPackedQ6KPairs));
        const __m128i p1 =
            _mm_loadu_si128(reinterpret_cast<const __m128i*>(t + kPackedQ6KPairs + 16));
        for (int rp = 0; rp < 2; ++rp) {
          __m256i xb[4];
          TileRowBroadcasts(xsb + b * XS * 32, rp, xb);
          for (int h = 0; h < 2; ++h) {
            const __m128i pr = h == 0 ? p0 : p1;
            __m256i w[4];
            Q6KWeights(t + h * 32, hb + h * 32, rp, w);
            isum[h] = _mm256_add_epi32(
                isum[h], Q6KDot(w, xb, _mm256_cvtepi8_epi16(_mm_shuffle_epi8(pr, even)),
                                _mm256_cvtepi8_epi16(_mm_shuffle_epi8(pr, odd))));
          }
        }
      }
      for (int h = 0; h < 2; ++h) {
        const __m256 d = _mm256_cvtph_ps(
            _mm_loadu_si128(reinterpret_cast<const __m128i*>(base + kPackedQ6KD + h * 16)));
        acc[0][h] = Q6KAccumulate(acc[0][h], d, xs[sb * XS], isum[h]);
      }
      continue;
    }
    // Several tokens: each 8-row half on its own, MT sums in registers rather than 2 * MT (the
    // token loop's weight vectors, scale vectors and masks stay in AVX2's 16 registers at
    // MT = 4). Nothing is read twice: every weight vector belongs to one half.
    for (int h = 0; h < 2; ++h) {
      __m256i isum[MT];
      for (int m = 0; m < MT; ++m) isum[m] = Q6KOffset(base, h, bs + m * 16);
      for (int b = 0; b < 8; ++b) {
        const uint8_t* t = base + b * kPackedQ6KBlockBytes + h * 32;
        const uint8_t* hb = t + kPackedQ6KHigh;
        const __m128i pair = _mm_loadu_si128(
            reinterpret_cast<const __m128i*>(base + b * kPackedQ6KBlockBytes + kPackedQ6KPairs + h * 16));
        const __m256i s_lo = _mm256_cvtepi8_epi16(_mm_shuffle_epi8(pair, even));
        const __m256i s_hi = _mm256_cvtepi8_epi16(_mm_shuffle_epi8(pair, odd));
        for (int rp = 0; rp < 2; ++rp) {
          __m256i w[4];
          Q6KWeights(t, hb, rp, w);
          for (int m = 0; m < MT; ++m) {
            __m256i xb[4];
            TileRowBroadcasts(xsb + b * XS * 32 + m * 32, rp, xb);
            isum[m] = _mm256_add_epi32(isum[m], Q6KDot(w, xb, s_lo, s_hi));
          }
        }
      }
      const __m256 d = _mm256_cvtph_ps(
          _mm_loadu_si128(reinterpret_cast<const __m128i*>(base + kPackedQ6KD + h * 16)));
      for (int m = 0; m < MT; ++m)
        acc[m][h] = Q6KAccumulate(acc[m][h], d, xs[sb * XS + m], isum[m]);
    }
  }
  StoreAcc<MT>(acc, out);
}

// n tokens of row group g on p.type's kernel (GroupQ5K or GroupQ6K).
HINGE_RG_ATTR void GroupTokensQ56K(const PackedMatrix& p, int64_t g, int n, bool compact,
                                   const int8_t* xq, const float* xs, const int16_t* xbs,
                                   const Prefetch& pf, float* out) {
  if (p.type == GgmlType::Q6_K) {
#define HINGE_RG_CALL(k, xs_) GroupQ6K<k, xs_>(p, g, xq, xs, xbs, pf, out)
    HINGE_RG_TOKEN_CASES(HINGE_RG_CALL)
#undef HINGE_RG_CALL
  } else {
#define HINGE_RG_CALL(k, xs_) GroupQ5K<k, xs_>(p, g, xq, xs, xbs, pf, out)
    HINGE_RG_TOKEN_CASES(HINGE_RG_CALL)
#undef HINGE_RG_CALL
  }
}
