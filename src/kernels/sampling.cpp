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
                      float* HWY_RESTRICT probs) {
  const hn::ScalableTag<float> df;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  const auto vmax = hn::Set(df, max);
  const auto vscale = hn::Set(df, scale);
  double total = 0.0;
  int64_t i = 0;
  // f32 lanes over runs of 1024 values, then f64: the sum stays accurate for large vocabularies.
  constexpr int64_t kRun = 1024;
  while (i + N <= n) {
    auto acc = hn::Zero(df);
    const int64_t end = std::min(n, i + kRun);
    for (; i + N <= end; i += N) {
      const auto e = hn::Exp(df, hn::Mul(hn::Sub(hn::LoadU(df, x + i), vmax), vscale));
      hn::StoreU(e, df, probs + i);
      acc = hn::Add(acc, e);
    }
    total += static_cast<double>(hn::GetLane(hn::SumOfLanes(df, acc)));
  }
  for (; i < n; ++i) {
    probs[i] = std::exp((x[i] - max) * scale);
    total += probs[i];
  }
  return total;
}

}  // namespace HWY_NAMESPACE
}  // namespace hinge::kernels
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace hinge::kernels {

HWY_EXPORT(ExpShiftedSimd);

double exp_shifted(const float* x, int64_t n, float max, float scale, float* probs) {
  return HWY_DYNAMIC_DISPATCH(ExpShiftedSimd)(x, n, max, scale, probs);
}

double exp_shifted_ref(const float* x, int64_t n, float max, float scale, float* probs) {
  double total = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    probs[i] = std::exp((x[i] - max) * scale);
    total += probs[i];
  }
  return total;
}

}  // namespace hinge::kernels
#endif  // HWY_ONCE
