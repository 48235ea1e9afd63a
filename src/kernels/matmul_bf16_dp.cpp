// F16 / BF16 weights packed as kBf16Tiles (matmul_packed.h) on AVX-512 BF16 (`vdpbf16ps`), for
// CPUs that have it without AMX-BF16: AMD Zen 4 and later, Intel Cooper Lake (and any AMX machine
// with HINGE_DISABLE_AMX=1).
//
// The layout's 64-byte tile row r of block j of group g holds, in 32-bit lane n, the bf16 pair
// of weights (row 16g + n, columns 32j + 2r and 32j + 2r + 1). So
//   acc = vdpbf16ps(acc, tile row, broadcast of the token's activation pair 16j + r)
// adds both products to lane n = row n: no horizontal sums, no shuffles, one instruction per 32
// multiply-adds. The activations are the same bf16 rows the AMX path reads (rounded to nearest
// even once per call, convert_rows_bf16).
//
// Register block: 2 row groups x up to 4 tokens (8 accumulators cover vdpbf16ps's latency; per
// tile row 2 weight loads and 4 broadcasts feed 8 vdpbf16ps). Decode runs 2 row groups x 1
// token: two chains, streaming two sequential runs of weights.
//
// Batch invariance: every (token, row) result is one chain of vdpbf16ps over the pairs in order
// (j, then r), whatever the token count, token tile or thread split: a token's output is
// bit-identical alone and in any batch. It is not identical to the AMX-BF16 path (the tile
// unit's internal order is not documented) nor to the f32 FMA kernel; a process uses one.
//
// Cache blocking: tokens in blocks of about 256 KiB of bf16 activations (L2); inside a block a
// pair of row groups (2 x cols x 32 bytes) is reused from L2 by every token tile.
// GCC and clang on x86-64 (target attributes); elsewhere bf16_dp_kernel_compiled() is false.
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/matmul_kernels.h"
#include "kernels/matmul_packed.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define HINGE_BF16_DP_COMPILED 1
#include <immintrin.h>
#else
#define HINGE_BF16_DP_COMPILED 0
#endif

namespace hinge::kernels {

#if HINGE_BF16_DP_COMPILED

#define HINGE_BF16_DP_ATTR __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16")))
#define HINGE_BF16_DP_INLINE inline __attribute__((always_inline)) HINGE_BF16_DP_ATTR

namespace {

constexpr size_t kTokenBlockBytes = size_t{256} << 10;
constexpr int kMaxTokens = 4;  // tokens per register tile
// Row groups per register tile: 4 measured the same as 2 (1 and 2 threads, 2048 x 8192, 512
// tokens), and 2 keeps a pair's weights (2 x 256 KiB at 8192 columns) in L2 with the tokens.
constexpr int kGroups = 2;

// NG (1 or 2) row groups from g x MT (1..4) tokens from t, over all of K.
template <int NG, int MT>
HINGE_BF16_DP_INLINE void Tile(const Bf16AmxArgs& a, int64_t g, int64_t t, int64_t row_end) {
  const PackedMatrix& p = *a.w;
  const int64_t nb = p.nb, cols = p.cols;
  const uint8_t* w[NG];
  for (int i = 0; i < NG; ++i) w[i] = p.qs.get() + static_cast<size_t>(g + i) * p.qs_row_bytes;
  const int32_t* x[MT];
  for (int m = 0; m < MT; ++m) x[m] = reinterpret_cast<const int32_t*>(a.x + (t + m) * cols);
  __m512 acc[NG][MT];
  for (int i = 0; i < NG; ++i)
    for (int m = 0; m < MT; ++m) acc[i][m] = _mm512_setzero_ps();
  // No software prefetch: on Zen 4 the decode stream read fastest without it (one core 24.8 /
  // 21.3 GB/s best / median against 16.9 / 15.8 with T0 4 KiB ahead and 19.3 / 18.2 with T1
  // 16 KiB ahead, hinge_kernel_bench MatmulDecode F16).
  for (int64_t j = 0; j < nb; ++j) {
    for (int r = 0; r < 16; ++r) {
      __m512i wv[NG];
      for (int i = 0; i < NG; ++i)
        wv[i] = _mm512_load_si512(w[i] + static_cast<size_t>(j) * 1024 + r * 64);
      for (int m = 0; m < MT; ++m) {
        const __m512i xb = _mm512_set1_epi32(x[m][j * 16 + r]);
        for (int i = 0; i < NG; ++i)
          acc[i][m] = _mm512_dpbf16_ps(acc[i][m], reinterpret_cast<const __m512bh&>(wv[i]),
                                       reinterpret_cast<const __m512bh&>(xb));
      }
    }
  }
  for (int i = 0; i < NG; ++i) {
    const int64_t r0 = (g + i) * 16;
    if (r0 >= row_end) continue;
    const int64_t n_valid = row_end - r0 < 16 ? row_end - r0 : 16;
    const __mmask16 mask = static_cast<__mmask16>((1u << n_valid) - 1);
    for (int m = 0; m < MT; ++m)
      _mm512_mask_storeu_ps(a.y + (t + m) * a.y_stride + r0, mask, acc[i][m]);
  }
}

template <int NG>
HINGE_BF16_DP_INLINE void Tokens(const Bf16AmxArgs& a, int64_t g, int64_t t, int mt,
                                 int64_t row_end) {
  switch (mt) {
    case 1: Tile<NG, 1>(a, g, t, row_end); break;
    case 2: Tile<NG, 2>(a, g, t, row_end); break;
    case 3: Tile<NG, 3>(a, g, t, row_end); break;
    default: Tile<NG, 4>(a, g, t, row_end); break;
  }
}

HINGE_BF16_DP_ATTR void Bf16DpRows(const Bf16AmxArgs& a, int64_t row_begin, int64_t row_end) {
  const int64_t cols = a.w->cols;
  int64_t tb = static_cast<int64_t>(kTokenBlockBytes / (static_cast<size_t>(cols) * 2));
  tb = tb < kMaxTokens ? kMaxTokens : tb / kMaxTokens * kMaxTokens;
  const int64_t g0 = row_begin / 16, g1 = (row_end + 15) / 16;
  for (int64_t t0 = 0; t0 < a.num_tokens; t0 += tb) {
    const int64_t t1 = t0 + tb < a.num_tokens ? t0 + tb : a.num_tokens;
    for (int64_t g = g0; g < g1;) {
      const int ng = static_cast<int>(g1 - g < kGroups ? g1 - g : kGroups);
      for (int64_t t = t0; t < t1; t += kMaxTokens) {
        const int mt = static_cast<int>(t1 - t < kMaxTokens ? t1 - t : kMaxTokens);
        if (ng >= 4)
          Tokens<4>(a, g, t, mt, row_end);
        else if (ng == 3)
          Tokens<3>(a, g, t, mt, row_end);
        else if (ng == 2)
          Tokens<2>(a, g, t, mt, row_end);
        else
          Tokens<1>(a, g, t, mt, row_end);
      }
      g += ng;
    }
  }
}

}  // namespace

void matmul_rows_bf16_dp(const Bf16AmxArgs& a, int64_t row_begin, int64_t row_end) {
  Bf16DpRows(a, row_begin, row_end);
}

bool bf16_dp_kernel_compiled() { return true; }

__attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))
void convert_rows_bf16(const float* x, int64_t cols, uint16_t* xb) {
  int64_t c = 0;
  for (; c + 32 <= cols; c += 32) {
    const __m512bh v = _mm512_cvtne2ps_pbh(_mm512_loadu_ps(x + c + 16), _mm512_loadu_ps(x + c));
    _mm512_storeu_si512(xb + c, reinterpret_cast<const __m512i&>(v));
  }
  for (; c < cols; ++c) {
    uint32_t u;
    std::memcpy(&u, x + c, 4);
    xb[c] = (u & 0x7fffffffu) > 0x7f800000u
                ? static_cast<uint16_t>((u >> 16) | 64)
                : static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1)) >> 16);
  }
}

#else

void matmul_rows_bf16_dp(const Bf16AmxArgs& /*a*/, int64_t /*row_begin*/, int64_t /*row_end*/) {}
bool bf16_dp_kernel_compiled() { return false; }
void convert_rows_bf16(const float* /*x*/, int64_t /*cols*/, uint16_t* /*xb*/) {}

#endif

}  // namespace hinge::kernels
