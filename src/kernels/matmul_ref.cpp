// Scalar matmul references: matmul_ref (dequantize + double accumulation, the "true" product of
// the stored weights and f32 activations) and matmul_ref_quantized (what matmul computes, with
// quantized activations and integer dot products).
#include <cstdlib>
#include <vector>

#include "kernels/matmul.h"
#include "kernels/matmul_kernels.h"
#include "kernels/quant.h"
#include "kernels/quant_ref.h"

namespace hinge::kernels {

void matmul_ref(const MatrixView& w, const float* x, int64_t num_tokens, float* y) {
  std::vector<float> row(static_cast<size_t>(w.cols));
  const auto* base = static_cast<const uint8_t*>(w.data);
  for (int64_t r = 0; r < w.rows; ++r) {
    if (!dequantize_row_ref(w.type, base + r * w.row_bytes, row.data(), w.cols)) std::abort();
    for (int64_t t = 0; t < num_tokens; ++t) {
      const float* xt = x + t * w.cols;
      double acc = 0.0;
      for (int64_t c = 0; c < w.cols; ++c) acc += static_cast<double>(row[c]) * xt[c];
      y[t * w.rows + r] = static_cast<float>(acc);
    }
  }
}

void matmul_ref_quantized(const MatrixView& w, const float* x, int64_t num_tokens, float* y) {
  const GgmlType act = matmul_activation_type(w.type);
  if (act == GgmlType::F32) {
    matmul_ref(w, x, num_tokens, y);
    return;
  }
  const size_t act_row_bytes = ggml_row_bytes(*ggml_type_traits(act), w.cols);
  std::vector<uint8_t> xq(act_row_bytes * static_cast<size_t>(num_tokens));
  for (int64_t t = 0; t < num_tokens; ++t)
    quantize_row_ref(act, x + t * w.cols, xq.data() + t * act_row_bytes, w.cols);
  const auto* base = static_cast<const uint8_t*>(w.data);
  for (int64_t r = 0; r < w.rows; ++r) {
    const void* wr = base + r * w.row_bytes;
    for (int64_t t = 0; t < num_tokens; ++t) {
      const void* xt = xq.data() + t * act_row_bytes;
      float v = 0.0f;
      switch (w.type) {
        case GgmlType::Q8_0:
          v = vec_dot_q8_0_q8_0_ref(w.cols, static_cast<const BlockQ8_0*>(wr),
                                    static_cast<const BlockQ8_0*>(xt));
          break;
        case GgmlType::Q4_0:
          v = vec_dot_q4_0_q8_0_ref(w.cols, static_cast<const BlockQ4_0*>(wr),
                                    static_cast<const BlockQ8_0*>(xt));
          break;
        case GgmlType::Q4_K:
          v = vec_dot_q4_k_q8_k_ref(w.cols, static_cast<const BlockQ4_K*>(wr),
                                    static_cast<const BlockQ8_K*>(xt));
          break;
        case GgmlType::Q5_K:
          v = vec_dot_q5_k_q8_k_ref(w.cols, static_cast<const BlockQ5_K*>(wr),
                                    static_cast<const BlockQ8_K*>(xt));
          break;
        case GgmlType::Q6_K:
          v = vec_dot_q6_k_q8_k_ref(w.cols, static_cast<const BlockQ6_K*>(wr),
                                    static_cast<const BlockQ8_K*>(xt));
          break;
        default:
          std::abort();
      }
      y[t * w.rows + r] = v;
    }
  }
}

}  // namespace hinge::kernels
