// Weight-matrix products: the hot loop of every forward pass.
//
// A weight matrix is `rows` rows of `cols` elements stored in GGUF layout (ne[0] = cols is
// contiguous; each row is ggml_row_bytes(type, cols) bytes). Activations are f32.
//
//   y[t * rows + r] = sum_c W[r, c] * x[t * cols + c]      for t in [0, num_tokens)
//
// For quantized weights the activations are quantized on the fly (Q8_0 blocks for Q8_0/Q4_0,
// Q8_K for the k-quants) and the dot products run in integer arithmetic, as ggml does.
// Runtime CPU dispatch (Highway) picks the best kernel for the machine at first use.
// No allocation once `scratch` has grown to the largest batch.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/ggml_type.h"
#include "common/thread_pool.h"

namespace hinge::kernels {

struct MatrixView {
  GgmlType type = GgmlType::F32;
  const void* data = nullptr;  // rows * row_bytes bytes
  int64_t rows = 0;            // output features
  int64_t cols = 0;            // input features (multiple of the type's block size)
  size_t row_bytes = 0;        // ggml_row_bytes(type, cols)
};

// Reusable scratch for quantized activations; grows, never shrinks.
struct MatmulScratch {
  std::vector<uint8_t> bytes;
};

// Multithreaded, SIMD (runtime-dispatched).
void matmul(const MatrixView& w, const float* x, int64_t num_tokens, float* y, ThreadPool& pool,
            MatmulScratch& scratch);

// Plain scalar reference (single-threaded) for parity tests: dequantize each row to f32 and
// accumulate in double.
void matmul_ref(const MatrixView& w, const float* x, int64_t num_tokens, float* y);

}  // namespace hinge::kernels
