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
#include <span>
#include <vector>

#include "common/ggml_type.h"
#include "common/thread_pool.h"

namespace hinge::kernels {

struct PackedMatrix;

struct MatrixView {
  GgmlType type = GgmlType::F32;
  const void* data = nullptr;  // rows * row_bytes bytes
  int64_t rows = 0;            // output features
  int64_t cols = 0;            // input features (multiple of the type's block size)
  size_t row_bytes = 0;        // ggml_row_bytes(type, cols)
  // Optional packed copy of the same weights (matmul_packed.h), used by matmul when the CPU
  // supports it; `data` stays the GGUF layout for everything else.
  const PackedMatrix* packed = nullptr;
};

// Reusable scratch for quantized activations (and normalized rows); grows, never shrinks.
struct MatmulScratch {
  std::vector<uint8_t> bytes;
  std::vector<float> normed;
};

// An RMSNorm fused into a matmul's activation pass: the product takes rmsnorm(x_t) * weight
// (kernels/ops.h rmsnorm, the same arithmetic) instead of x_t, each row normalized by the thread
// that quantizes it, inside the matmul's one pool dispatch. weight: [cols].
struct MatmulNorm {
  const float* weight = nullptr;
  float eps = 0.0f;
};

// Multithreaded, SIMD (runtime-dispatched). x: [num_tokens, cols] f32, y: [num_tokens, rows] f32
// (must not overlap x). Rows are split into contiguous chunks (>= 64K weights each) that the
// pool's threads claim dynamically; a matrix that is a single chunk runs on the calling thread.
void matmul(const MatrixView& w, const float* x, int64_t num_tokens, float* y, ThreadPool& pool,
            MatmulScratch& scratch);

// Several matrices applied to the same input (Q, K and V; gate and up): y_m = W_m x for each.
// The activations are quantized once and all the matrices' row chunks run in one pool dispatch
// (when they share a weight type and layout; otherwise one after the other). Every matrix has
// x's cols; at most 8. Results equal separate matmul calls bit for bit.
struct MatmulOut {
  const MatrixView* w = nullptr;
  float* y = nullptr;  // [num_tokens, w->rows]
};
void matmul_shared_input(std::span<const MatmulOut> outs, const float* x, int64_t num_tokens,
                         ThreadPool& pool, MatmulScratch& scratch,
                         const MatmulNorm* norm = nullptr);

// Plain scalar reference (single-threaded) for parity tests: dequantize each row to f32 and
// accumulate in double.
void matmul_ref(const MatrixView& w, const float* x, int64_t num_tokens, float* y);

// Scalar reference of exactly what matmul computes: for quantized weights the activations are
// quantized the way matmul quantizes them (Q8_0 or Q8_K) and the scalar integer dot products run
// (ggml's generic vec_dot arithmetic); for float weights it equals matmul_ref. Single-threaded.
void matmul_ref_quantized(const MatrixView& w, const float* x, int64_t num_tokens, float* y);

// The activation format matmul uses for weights of `type`: Q8_0 (Q8_0, Q4_0 weights), Q8_K
// (Q4_K, Q6_K) or F32 (float weights: activations used as is).
GgmlType matmul_activation_type(GgmlType type);

}  // namespace hinge::kernels
