// Nearest-rank percentiles, as the benchmarks and `hinge run --json` report them.
#pragma once

#include <algorithm>
#include <cmath>
#include <vector>

namespace hinge {

// Nearest-rank percentile p (0..100] of sorted values (0 when empty).
inline double percentile(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) return 0.0;
  const auto n = static_cast<double>(sorted.size());
  const auto rank = static_cast<size_t>(std::max(1.0, std::ceil(p / 100.0 * n)));
  return sorted[std::min(rank, sorted.size()) - 1];
}

}  // namespace hinge
