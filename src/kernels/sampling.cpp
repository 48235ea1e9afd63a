// Sampling kernels: the scalar reference here, the SIMD version below it (Highway, runtime
// dispatch).
#include "kernels/sampling.h"

#include <algorithm>
#include <cmath>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/sampling.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>
#include <hwy/contrib/math/math-inl.h>

HWY_BEFORE_NAMESPACE();
namespace hinge::kernels {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

double ExpShiftedSimd(const float* HWY_RESTRICT x, int64_t n, float max, float scale,
                      float* HWY_RESTRICT probs, double* HWY_RESTRICT run_sums,
                      float* HWY_RESTRICT block_max) {
  const hn::ScalableTag<float> df;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  const auto vmax = hn::Set(df, max);
  const auto vscale = hn::Set(df, scale);
  double total = 0.0;
  // f32 lanes within a run of kExpRun values, then f64: accurate for large vocabularies.
  for (int64_t r = 0; r < n; r += kExpRun) {
    const int64_t end = std::min(n, r + kExpRun);
    auto acc = hn::Zero(df);
    int64_t i = r;
    // Whole blocks of kExpBlock (a multiple of every vector width), then the tail.
    for (; i + kExpBlock <= end; i += kExpBlock) {
      auto bmax = hn::Zero(df);
      for (int64_t j = i; j < i + kExpBlock; j += N) {
        const auto e = hn::Exp(df, hn::Mul(hn::Sub(hn::LoadU(df, x + j), vmax), vscale));
        hn::StoreU(e, df, probs + j);
        acc = hn::Add(acc, e);
        bmax = hn::Max(bmax, e);
      }
      if (block_max) block_max[i / kExpBlock] = hn::GetLane(hn::MaxOfLanes(df, bmax));
    }
    double run = static_cast<double>(hn::GetLane(hn::SumOfLanes(df, acc)));
    float tail_max = 0.0f;
    for (; i < end; ++i) {
      probs[i] = std::exp((x[i] - max) * scale);
      run += probs[i];
      tail_max = std::max(tail_max, probs[i]);
    }
    if (block_max && end % kExpBlock != 0) block_max[end / kExpBlock] = tail_max;
    if (run_sums) run_sums[r / kExpRun] = run;
    total += run;
  }
  return total;
}

}  // namespace HWY_NAMESPACE
}  // namespace hinge::kernels
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace hinge::kernels {

HWY_EXPORT(ExpShiftedSimd);

double exp_shifted(const float* x, int64_t n, float max, float scale, float* probs,
                   double* run_sums, float* block_max) {
  return HWY_DYNAMIC_DISPATCH(ExpShiftedSimd)(x, n, max, scale, probs, run_sums, block_max);
}

double exp_shifted_ref(const float* x, int64_t n, float max, float scale, float* probs,
                       double* run_sums, float* block_max) {
  double total = 0.0;
  if (block_max)
    for (int64_t b = 0; b * kExpBlock < n; ++b) block_max[b] = 0.0f;
  for (int64_t r = 0; r < n; r += kExpRun) {
    double run = 0.0;
    for (int64_t i = r; i < std::min(n, r + kExpRun); ++i) {
      probs[i] = std::exp((x[i] - max) * scale);
      run += probs[i];
      if (block_max) block_max[i / kExpBlock] = std::max(block_max[i / kExpBlock], probs[i]);
    }
    if (run_sums) run_sums[r / kExpRun] = run;
    total += run;
  }
  return total;
}

}  // namespace hinge::kernels
#endif  // HWY_ONCE
