#include "model/model_weights.h"

namespace hinge {
namespace {
uint64_t matrix_bytes(const kernels::MatrixView& m) {
  return static_cast<uint64_t>(m.rows) * m.row_bytes;
}
uint64_t layer_bytes(const LayerWeights& l, int64_t dim) {
  return matrix_bytes(l.wq) + matrix_bytes(l.wk) + matrix_bytes(l.wv) + matrix_bytes(l.wo) +
         matrix_bytes(l.w_gate) + matrix_bytes(l.w_up) + matrix_bytes(l.w_down) +
         2 * static_cast<uint64_t>(dim) * sizeof(float);
}
}  // namespace

uint64_t ModelWeights::bytes_per_token() const {
  const int64_t dim = token_embd.cols;
  uint64_t total = token_embd.row_bytes + matrix_bytes(output) + dim * sizeof(float);
  for (const auto& l : layers) total += layer_bytes(l, dim);
  return total;
}

uint64_t ModelWeights::total_bytes() const {
  const int64_t dim = token_embd.cols;
  uint64_t total = matrix_bytes(token_embd) + dim * sizeof(float);
  if (output.data != token_embd.data) total += matrix_bytes(output);
  for (const auto& l : layers) total += layer_bytes(l, dim);
  return total;
}

}  // namespace hinge
