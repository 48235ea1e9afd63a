#include "model/rope_rotations.h"

#include <algorithm>

#include "common/status.h"

namespace hinge {

const float* const* RopeRotations::tables(std::span<const int32_t> offsets) {
  const size_t begin = ptrs_.size();
  // A reallocation would leave the pointers handed out earlier in the step dangling.
  HINGE_CHECK_MSG(begin + offsets.size() <= ptrs_.capacity(),
                  "RopeRotations: {} pointers this step, {} reserved", begin + offsets.size(),
                  ptrs_.capacity());
  for (const int32_t d : offsets) {
    if (d == 0) {
      ptrs_.push_back(nullptr);
      continue;
    }
    const size_t k = static_cast<size_t>(d / block_size_);
    if (k >= tables_.size()) tables_.resize(k + 1);
    std::vector<float>& t = tables_[k];
    if (t.empty()) {
      t.resize(static_cast<size_t>(std::max<int64_t>(2, rope_->n_rot)));
      kernels::rope_rotation(*rope_, d, t.data());
    }
    ptrs_.push_back(t.data());
  }
  return ptrs_.data() + begin;
}

}  // namespace hinge
