// The 16-row-group layout (kAmxTiles) on AVX-512 VNNI, included by matmul_amx.cpp inside its
// anonymous namespace, after ScaleBlock and ScaleSuperBlockQ4K, which it shares with the tile
// path: decode and small batches (1..4 tokens) on AMX machines, every token count on CPUs
// without AMX (chunks of 4 tokens). Lane n of a vpdpbusd accumulates row n, so there are no
// horizontal sums, and each (row, block) gets the same exact i32 as a tile product: the
// results are bit-identical to the tile path's. A fragment of one file, included once: no
// include guard.

// Token tiles of at most this many tokens run on AVX-512 VNNI instead of the tile unit (decode:
// memory-bound, and the tile loads there stall on every miss), with the same arithmetic: the
// exact i32 block dot products of the 16 rows in the 16 lanes, then the same f32 operations as
// ScaleBlock, so the results are bit-identical to the AMX path's.
constexpr int kVnniMaxTokens = 4;
// Software prefetch of the weights on the VNNI path, per microarchitecture, by measurement
// (hinge_kernel_bench --benchmark_filter=MatmulDecode, one core streaming a 2048 x 8192 matrix
// from DRAM, best / median of 6 interleaved runs):
//   Intel (Sapphire Rapids class): into L1 (T0) 8 blocks ahead (Q8_0 4 KiB, Q4_0 2 KiB) and
//     Q4_K one super-block ahead, as tuned there (37 lines in one burst cost Q4_K 12%).
//   AMD Zen 4: Q8_0 without software prefetch (21.6 / 18.9 GB/s against 16.9 / 15.3 with the
//     Intel plan); Q4_0 into L2 (T1) 16 KiB ahead (20.7 / 18.6 against 18.5 / 15.7; with 2
//     threads 30.6 / 25.4 against 24.2 / 23.6 without prefetch); Q4_K without (one core: 20.3
//     / 18.6 into L2 four super-blocks ahead against 16.0 / 11.5 with the Intel plan, but with
//     2 threads none is ahead: 34.1 / 27.0 against 33.9 / 25.7 GB/s, and llama-1b q4_k decode
//     end to end 50.7 against 45.0 tok/s, median of 8 alternating pairs, 6 of 8 faster).
// HINGE_VNNI_PREFETCH=none | t0:BYTES | t1:BYTES sets one plan for every type (A/B runs).
struct VnniPrefetchPlan {
  Prefetch q8, q4, q4k;
};

inline VnniPrefetchPlan MakeVnniPrefetchPlan() {
  VnniPrefetchPlan plan;
  if (cpu_identity().vendor == CpuVendor::kAmd) {
    plan.q8 = {-1, 0};
    plan.q4 = {1, 16384};
    plan.q4k = {-1, 0};
  } else {
    plan.q8 = {0, 8 * 512};
    plan.q4 = {0, 8 * 256};
    plan.q4k = {0, static_cast<int64_t>(kPackedQ4KSuperBytes)};
  }
  if (const auto all = prefetch_from_env("HINGE_VNNI_PREFETCH"))
    plan.q8 = plan.q4 = plan.q4k = *all;
  return plan;
}

inline const VnniPrefetchPlan& GetVnniPrefetchPlan() {
  static const VnniPrefetchPlan plan = MakeVnniPrefetchPlan();
  return plan;
}

// One token tile of MT <= kVnniMaxTokens tokens x one row group on VNNI. Lane n of a dot vector
// accumulates row n: vpdpbusd of tile row r (4 weights per row) with the token's 4 activations
// of that row broadcast. vpdpbusd's first operand is unsigned: Q4_0 passes the nibbles and
// subtracts 8 * sum(x); Q8_0 passes x + 128 (x ^ 0x80) and subtracts 128 * sum(w) (one more
// vpdpbusd per tile row with 128 broadcast, shared by the tokens). kU8: Q8_0 packed as q + 128
// (PackedMatrix::u8_quants, CPUs without AMX) passes the weights as the unsigned operand and
// subtracts 128 * sum(x), as Q4_0 does: a third fewer instructions per block and token.
// XS: token slots per block in xq / xs: 16 (a token tile's layout) or MT (CompactTokens).
template <int MT, bool kQ4, bool kU8 = false, int XS = 16>
HINGE_AMX_INLINE void GroupVnni(const PackedMatrix& p, int64_t g, const int8_t* xq,
                                const float* xs, const int32_t* const* x_sums, float* out) {
  constexpr size_t kTile = kQ4 ? 256 : 512;
  const int64_t nb = p.nb;
  const uint8_t* wq = p.qs.get() + static_cast<size_t>(g) * p.qs_row_bytes;
  const uint16_t* wd = p.d.get() + g * nb * 16;
  __m512 acc[MT];
  for (int m = 0; m < MT; ++m) acc[m] = _mm512_setzero_ps();
  const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
  const Prefetch pf = kQ4 ? GetVnniPrefetchPlan().q4 : GetVnniPrefetchPlan().q8;
  for (int64_t j = 0; j < nb; ++j) {
    prefetch_lines(reinterpret_cast<const char*>(wq + j * kTile + pf.bytes), kTile, pf.hint);
    __m512i w[8];
    LoadWeightRows<kQ4>(wq + j * kTile, w);
    __m512i wsum128 = _mm512_setzero_si512();
    if constexpr (!kQ4 && !kU8)
      for (int r = 0; r < 8; ++r) wsum128 = _mm512_dpbusd_epi32(wsum128, flip, w[r]);
    alignas(64) int32_t c[MT][16];
    for (int m = 0; m < MT; ++m) {
      const int8_t* xm = xq + (j * XS + m) * 32;
      __m512i dot;
      if constexpr (kQ4) {
        dot = _mm512_set1_epi32(-8 * x_sums[m][j]);
      } else if constexpr (kU8) {
        dot = _mm512_set1_epi32(-128 * x_sums[m][j]);
      } else {
        dot = _mm512_sub_epi32(_mm512_setzero_si512(), wsum128);
      }
      for (int r = 0; r < 8; ++r) {
        int32_t x4;
        std::memcpy(&x4, xm + r * 4, 4);
        __m512i xv = _mm512_set1_epi32(x4);
        if constexpr (kQ4 || kU8) {
          dot = _mm512_dpbusd_epi32(dot, w[r], xv);
        } else {
          dot = _mm512_dpbusd_epi32(dot, _mm512_xor_si512(xv, flip), w[r]);
        }
      }
      _mm512_store_si512(c[m], dot);
    }
    ScaleBlock<MT>(&c[0][0], wd + j * 16, xs + j * XS, acc);
  }
  for (int m = 0; m < MT; ++m) _mm512_store_ps(out + m * 16, acc[m]);
}

// Q4_K on VNNI for MT <= kVnniMaxTokens tokens: vpdpbusd of the nibbles with the activations
// broadcast, no correction (the mins enter through the sub-block sums); then
// ScaleSuperBlockQ4K as on the tiles. XS as in GroupVnni.
template <int MT, int XS = 16>
HINGE_AMX_INLINE void GroupVnniQ4K(const PackedMatrix& p, int64_t g, const int8_t* xq,
                                   const float* xs, const float* xbs, float* out) {
  const uint8_t* wq = p.qs.get() + static_cast<size_t>(g) * p.qs_row_bytes;
  __m512 acc[MT];
  for (int m = 0; m < MT; ++m) acc[m] = _mm512_setzero_ps();
  alignas(64) int32_t c[8][256];
  const Prefetch pf = GetVnniPrefetchPlan().q4k;
  for (int64_t sb = 0; sb < p.nb; ++sb) {
    const uint8_t* base = wq + static_cast<size_t>(sb) * kPackedQ4KSuperBytes;
    // The prefetch is spread over the sub-blocks: 37 lines in one burst fill the line-fill
    // buffers and stall.
    const char* ahead = reinterpret_cast<const char*>(base + pf.bytes);
    prefetch_lines(ahead + 8 * 256, kPackedQ4KSuperBytes - 8 * 256, pf.hint);
    for (int j = 0; j < 8; ++j) {
      prefetch_lines(ahead + j * 256, 256, pf.hint);
      __m512i w[8];
      LoadWeightRows<true>(base + j * 256, w);
      const int64_t s = sb * 8 + j;
      for (int m = 0; m < MT; ++m) {
        const int8_t* xm = xq + (s * XS + m) * 32;
        __m512i dot = _mm512_setzero_si512();
        for (int r = 0; r < 8; ++r) {
          int32_t x4;
          std::memcpy(&x4, xm + r * 4, 4);
          dot = _mm512_dpbusd_epi32(dot, w[r], _mm512_set1_epi32(x4));
        }
        _mm512_store_si512(c[j] + m * 16, dot);
      }
    }
    ScaleSuperBlockQ4K<MT, XS>(c, base + 8 * 256, xs + sb * XS, xbs + sb * 8 * XS, acc);
  }
  for (int m = 0; m < MT; ++m) _mm512_store_ps(out + m * 16, acc[m]);
}

// n (1..4) tokens of a row group on VNNI; u8: Q8_0 packed as q + 128.
template <bool kQ4>
HINGE_AMX_INLINE void VnniTokens(const PackedMatrix& p, int64_t g, int n, bool u8,
                                 const int8_t* xq, const float* xs, const int32_t* const* sums,
                                 float* out) {
#define HINGE_VNNI_N(k)                                  \
  if (n == k) {                                          \
    if (!kQ4 && u8)                                      \
      GroupVnni<k, false, true>(p, g, xq, xs, sums, out); \
    else                                                 \
      GroupVnni<k, kQ4>(p, g, xq, xs, sums, out);         \
    return;                                              \
  }
  HINGE_VNNI_N(1) HINGE_VNNI_N(2) HINGE_VNNI_N(3) HINGE_VNNI_N(4)
#undef HINGE_VNNI_N
}
