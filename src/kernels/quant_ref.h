// Typed scalar references for each block format (the generic entry points live in quant.h), and
// the scalar integer dot products the SIMD kernels are checked against.
// Internal to src/kernels and its tests. `n` is always a multiple of the block size.
#pragma once

#include <cstdint>

#include "kernels/quant_block.h"

namespace hinge::kernels {

// ---- quantize (ggml's *_ref algorithms) ----
void quantize_row_q8_0_ref(const float* x, BlockQ8_0* y, int64_t n);
void quantize_row_q4_0_ref(const float* x, BlockQ4_0* y, int64_t n);
void quantize_row_q4_k_ref(const float* x, BlockQ4_K* y, int64_t n);
void quantize_row_q5_k_ref(const float* x, BlockQ5_K* y, int64_t n);
void quantize_row_q6_k_ref(const float* x, BlockQ6_K* y, int64_t n);
void quantize_row_q8_k_ref(const float* x, BlockQ8_K* y, int64_t n);

// ---- dequantize (bit-exact with ggml) ----
void dequantize_row_q8_0_ref(const BlockQ8_0* x, float* y, int64_t n);
void dequantize_row_q4_0_ref(const BlockQ4_0* x, float* y, int64_t n);
void dequantize_row_q4_k_ref(const BlockQ4_K* x, float* y, int64_t n);
void dequantize_row_q5_k_ref(const BlockQ5_K* x, float* y, int64_t n);
void dequantize_row_q6_k_ref(const BlockQ6_K* x, float* y, int64_t n);
void dequantize_row_q8_k_ref(const BlockQ8_K* x, float* y, int64_t n);

// ---- dot products of one weight row with one quantized activation row (n values) ----
// Integer sums per block, then f32 scaling, the same arithmetic as ggml's generic vec_dot.
float vec_dot_q8_0_q8_0_ref(int64_t n, const BlockQ8_0* w, const BlockQ8_0* x);
float vec_dot_q4_0_q8_0_ref(int64_t n, const BlockQ4_0* w, const BlockQ8_0* x);
float vec_dot_q4_k_q8_k_ref(int64_t n, const BlockQ4_K* w, const BlockQ8_K* x);
float vec_dot_q5_k_q8_k_ref(int64_t n, const BlockQ5_K* w, const BlockQ8_K* x);
float vec_dot_q6_k_q8_k_ref(int64_t n, const BlockQ6_K* w, const BlockQ8_K* x);

}  // namespace hinge::kernels
