#include "pressure/pressure_policy.h"

#include <algorithm>
#include <cmath>

namespace hinge {

PressureActions pressure_actions(pressure::PressureLevel level, const PressurePolicyConfig& p,
                                 int32_t max_num_seqs, int32_t max_batched_tokens,
                                 int32_t total_blocks, int32_t used_blocks,
                                 int32_t reserved_blocks, pressure::PressureLevel thermal) {
  PressureActions a;
  const double heat = thermal == pressure::PressureLevel::kNormal ? 1.0
                      : thermal == pressure::PressureLevel::kElevated
                          ? p.thermal_fraction
                          : p.thermal_fraction * p.thermal_fraction;
  const double fraction =
      std::min(heat, level == pressure::PressureLevel::kNormal ? 1.0 : p.step_fraction);
  auto scaled = [&](int32_t v) {
    return std::max<int32_t>(1, static_cast<int32_t>(std::floor(v * fraction)));
  };
  if (fraction < 1.0) {
    a.max_num_seqs = scaled(max_num_seqs);
    a.max_batched_tokens = scaled(max_batched_tokens);
  }
  if (level == pressure::PressureLevel::kNormal) {
    a.kv_block_limit = total_blocks;
    return a;
  }
  a.max_tokens_cap = p.max_tokens;
  a.shrink_cache = true;
  // What running requests may still need: held + reserved (an over-estimate, never under).
  const int64_t needed = std::min<int64_t>(int64_t{used_blocks} + reserved_blocks, total_blocks);
  int64_t limit = needed;
  if (level == pressure::PressureLevel::kElevated) {
    limit = std::max<int64_t>(
        limit, static_cast<int64_t>(std::floor(p.elevated_kv_fraction * total_blocks)));
  } else {
    a.pause_admission = true;
  }
  a.kv_block_limit = static_cast<int32_t>(std::min<int64_t>(limit, total_blocks));
  return a;
}

}  // namespace hinge
