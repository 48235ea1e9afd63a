// KV-cache storage formats: quantize one (token, kv head) row of head_dim floats on write, and
// dequantize / dot / axpy it inside attention. One row = what kv::kv_dtype_head_bytes() counts.
//
// Row layouts (head_dim = n; little-endian; 1 <= n <= kKvMaxHeadDim):
//   kF32      [f32 x n]                                  4n bytes, plain copy
//   kF16      [f16 x n]                                  2n bytes, IEEE RNE (overflow -> inf)
//   kBf16     [bf16 x n]                                 2n bytes, RNE
//   kFp8E4m3  [e4m3 x n]                                 n bytes, value = decode(byte) * tensor_scale
//   kFp8E5m2  [e5m2 x n]                                 n bytes, value = decode(byte) * tensor_scale
//   kInt8     [f16 d][int8 q x n]                        n + 2 bytes, value = d * q, q in [-127, 127]
//   kInt4     [f16 d][u8 x ceil(n/2)]                    ceil(n/2) + 2 bytes, value = d * q,
//             q in [-7, 7] stored as the nibble q + 8; element 2j in the low nibble of byte j,
//             2j+1 in the high nibble (odd n: last high nibble is 8, i.e. zero)
// The f16 scale sits at offset 0, possibly unaligned: read it with memcpy.
//
// Scales:
//   int8/int4: per row, d = absmax / 127 (or / 7) rounded to f16 (clamped to 65504), computed
//     from the finite values; q = round-half-even(x / d) with the *stored* d, clamped.
//   fp8: per tensor (kv_spec does not count it): the byte stores x / tensor_scale, rounded to
//     nearest even, saturated to +-max finite (448 for e4m3, 57344 for e5m2). The engine should
//     keep one scale per (layer, K or V), chosen from calibration with kv_fp8_scale_for(); values
//     beyond absmax then saturate instead of becoming inf. tensor_scale must be finite and > 0
//     (HINGE_CHECK); it is ignored by every non-fp8 dtype.
//
// Non-finite inputs (deterministic, same in every path):
//   f32/f16/bf16: kept as IEEE does (NaN stays NaN, inf stays inf; f16 overflows to inf).
//   fp8: NaN -> 0x7F (positive NaN code in both formats); +-inf and overflow -> +-max finite.
//   int8/int4: NaN -> q = 0; +-inf -> +-qmax; neither takes part in the scale.
// All-zero rows store d = 0 and decode to exact zeros (never NaN).
//
// The *_ref functions are the scalar specification. The unsuffixed ones dispatch to the best
// Highway target at run time for f32/f16/bf16/int8 (dequantize, dot, axpy) and fall back to the
// reference elsewhere; quantize always runs the reference (one row per token write, so it is
// never the bottleneck, and it stays bit-exact by construction). Thread-safe: no mutable state.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kv/kv_spec.h"

namespace hinge::kernels {

using kv::KvDtype;

inline constexpr int kKvMaxHeadDim = 256;
inline constexpr float kFp8E4m3MaxFinite = 448.0f;
inline constexpr float kFp8E5m2MaxFinite = 57344.0f;

// Scalar fp8 codecs (no scale). Encode: RNE, saturating, NaN -> 0x7F. Decode: table lookup
// (e4m3 0x7F/0xFF -> NaN; e5m2 0x7C/0xFC -> +-inf, 0x7D..0x7F -> NaN).
uint8_t fp8_e4m3_from_f32(float x);
uint8_t fp8_e5m2_from_f32(float x);
float fp8_e4m3_to_f32(uint8_t b);
float fp8_e5m2_to_f32(uint8_t b);

// 448 for kFp8E4m3, 57344 for kFp8E5m2; 0 for other dtypes.
float kv_fp8_max_finite(KvDtype dtype);
// Per-tensor scale that maps the largest finite |x| of data[0..n) onto the format's max finite
// value: absmax / max_finite. For calibration, fold batches with `prev`: the result is
// max(prev, absmax / max_finite). When no finite non-zero value has been seen (prev <= 0 and data
// all zero / non-finite) returns 1.0f: any positive scale encodes zeros exactly.
float kv_fp8_scale_for(KvDtype dtype, const float* data, size_t n, float prev = 0.0f);

// Bytes of one row; equals kv::kv_dtype_head_bytes(dtype, head_dim).
size_t kv_row_bytes(KvDtype dtype, int head_dim);

// src [head_dim] f32 -> dst [kv_row_bytes] in `dtype`'s layout.
void kv_quantize_row(KvDtype dtype, const float* src, void* dst, int head_dim, float tensor_scale);
// src [kv_row_bytes] -> dst [head_dim] f32.
void kv_dequantize_row(KvDtype dtype, const void* src, float* dst, int head_dim,
                       float tensor_scale);
// sum_i q[i] * dequant(k_row)[i].
float kv_dot_row(KvDtype dtype, const float* q, const void* k_row, int head_dim,
                 float tensor_scale);
// out[i] += a * dequant(v_row)[i].
void kv_axpy_row(KvDtype dtype, float a, const void* v_row, float* out, int head_dim,
                 float tensor_scale);

void kv_quantize_row_ref(KvDtype dtype, const float* src, void* dst, int head_dim,
                         float tensor_scale);
void kv_dequantize_row_ref(KvDtype dtype, const void* src, float* dst, int head_dim,
                           float tensor_scale);
float kv_dot_row_ref(KvDtype dtype, const float* q, const void* k_row, int head_dim,
                     float tensor_scale);
void kv_axpy_row_ref(KvDtype dtype, float a, const void* v_row, float* out, int head_dim,
                     float tensor_scale);

}  // namespace hinge::kernels
