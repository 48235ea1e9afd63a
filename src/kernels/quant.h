// Quantize / dequantize rows of every supported tensor type (GGUF block layouts, bit-exact with
// ggml's reference implementations), scalar references and SIMD versions.
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/ggml_type.h"

namespace hinge::kernels {

// n must be a multiple of the type's block size. Supported: F32, F16, BF16, Q8_0, Q4_0, Q4_K,
// Q5_K, Q6_K (and Q8_K for activations). Returns false for an unsupported type.
bool dequantize_row(GgmlType type, const void* src, float* dst, int64_t n);      // SIMD
bool dequantize_row_ref(GgmlType type, const void* src, float* dst, int64_t n);  // scalar
bool quantize_row_ref(GgmlType type, const float* src, void* dst, int64_t n);    // scalar

}  // namespace hinge::kernels
