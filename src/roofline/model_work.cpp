#include "roofline/model_work.h"

#include <algorithm>

#include "model/model_config.h"
#include "model/model_weights.h"

namespace hinge::roofline {

namespace {
double macs(const kernels::MatrixView& m) {
  return static_cast<double>(m.rows) * static_cast<double>(m.cols);
}
}  // namespace

double prefill_flops_per_token(const ModelConfig& config, const ModelWeights& weights,
                               int64_t prompt_tokens) {
  double total = 0;
  for (const LayerWeights& l : weights.layers)
    total += macs(l.wq) + macs(l.wk) + macs(l.wv) + macs(l.wo) + macs(l.w_gate) + macs(l.w_up) +
             macs(l.w_down);
  const double mean_ctx = (static_cast<double>(std::max<int64_t>(prompt_tokens, 1)) + 1) / 2;
  for (int64_t layer = 0; layer < config.n_layers; ++layer) {
    const int32_t window = config.window_of(layer);
    const double ctx = window > 0 ? std::min(mean_ctx, static_cast<double>(window)) : mean_ctx;
    total += 2.0 * static_cast<double>(config.n_heads * config.head_dim) * ctx;
  }
  return 2.0 * total;
}

bool weights_run_on_integer_units(const ModelWeights& weights) {
  if (weights.layers.empty()) return false;
  switch (weights.layers.front().wq.type) {
    case GgmlType::F32:
    case GgmlType::F16:
    case GgmlType::BF16:
      return false;
    default:
      return true;
  }
}

}  // namespace hinge::roofline
