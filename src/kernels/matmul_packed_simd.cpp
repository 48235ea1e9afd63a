// The packed Q8_0 / Q4_0 matmul kernel (layout: matmul_packed.h): 512-bit AVX-512 VNNI, two
// blocks per vector.
//
// Per (row, token, pair of blocks): one vpdpbusd (64 u8 x i8 products, the activation's
// correction for the u8 offset riding in as the accumulator input), one i32 -> f32 conversion
// and one FMA with the two blocks' d_w * d_x broadcast as a 64-bit pair. The GGUF-layout kernel
// (matmul_q8.cpp) needs the same three operations (four for Q8_0: vpsignb) for one block on
// 256-bit vectors, so this one does twice the work per instruction. The scale products are
// computed a chunk at a time ahead of the dot loop, as in matmul_q8.cpp.
//
// Tiles: 4 rows x 4 tokens (16 accumulators; every weight vector is reused by 4 tokens, every
// activation vector by 4 rows); 8 rows x 1 token for decode. Tokens are processed in blocks of
// at most ~256 KiB of activations, so the activations a row tile reuses stay in L2 while the
// weights stream.
//
// Batch invariance: every (row, token) pair owns one accumulator that takes the pairs in order
// with the same three operations and ends in the same reduction, whatever its tile, so the
// result does not depend on the other tokens in the call.
//
// Compiled for the AVX3 target (HINGE_SIMD_VNNI, with g++ and clang alike: every function here
// carries the attribute); packed_matmul_supported() is false everywhere else and matmul never
// calls the kernel there.
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/cpu_features.h"
#include "kernels/matmul_kernels.h"
#include "kernels/matmul_packed.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/matmul_packed_simd.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "kernels/simd_util-inl.h"

HWY_BEFORE_NAMESPACE();
namespace hinge::kernels {
namespace HWY_NAMESPACE {

#if HINGE_SIMD_VNNI

// Every function here carries HINGE_VNNI_ATTR (simd_util-inl.h).

// Blocks per scale chunk (even): the tile's d_w * d_x products for this many blocks are computed
// into a stack buffer (RM * NT * kChunk floats) before the dot loop over them.
constexpr int64_t kChunk = 128;
// Activation bytes per token block.
constexpr size_t kTokenBlockBytes = size_t{256} << 10;

// A pair of blocks of row weights as 64 u8 in interleaved order.
template <bool kQ4>
HINGE_VNNI_INLINE __m512i LoadPair(const uint8_t* p) {
  if constexpr (kQ4) {
    const __m512i v = _mm512_broadcast_i64x4(_mm256_load_si256(reinterpret_cast<const __m256i*>(p)));
    return _mm512_and_si512(_mm512_srlv_epi64(v, _mm512_set_epi64(4, 4, 4, 4, 0, 0, 0, 0)),
                            _mm512_set1_epi8(0x0F));
  } else {
    return _mm512_load_si512(p);
  }
}

// Two consecutive floats broadcast as (f0, f1, f0, f1, ...): one 64-bit broadcast load.
HINGE_VNNI_INLINE __m512 BroadcastPair(const float* f) {
  double d;
  std::memcpy(&d, f, sizeof d);
  return _mm512_castpd_ps(_mm512_set1_pd(d));
}

// RM rows x NT tokens over nb blocks. w[i]: row i's packed qs; wd[i]: its f16 scales; x[k],
// xd[k], xc[k]: token k's packed quants, scales and corrections. out[i * NT + k].
template <int RM, int NT, bool kQ4>
HINGE_VNNI_INLINE void PackedTile(const uint8_t* const* w, const uint16_t* const* wd,
                           const int8_t* const* x, const float* const* xd,
                           const int32_t* const* xc, int64_t nb, size_t prefetch_stride,
                           float* out) {
  constexpr size_t kPair = kQ4 ? 32 : 64;
  __m512 acc[RM][NT];
  for (int i = 0; i < RM; ++i)
    for (int k = 0; k < NT; ++k) acc[i][k] = _mm512_setzero_ps();
  alignas(64) float scale[RM][NT][kChunk];
  for (int64_t c0 = 0; c0 < nb; c0 += kChunk) {
    const int64_t n = nb - c0 < kChunk ? nb - c0 : kChunk;  // even
    int64_t j = 0;
    for (; j + 8 <= n; j += 8) {
      for (int i = 0; i < RM; ++i) {
        const __m256 dw =
            _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(wd[i] + c0 + j)));
        for (int k = 0; k < NT; ++k)
          _mm256_store_ps(&scale[i][k][j], _mm256_mul_ps(dw, _mm256_loadu_ps(xd[k] + c0 + j)));
      }
    }
    for (; j < n; ++j)
      for (int i = 0; i < RM; ++i)
        for (int k = 0; k < NT; ++k) scale[i][k][j] = F16ToF32(wd[i][c0 + j]) * xd[k][c0 + j];
    for (int64_t j2 = 0; j2 < n; j2 += 2) {
      const size_t off = static_cast<size_t>((c0 + j2) / 2) * kPair;
      __m512i wv[RM];
      for (int i = 0; i < RM; ++i) {
        _mm_prefetch(reinterpret_cast<const char*>(w[i] + off + prefetch_stride), _MM_HINT_T0);
        wv[i] = LoadPair<kQ4>(w[i] + off);
      }
      for (int k = 0; k < NT; ++k) {
        const __m512i xv = _mm512_load_si512(x[k] + (c0 + j2) * 32);
        const __m512i corr =
            _mm512_zextsi128_si512(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(xc[k] + c0 + j2)));
        for (int i = 0; i < RM; ++i) {
          const __m512 dot = _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(corr, wv[i], xv));
          acc[i][k] = _mm512_fmadd_ps(BroadcastPair(&scale[i][k][j2]), dot, acc[i][k]);
        }
      }
    }
  }
  for (int i = 0; i < RM; ++i)
    for (int k = 0; k < NT; ++k) out[i * NT + k] = _mm512_reduce_add_ps(acc[i][k]);
}

// Rows [r, r + RM) (padded storage: always readable) x tokens [t, t + NT); stores rows < row_end.
// wq: row r's quants (packed Q8_0 or Q4_0 as kQ4 says, or Q4_0 unpacked to bytes), rows wstride
// bytes apart.
template <int RM, int NT, bool kQ4>
HINGE_VNNI_INLINE void PackedRunTile(const PackedArgs& a, int64_t r, int64_t row_end, int64_t t,
                                     const uint8_t* wq, size_t wstride) {
  const PackedMatrix& p = *a.w;
  const uint8_t* w[RM];
  const uint16_t* wd[RM];
  for (int i = 0; i < RM; ++i) {
    w[i] = wq + static_cast<size_t>(i) * wstride;
    wd[i] = p.d.get() + (r + i) * p.nb;
  }
  const int8_t* x[NT];
  const float* xd[NT];
  const int32_t* xc[NT];
  for (int k = 0; k < NT; ++k) {
    x[k] = a.x + static_cast<size_t>(t + k) * a.x_row_bytes;
    xd[k] = a.x_scales + (t + k) * p.nb;
    xc[k] = a.x_corr + (t + k) * p.nb;
  }
  // The same pair in the next tile's rows (a prefetch past the matrix is harmless). Measured on
  // llama-1b q8_0 decode: 1 tile ahead 25.0 GB/s, 2 tiles 24.1, 4 tiles 23.2, none 22.1.
  const size_t prefetch_stride = RM * wstride;
  float out[RM * NT];
  PackedTile<RM, NT, kQ4>(w, wd, x, xd, xc, p.nb, prefetch_stride, out);
  for (int i = 0; i < RM && r + i < row_end; ++i)
    for (int k = 0; k < NT; ++k) a.y[(t + k) * a.y_stride + r + i] = out[i * NT + k];
}

// Rows [r, r + 4) x tokens [t0, t1), 4 tokens at a time, then the 1..3 left.
template <bool kQ4>
HINGE_VNNI_INLINE void PackedRowTile(const PackedArgs& a, int64_t r, int64_t row_end, int64_t t0,
                                     int64_t t1, const uint8_t* wq, size_t wstride) {
  int64_t t = t0;
  for (; t + 4 <= t1; t += 4) PackedRunTile<4, 4, kQ4>(a, r, row_end, t, wq, wstride);
  switch (t1 - t) {
    case 3:
      PackedRunTile<4, 3, kQ4>(a, r, row_end, t, wq, wstride);
      break;
    case 2:
      PackedRunTile<4, 2, kQ4>(a, r, row_end, t, wq, wstride);
      break;
    case 1:
      PackedRunTile<4, 1, kQ4>(a, r, row_end, t, wq, wstride);
      break;
    default:
      break;
  }
}

// Q4_0 rows to bytes (the Q8_0 kernel's operand), for reuse by many token tiles: the nibble
// unpacking then costs once per row tile and token block instead of once per token tile. Exact:
// the same u8 values the Q4_0 tile would compute.
HINGE_VNNI_INLINE void UnpackQ4Rows(const PackedMatrix& p, int64_t r, int rows, uint8_t* dst) {
  const size_t pairs = static_cast<size_t>(p.nb / 2);
  for (int i = 0; i < rows; ++i) {
    const uint8_t* src = p.qs.get() + static_cast<size_t>(r + i) * p.qs_row_bytes;
    uint8_t* d = dst + static_cast<size_t>(i) * pairs * 64;
    for (size_t j = 0; j < pairs; ++j) _mm512_store_si512(d + j * 64, LoadPair<true>(src + j * 32));
  }
}

// Token blocks of at least this many tokens unpack their Q4_0 row tiles first.
constexpr int64_t kUnpackMinTokens = 8;
// Largest unpacked Q4_0 row tile (4 rows); wider matrices keep the nibble path.
constexpr size_t kUnpackBytes = size_t{32} << 10;

template <bool kQ4>
HINGE_VNNI_INLINE void PackedRowsImpl(const PackedArgs& a, int64_t row_begin, int64_t row_end) {
  const PackedMatrix& p = *a.w;
  if (a.num_tokens == 1) {
    for (int64_t r = row_begin; r < row_end; r += 8)
      PackedRunTile<8, 1, kQ4>(a, r, row_end, 0,
                               p.qs.get() + static_cast<size_t>(r) * p.qs_row_bytes,
                               p.qs_row_bytes);
    return;
  }
  int64_t tb = static_cast<int64_t>(kTokenBlockBytes / a.x_row_bytes) / 4 * 4;
  if (tb < 4) tb = 4;
  const size_t unpacked_stride = static_cast<size_t>(p.nb / 2) * 64;
  alignas(64) uint8_t unpacked[kQ4 ? kUnpackBytes : 64];
  for (int64_t t0 = 0; t0 < a.num_tokens; t0 += tb) {
    const int64_t t1 = t0 + tb < a.num_tokens ? t0 + tb : a.num_tokens;
    const bool unpack = kQ4 && t1 - t0 >= kUnpackMinTokens && 4 * unpacked_stride <= kUnpackBytes;
    for (int64_t r = row_begin; r < row_end; r += 4) {
      if (unpack) {
        UnpackQ4Rows(p, r, 4, unpacked);
        PackedRowTile<false>(a, r, row_end, t0, t1, unpacked, unpacked_stride);
      } else {
        PackedRowTile<kQ4>(a, r, row_end, t0, t1,
                           p.qs.get() + static_cast<size_t>(r) * p.qs_row_bytes, p.qs_row_bytes);
      }
    }
  }
}

HINGE_VNNI_ATTR void PackedRowsQ8(const PackedArgs& a, int64_t b, int64_t e) {
  PackedRowsImpl<false>(a, b, e);
}
HINGE_VNNI_ATTR void PackedRowsQ4(const PackedArgs& a, int64_t b, int64_t e) {
  PackedRowsImpl<true>(a, b, e);
}

void MatmulRowsPacked(const PackedArgs& a, int64_t b, int64_t e) {
  if (a.w->type == GgmlType::Q4_0)
    PackedRowsQ4(a, b, e);
  else
    PackedRowsQ8(a, b, e);
}
bool PackedSupported() { return cpu_has_avx512_vnni(); }

#else

void MatmulRowsPacked(const PackedArgs& /*a*/, int64_t /*b*/, int64_t /*e*/) {}
bool PackedSupported() { return false; }

#endif

}  // namespace HWY_NAMESPACE
}  // namespace hinge::kernels
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace hinge::kernels {

HWY_EXPORT(MatmulRowsPacked);
HWY_EXPORT(PackedSupported);

bool packed_layout_supported(GgmlType type, PackedLayout layout) {
  if (layout == PackedLayout::kBf16Tiles)
    return (type == GgmlType::F16 || type == GgmlType::BF16) &&
           ((amx_kernel_compiled() && cpu_has_amx_bf16()) ||
            (bf16_dp_kernel_compiled() && cpu_has_avx512_bf16()));
  if (layout == PackedLayout::kFloatGroups) return float_groups_avx2_usable(type);
  if (layout == PackedLayout::kAmxTiles && rowgroups_avx2_only(type))
    return rowgroups_avx2_usable(type);
  if (layout == PackedLayout::kAmxTiles)
    return ((type == GgmlType::Q8_0 || type == GgmlType::Q4_0 || type == GgmlType::Q4_K) &&
            amx_kernel_usable()) ||
           rowgroups_avx2_usable(type);
  if (type != GgmlType::Q8_0 && type != GgmlType::Q4_0) return false;
  return HWY_DYNAMIC_DISPATCH(PackedSupported)();
}

bool packed_matmul_supported(GgmlType type) {
  return packed_layout_supported(type, PackedLayout::kAmxTiles) ||
         packed_layout_supported(type, PackedLayout::kVnniPairs) ||
         packed_layout_supported(type, PackedLayout::kBf16Tiles) ||
         packed_layout_supported(type, PackedLayout::kFloatGroups);
}


void matmul_rows_packed(const PackedArgs& a, int64_t b, int64_t e) {
  HWY_DYNAMIC_DISPATCH(MatmulRowsPacked)(a, b, e);
}

}  // namespace hinge::kernels
#endif  // HWY_ONCE
