// F16 and BF16 weights in 16-row groups (PackedLayout::kFloatGroups, "row-groups") on AVX2 +
// FMA + F16C: the floating-point GEMM for CPUs without AVX-512 BF16 or AMX (AMD Zen 3 and Zen 2,
// Intel client cores), where an HF checkpoint or an f16 GGUF otherwise ran on the row-major
// f32 FMA kernel (matmul_float.cpp) at 31% of the FMA peak and 0.44x llama.cpp's prefill.
//
// A group stores, column by column, its 16 rows' weights as they are in the file (32 bytes per
// column): one load and two vcvtph2ps (F16) or zero-extending shifts (BF16) give rows 0-7 and
// 8-15 of column k as f32, exactly. The product is an outer product per column: the token's
// x[k] broadcast, one FMA per 8 rows, so the accumulators hold whole output rows and need no
// horizontal sums. Register tile: 16 rows x 6 tokens (12 accumulators), per column 1 weight
// load, 6 broadcasts and 12 FMAs.
//
// Blocking (prefill): tokens in blocks of kTokenBlock, columns in blocks of kColBlock. A block
// of activations (kTokenBlock x kColBlock f32 = 96 KiB) stays in L2 while every group of the
// thread's rows passes over it; a group's weights for the column block (8 KiB) stay in L1 while
// the token tiles reuse them; y accumulates across column blocks. Decode (up to 6 tokens) runs
// group by group, each group's weights front to back, 1 or 2 tokens on 4 or 2 groups at once
// so that the FMA latency does not bound the weight stream.
//
// Batch invariant: a (row, token) result takes the same f32 operations whatever the number of
// tokens in the call (see Rows).
//
// Summation order differs from the row-major kernel (per-lane partial sums there, one running
// sum per row and column block here), so the two agree to f32 rounding, not bit for bit
// (tests/kernels_float_groups_test.cpp checks against the double-precision reference).
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/cpu_features.h"
#include "kernels/matmul_kernels.h"
#include "kernels/matmul_packed.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define HINGE_FG_AVX2_COMPILED 1
#include <immintrin.h>
#else
#define HINGE_FG_AVX2_COMPILED 0
#endif

namespace hinge::kernels {

#if HINGE_FG_AVX2_COMPILED
namespace {

#define HINGE_FG_ATTR __attribute__((target("avx2,fma,f16c")))
#define HINGE_FG_INLINE inline __attribute__((always_inline)) HINGE_FG_ATTR

constexpr int kTile = static_cast<int>(kFloatGroupTile);  // tokens per register tile
constexpr int64_t kTokenBlock = 96;                       // tokens per block (a multiple of kTile)
constexpr int64_t kColBlock = 256;                        // columns per block

// How a column's 16 weights are stored: as packed (F16, BF16) or converted once to f32 for
// the token tiles of a column block (prefill).
enum class Fmt { kF16, kBf16, kF32 };
template <Fmt F>
using Elem = std::conditional_t<F == Fmt::kF32, float, uint16_t>;

// Rows 0-7 and 8-15 of one column as f32.
template <Fmt F>
HINGE_FG_INLINE void LoadColumn(const Elem<F>* p, __m256* lo, __m256* hi) {
  if constexpr (F == Fmt::kF32) {
    *lo = _mm256_load_ps(p);
    *hi = _mm256_load_ps(p + 8);
  } else if constexpr (F == Fmt::kBf16) {
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    *lo = _mm256_castsi256_ps(
        _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm256_castsi256_si128(v)), 16));
    *hi = _mm256_castsi256_ps(
        _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm256_extracti128_si256(v, 1)), 16));
  } else {
    *lo = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    *hi = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 8)));
  }
}

// acc[g][h][t] += columns [0, kc) of G groups (w: group 0's first column, the next groups
// `group_stride` elements on) times T tokens (x[t]: the token's first column, its columns XS
// floats apart), one FMA chain per (row, token) in column order.
template <Fmt F, int G, int T, int XS>
HINGE_FG_INLINE void TileColumns(const Elem<F>* w, size_t group_stride, const float* const* x,
                                 int64_t kc, __m256 (&acc)[G][2][T]) {
  for (int64_t k = 0; k < kc; ++k) {
#pragma GCC unroll 4
    for (int g = 0; g < G; ++g) {
      __m256 lo, hi;
      LoadColumn<F>(w + g * group_stride + k * 16, &lo, &hi);
#pragma GCC unroll 6
      for (int t = 0; t < T; ++t) {
        const __m256 b = _mm256_broadcast_ss(x[t] + k * XS);
        acc[g][0][t] = _mm256_fmadd_ps(lo, b, acc[g][0][t]);
        acc[g][1][t] = _mm256_fmadd_ps(hi, b, acc[g][1][t]);
      }
    }
  }
}

// y[t][16g .. 16g + valid rows) = (or +=) the tile's rows for T tokens.
template <int G, int T>
HINGE_FG_INLINE void StoreTile(__m256 (&acc)[G][2][T], float* y, int64_t y_stride,
                               int64_t rows_left, bool add) {
#pragma GCC unroll 4
  for (int g = 0; g < G; ++g) {
    const int64_t n_valid = rows_left - g * 16 < 16 ? rows_left - g * 16 : 16;
#pragma GCC unroll 6
    for (int t = 0; t < T; ++t) {
      __m256 lo = acc[g][0][t], hi = acc[g][1][t];
      float* out = y + t * y_stride + g * 16;
      if (n_valid == 16) {
        if (add) {
          lo = _mm256_add_ps(_mm256_loadu_ps(out), lo);
          hi = _mm256_add_ps(_mm256_loadu_ps(out + 8), hi);
        }
        _mm256_storeu_ps(out, lo);
        _mm256_storeu_ps(out + 8, hi);
      } else {  // the matrix's last group, padded: only its real rows
        alignas(32) float tmp[16];
        _mm256_store_ps(tmp, lo);
        _mm256_store_ps(tmp + 8, hi);
        for (int64_t n = 0; n < n_valid; ++n) out[n] = add ? out[n] + tmp[n] : tmp[n];
      }
    }
  }
}

// Where one column block's product goes: rows from 16 * g, tokens from t, columns from k0.
struct BlockPos {
  int64_t g, t, k0, kc;
};

// G groups x T tokens over one column block; w: the first group's column k0. Decode reads the
// activation rows, prefill the token tiles (FloatGroupArgs).
template <Fmt F, int G, int T, bool kDecode>
HINGE_FG_INLINE void Tile(const Elem<F>* w, size_t group_stride, const FloatGroupArgs& a,
                          const BlockPos& at, int64_t row_end) {
  const int64_t cols = a.w->cols;
  const float* xs[T];
  constexpr int XS = kDecode ? 1 : kTile;
  for (int i = 0; i < T; ++i)
    xs[i] = kDecode ? a.x + (at.t + i) * cols + at.k0
                    : a.x_tiles + (at.t / kTile * cols + at.k0) * kTile + (at.t % kTile + i);
  float* const y = a.y + at.t * a.y_stride + at.g * 16;
  if constexpr (!kDecode) {
    // The output lines StoreTile reads and writes after the columns: rows of y lie y_stride
    // floats apart (a token block's y outgrows L2 and L3 serves it), so fetch them while the
    // FMAs run instead of stalling on them at the end.
    for (int i = 0; i < T; ++i) {
      _mm_prefetch(reinterpret_cast<const char*>(y + i * a.y_stride), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(y + i * a.y_stride + G * 16 - 1), _MM_HINT_T0);
    }
  }
  __m256 acc[G][2][T];
  for (int i = 0; i < G; ++i)
    for (int j = 0; j < T; ++j) acc[i][0][j] = acc[i][1][j] = _mm256_setzero_ps();
  TileColumns<F, G, T, XS>(w, group_stride, xs, at.kc, acc);
  StoreTile<G, T>(acc, y, a.y_stride, row_end - at.g * 16, at.k0 > 0);
}

// Decode: T tokens (1-6) over groups [g, g1), one column block, read from the packed copy.
// 1 or 2 tokens take 4 or 2 groups at once, for enough independent FMA chains (4 cycles of
// latency on Zen 3, against 2 FMAs per column and token); other groups' rows never change a
// row's sum.
template <Fmt F, int T>
HINGE_FG_INLINE void DecodeGroups(const FloatGroupArgs& a, int64_t g, int64_t g1, int64_t k0,
                                  int64_t kc, int64_t row_end) {
  constexpr int G = T == 1 ? 4 : T == 2 ? 2 : 1;
  const PackedMatrix& p = *a.w;
  const size_t stride = p.qs_row_bytes / 2;
  auto w = [&](int64_t grp) {
    return reinterpret_cast<const uint16_t*>(p.qs.get() +
                                             static_cast<size_t>(grp) * p.qs_row_bytes) +
           k0 * 16;
  };
  for (; g + G <= g1; g += G) Tile<F, G, T, true>(w(g), stride, a, {g, 0, k0, kc}, row_end);
  for (; g < g1; ++g) Tile<F, 1, T, true>(w(g), stride, a, {g, 0, k0, kc}, row_end);
}

template <Fmt F>
HINGE_FG_INLINE void Decode(const FloatGroupArgs& a, int64_t g, int64_t g1, int64_t k0, int64_t kc,
                            int64_t row_end) {
  // clang-format off
  switch (a.num_tokens) {
    case 1: DecodeGroups<F, 1>(a, g, g1, k0, kc, row_end); break;
    case 2: DecodeGroups<F, 2>(a, g, g1, k0, kc, row_end); break;
    case 3: DecodeGroups<F, 3>(a, g, g1, k0, kc, row_end); break;
    case 4: DecodeGroups<F, 4>(a, g, g1, k0, kc, row_end); break;
    case 5: DecodeGroups<F, 5>(a, g, g1, k0, kc, row_end); break;
    default: DecodeGroups<F, 6>(a, g, g1, k0, kc, row_end); break;
  }
  // clang-format on
}

// Prefill: one group's column block, converted to f32 once (wf), times tokens [t0, t1) in tiles
// of 6: the conversion leaves the inner loop, which then issues only loads and FMAs. Each full
// tile also prefetches its share of `next` (the next group's packed block, next_bytes, which
// ConvertBlock reads next) into L2, so that the conversion does not wait on memory.
HINGE_FG_INLINE void PrefillBlock(const float* wf, const FloatGroupArgs& a, int64_t g, int64_t t0,
                                  int64_t t1, int64_t k0, int64_t kc, int64_t row_end,
                                  const char* next, int64_t next_bytes) {
  const int64_t tiles = (t1 - t0) / kTile;
  const int64_t lines_per_tile = tiles > 0 ? (next_bytes / 64 + tiles - 1) / tiles : 0;
  int64_t line = 0;
  int64_t t = t0;
  for (; t + kTile <= t1; t += kTile) {
    for (int64_t i = 0; i < lines_per_tile && line * 64 < next_bytes; ++i, ++line)
      _mm_prefetch(next + line * 64, _MM_HINT_T1);
    Tile<Fmt::kF32, 1, kTile, false>(wf, 0, a, {g, t, k0, kc}, row_end);
  }
  // clang-format off
  switch (t1 - t) {
    case 1: Tile<Fmt::kF32, 1, 1, false>(wf, 0, a, {g, t, k0, kc}, row_end); break;
    case 2: Tile<Fmt::kF32, 1, 2, false>(wf, 0, a, {g, t, k0, kc}, row_end); break;
    case 3: Tile<Fmt::kF32, 1, 3, false>(wf, 0, a, {g, t, k0, kc}, row_end); break;
    case 4: Tile<Fmt::kF32, 1, 4, false>(wf, 0, a, {g, t, k0, kc}, row_end); break;
    case 5: Tile<Fmt::kF32, 1, 5, false>(wf, 0, a, {g, t, k0, kc}, row_end); break;
    default: break;
  }
  // clang-format on
}

template <Fmt F>
HINGE_FG_INLINE void ConvertBlock(const uint16_t* w, int64_t kc, float* out) {
  for (int64_t k = 0; k < kc; ++k) {
    __m256 lo, hi;
    LoadColumn<F>(w + k * 16, &lo, &hi);
    _mm256_store_ps(out + k * 16, lo);
    _mm256_store_ps(out + k * 16 + 8, hi);
  }
}

// Every (row, token) sums its columns in blocks of kColBlock, each block one FMA chain in column
// order from zero, the blocks added to y in order: the same operations whatever the token
// count, the token's place among them, the loop order or the thread count (batch invariance).
template <Fmt F>
HINGE_FG_ATTR void Rows(const FloatGroupArgs& a, int64_t row_begin, int64_t row_end) {
  const PackedMatrix& p = *a.w;
  const int64_t cols = p.cols, nt = a.num_tokens;
  const int64_t g0 = row_begin / 16, g1 = (row_end + 15) / 16;
  if (nt <= kTile) {
    // Decode: each group's weights streamed once, front to back.
    constexpr int64_t kGroupsAtOnce = 4;
    for (int64_t g = g0; g < g1; g += kGroupsAtOnce) {
      const int64_t ge = g + kGroupsAtOnce < g1 ? g + kGroupsAtOnce : g1;
      for (int64_t k0 = 0; k0 < cols; k0 += kColBlock) {
        const int64_t kc = cols - k0 < kColBlock ? cols - k0 : kColBlock;
        Decode<F>(a, g, ge, k0, kc, row_end);
      }
    }
    return;
  }
  alignas(64) float wf[kColBlock * 16];
  for (int64_t t0 = 0; t0 < nt; t0 += kTokenBlock) {
    const int64_t t1 = t0 + kTokenBlock < nt ? t0 + kTokenBlock : nt;
    for (int64_t k0 = 0; k0 < cols; k0 += kColBlock) {
      const int64_t kc = cols - k0 < kColBlock ? cols - k0 : kColBlock;
      auto block = [&](int64_t g) {
        return reinterpret_cast<const char*>(p.qs.get()) + static_cast<size_t>(g) * p.qs_row_bytes +
               k0 * 32;
      };
      for (int64_t g = g0; g < g1; ++g) {
        ConvertBlock<F>(reinterpret_cast<const uint16_t*>(block(g)), kc, wf);
        PrefillBlock(wf, a, g, t0, t1, k0, kc, row_end, g + 1 < g1 ? block(g + 1) : nullptr,
                     g + 1 < g1 ? kc * 32 : 0);
      }
    }
  }
}

}  // namespace

bool float_groups_avx2_usable(GgmlType type) {
  static const bool cpu = cpu_identity().avx2_fma && cpu_identity().f16c;
  return (type == GgmlType::F16 || type == GgmlType::BF16) && cpu;
}

void matmul_rows_float_groups_avx2(const FloatGroupArgs& a, int64_t row_begin, int64_t row_end) {
  if (a.w->type == GgmlType::BF16)
    Rows<Fmt::kBf16>(a, row_begin, row_end);
  else
    Rows<Fmt::kF16>(a, row_begin, row_end);
}

#else

bool float_groups_avx2_usable(GgmlType /*type*/) {
  return false;
}
void matmul_rows_float_groups_avx2(const FloatGroupArgs& /*a*/, int64_t /*row_begin*/,
                                   int64_t /*row_end*/) {}

#endif

}  // namespace hinge::kernels
