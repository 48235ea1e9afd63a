#include "engine/spec_decode.h"

#include <algorithm>
#include <cmath>

namespace hinge {

int32_t ngram_draft(std::span<const int32_t> tokens, int32_t min_n, int32_t max_n, int32_t k,
                    std::vector<int32_t>* out) {
  out->clear();
  const size_t size = tokens.size();
  if (k <= 0 || min_n <= 0) return 0;
  const size_t lo = size > kNgramSearchWindow ? size - kNgramSearchWindow : 0;
  for (int32_t n = std::min<int32_t>(max_n, static_cast<int32_t>(size) - 1); n >= min_n; --n) {
    const size_t un = static_cast<size_t>(n);
    const std::span<const int32_t> suffix = tokens.subspan(size - un);
    // Earlier occurrences start at i <= size - n - 1 (at least one token follows them).
    for (size_t i = size - un; i-- > lo;) {
      if (tokens[i] != suffix[0] || !std::equal(suffix.begin(), suffix.end(), tokens.begin() + static_cast<ptrdiff_t>(i)))
        continue;
      const size_t from = i + un;
      const size_t count = std::min(static_cast<size_t>(k), size - from);
      out->assign(tokens.begin() + static_cast<ptrdiff_t>(from),
                  tokens.begin() + static_cast<ptrdiff_t>(from + count));
      return static_cast<int32_t>(count);
    }
  }
  return 0;
}

int32_t SpecController::next_k() {
  if (k_max_ <= 0) return 0;
  if (pause_ > 0) {
    --pause_;
    // Try again with one probe: a failure pauses again (doubling), a success grows k.
    if (pause_ == 0) {
      ema_ = 1.5 * kPauseBelow;
      probe_ = true;
    }
    return 0;
  }
  if (probe_) {
    probe_ = false;
    return 1;
  }
  return std::clamp(static_cast<int32_t>(std::ceil(ema_ * k_max_ - 1e-9)), 1, k_max_);
}

void SpecController::observe(int32_t drafted, int32_t accepted) {
  if (drafted <= 0) return;
  ema_ = (1 - kAlpha) * ema_ + kAlpha * static_cast<double>(accepted) / drafted;
  if (ema_ < kPauseBelow) {
    pause_ = pause_len_;
    pause_len_ = std::min(pause_len_ * 2, 1024);
  } else if (accepted > 0) {
    pause_len_ = kPauseSteps;
  }
}

}  // namespace hinge
