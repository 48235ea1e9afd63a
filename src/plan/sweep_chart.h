// The decode roofline grid as a chart: decode tok/s by context (log scale), one line per batch
// and KV dtype (the first dtype solid, the others dashed), as `hinge bench --sweep --svg` draws
// the measurement and `hinge simulate --sweep --svg` the prediction. A second set of points
// (`dots`) goes on the same axes as markers in its line's colour: the measurement drawn over the
// prediction, so where the model is wrong shows at a glance. Self-contained SVG 1.1.
#pragma once

#include <cstdint>
#include <span>
#include <string>

namespace hinge::plan {

// One cell of the grid: B sequences decoding at context L with one KV dtype.
struct SweepPoint {
  std::string kv_dtype;
  int64_t batch = 0, context = 0;
  double tokens_per_s = 0, step_ms = 0;
  double weight_bytes = 0, kv_bytes = 0;  // streamed per decode step
};

// `lines`: drawn as lines (and listed in the legend); `dots`: markers, matched to a line by
// (dtype, batch), a filled circle for the first dtype and an open one for the others;
// `dots_label` names them in the legend (empty: none).
std::string sweep_svg(std::span<const SweepPoint> lines, std::span<const SweepPoint> dots,
                      const std::string& title, const std::string& lines_label,
                      const std::string& dots_label);

}  // namespace hinge::plan
