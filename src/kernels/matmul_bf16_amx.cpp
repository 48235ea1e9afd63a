// The AMX-BF16 matmul for F16 / BF16 weights packed as kBf16Tiles (matmul_packed.h).
//
// y = W x with the tokens as the tile rows: A = 16 tokens x 32 activations (bf16, loaded
// straight from the row-major converted activations), B = the packed weight tile of 16 rows x
// 32 columns, C = 16 tokens x 16 rows of f32 sums. Unlike the int8 tiles there is no scale per
// block: C accumulates in f32 over all of K, in the tile unit, and is stored once per (token
// tile, row group). Register block: 2 token tiles x 2 row groups (C 0-3, A 4-5, B 6-7); a
// single token tile (decode, small batches) runs 1 x 2 with its A tile configured to the
// token count, so one token costs one row of the tile unit, not 16.
//
// Every token count takes this path (1 token included), so a (token, row) result is the same
// sequence of tile products whatever the batch: batch invariance holds for float models on
// AMX-BF16 as on the int8 kernels. It is not bit-identical to the f32 FMA kernel (the
// activations are rounded to bf16, and the tile unit's internal summation order is not
// documented: sequential FMAs, pairwise and block sums were each tried against it and none
// matched), so the two never mix within a process.
//
// Cache blocking: tokens in blocks of ~1 MiB of bf16 activations (kept in L2); inside a block,
// each pair of row groups (2 x cols / 32 KiB of weights) stays in L2 across the token tiles.
// GCC on x86-64 only (target attributes); elsewhere amx_kernel_compiled() is false.
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/amx_tile_config.h"
#include "kernels/cpu_features.h"
#include "kernels/matmul_kernels.h"
#include "kernels/matmul_packed.h"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define HINGE_BF16_AMX_COMPILED 1
#include <immintrin.h>
#else
#define HINGE_BF16_AMX_COMPILED 0
#endif

namespace hinge::kernels {

#if HINGE_BF16_AMX_COMPILED

#define HINGE_BF16_ATTR \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,amx-tile,amx-bf16")))
#define HINGE_BF16_INLINE inline __attribute__((always_inline)) HINGE_BF16_ATTR

namespace {

constexpr size_t kTokenBlockBytes = size_t{1} << 20;
constexpr int64_t kTile = 16;
// Weight tiles are prefetched this many blocks ahead when a single token tile streams them.
constexpr int64_t kPrefetchBlocks = 4;


// C 0-3: rows = tokens per tile; A 4-5: tokens x 64 bytes; B 6-7: 16 x 64 bytes.
HINGE_BF16_INLINE void Configure(int tokens) {
  AmxTileConfig c;
  for (int t = 0; t < 6; ++t) {
    c.colsb[t] = 64;
    c.rows[t] = static_cast<uint8_t>(tokens);
  }
  for (int t = 6; t < 8; ++t) {
    c.colsb[t] = 64;
    c.rows[t] = 16;
  }
  _tile_loadconfig(&c);
}

// Rows past row_end are not stored; tokens past num_tokens are not stored.
HINGE_BF16_INLINE void Store(const Bf16AmxArgs& a, const float* c, int64_t tt, int64_t g,
                             int64_t row_end) {
  const int64_t r0 = g * 16;
  if (r0 >= row_end) return;
  const int64_t n_valid = row_end - r0 < 16 ? row_end - r0 : 16;
  const __mmask16 mask = static_cast<__mmask16>((1u << n_valid) - 1);
  for (int64_t m = 0; m < kTile && tt * kTile + m < a.num_tokens; ++m)
    _mm512_mask_storeu_ps(a.y + (tt * kTile + m) * a.y_stride + r0, mask,
                          _mm512_load_ps(c + m * 16));
}

HINGE_BF16_INLINE void Prefetch(const uint8_t* tile) {
  for (int l = 0; l < 1024; l += 64) _mm_prefetch(reinterpret_cast<const char*>(tile + l), _MM_HINT_T0);
}

HINGE_BF16_ATTR void Bf16Rows(const Bf16AmxArgs& a, int64_t row_begin, int64_t row_end) {
  const PackedMatrix& p = *a.w;
  const int64_t nb = p.nb, cols = p.cols;
  const size_t x_stride = static_cast<size_t>(cols) * 2;
  const int64_t tiles = (a.num_tokens + kTile - 1) / kTile;
  const int tile_tokens = a.num_tokens < kTile ? static_cast<int>(a.num_tokens) : kTile;
  Configure(tile_tokens);
  int64_t tb = static_cast<int64_t>(kTokenBlockBytes / (x_stride * kTile));
  if (tb < 2) tb = 2;
  const int64_t g0 = row_begin / 16, g1 = (row_end + 15) / 16;
  auto wtile = [&](int64_t g, int64_t j) { return p.qs.get() + g * p.qs_row_bytes + j * 1024; };
  auto xtile = [&](int64_t tt, int64_t j) {
    return reinterpret_cast<const uint8_t*>(a.x) + tt * kTile * x_stride + j * 64;
  };
  alignas(64) float c[4][16 * 16];
  for (int64_t t0 = 0; t0 < tiles; t0 += tb) {
    const int64_t t1 = t0 + tb < tiles ? t0 + tb : tiles;
    for (int64_t g = g0; g < g1; g += 2) {
      const bool pair = g + 1 < g1;
      int64_t tt = t0;
      for (; tt + 2 <= t1; tt += 2) {  // 2 token tiles x 2 row groups
        _tile_zero(0);
        _tile_zero(1);
        _tile_zero(2);
        _tile_zero(3);
        for (int64_t j = 0; j < nb; ++j) {
          _tile_loadd(4, xtile(tt, j), x_stride);
          _tile_loadd(5, xtile(tt + 1, j), x_stride);
          _tile_loadd(6, wtile(g, j), 64);
          _tile_dpbf16ps(0, 4, 6);
          _tile_dpbf16ps(2, 5, 6);
          if (pair) {
            _tile_loadd(7, wtile(g + 1, j), 64);
            _tile_dpbf16ps(1, 4, 7);
            _tile_dpbf16ps(3, 5, 7);
          }
        }
        _tile_stored(0, c[0], 64);
        _tile_stored(2, c[2], 64);
        Store(a, c[0], tt, g, row_end);
        Store(a, c[2], tt + 1, g, row_end);
        if (pair) {
          _tile_stored(1, c[1], 64);
          _tile_stored(3, c[3], 64);
          Store(a, c[1], tt, g + 1, row_end);
          Store(a, c[3], tt + 1, g + 1, row_end);
        }
      }
      if (tt < t1) {  // one token tile x 2 row groups (decode streams the weights here)
        _tile_zero(0);
        _tile_zero(1);
        for (int64_t j = 0; j < nb; ++j) {
          if (j + kPrefetchBlocks < nb) {
            Prefetch(wtile(g, j + kPrefetchBlocks));
            if (pair) Prefetch(wtile(g + 1, j + kPrefetchBlocks));
          }
          _tile_loadd(4, xtile(tt, j), x_stride);
          _tile_loadd(6, wtile(g, j), 64);
          _tile_dpbf16ps(0, 4, 6);
          if (pair) {
            _tile_loadd(7, wtile(g + 1, j), 64);
            _tile_dpbf16ps(1, 4, 7);
          }
        }
        _tile_stored(0, c[0], 64);
        Store(a, c[0], tt, g, row_end);
        if (pair) {
          _tile_stored(1, c[1], 64);
          Store(a, c[1], tt, g + 1, row_end);
        }
      }
    }
  }
  _tile_release();
}

}  // namespace

void matmul_rows_bf16_amx(const Bf16AmxArgs& a, int64_t row_begin, int64_t row_end) {
  Bf16Rows(a, row_begin, row_end);
}

#else

void matmul_rows_bf16_amx(const Bf16AmxArgs& /*a*/, int64_t /*row_begin*/, int64_t /*row_end*/) {}

#endif

}  // namespace hinge::kernels
