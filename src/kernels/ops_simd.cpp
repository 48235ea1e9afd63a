// SIMD (Highway, runtime dispatch) versions of element-wise ops from ops.h.
#include <cstdint>

#include "kernels/ops.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/ops_simd.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>
#include <hwy/contrib/math/math-inl.h>

HWY_BEFORE_NAMESPACE();
namespace hinge::kernels {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// gate = gate * sigmoid(gate) * up, with Highway's Exp (a few ulp) of -|g| only, so it never
// overflows: sigmoid(g) = 1 / (1 + e) for g >= 0, e / (1 + e) below, e = exp(-|g|).
template <class D>
HWY_INLINE hn::Vec<D> Silu(D df, hn::Vec<D> g) {
  const auto one = hn::Set(df, 1.0f);
  const auto e = hn::Exp(df, hn::Neg(hn::Abs(g)));
  const auto num = hn::IfThenElse(hn::Ge(g, hn::Zero(df)), one, e);
  return hn::Mul(g, hn::Div(num, hn::Add(one, e)));
}

void SwigluSimd(float* HWY_RESTRICT gate, const float* HWY_RESTRICT up, int64_t n) {
  const hn::ScalableTag<float> df;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  int64_t i = 0;
  for (; i + N <= n; i += N)
    hn::StoreU(hn::Mul(Silu(df, hn::LoadU(df, gate + i)), hn::LoadU(df, up + i)), df, gate + i);
  const hn::CappedTag<float, 1> d1;  // the tail, one lane at a time
  for (; i < n; ++i)
    hn::StoreU(hn::Mul(Silu(d1, hn::LoadU(d1, gate + i)), hn::LoadU(d1, up + i)), d1, gate + i);
}

}  // namespace HWY_NAMESPACE
}  // namespace hinge::kernels
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace hinge::kernels {

HWY_EXPORT(SwigluSimd);

void swiglu(float* gate, const float* up, int64_t n) {
  HWY_DYNAMIC_DISPATCH(SwigluSimd)(gate, up, n);
}

}  // namespace hinge::kernels
#endif  // HWY_ONCE
