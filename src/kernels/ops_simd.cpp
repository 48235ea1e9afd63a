// SIMD (Highway, runtime dispatch) versions of element-wise ops from ops.h.
#include <cmath>
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

// gate[i] = act(gate[i]) * up[i], the vector body then the tail one lane at a time.
template <class Act>
HWY_INLINE void Gated(float* HWY_RESTRICT gate, const float* HWY_RESTRICT up, int64_t n, Act act) {
  const hn::ScalableTag<float> df;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  int64_t i = 0;
  for (; i + N <= n; i += N)
    hn::StoreU(hn::Mul(act(df, hn::LoadU(df, gate + i)), hn::LoadU(df, up + i)), df, gate + i);
  const hn::CappedTag<float, 1> d1;
  for (; i < n; ++i)
    hn::StoreU(hn::Mul(act(d1, hn::LoadU(d1, gate + i)), hn::LoadU(d1, up + i)), d1, gate + i);
}

// gelu(g) = 0.5 g (1 + tanh(sqrt(2/pi) g (1 + 0.044715 g^2))) (the tanh approximation), with
// Highway's Tanh (a few ulp); ops.cpp's gelu_tanh is the scalar definition.
template <class D>
HWY_INLINE hn::Vec<D> GeluTanh(D df, hn::Vec<D> g) {
  const auto inner = hn::Mul(hn::Mul(hn::Set(df, 0.79788456080286535588f), g),
                             hn::MulAdd(hn::Mul(hn::Set(df, 0.044715f), g), g, hn::Set(df, 1.0f)));
  return hn::Mul(hn::Mul(hn::Set(df, 0.5f), g), hn::Add(hn::Set(df, 1.0f), hn::Tanh(df, inner)));
}

void SwigluSimd(float* HWY_RESTRICT gate, const float* HWY_RESTRICT up, int64_t n) {
  Gated(gate, up, n, [](auto d, auto g) { return Silu(d, g); });
}

void GegluTanhSimd(float* HWY_RESTRICT gate, const float* HWY_RESTRICT up, int64_t n) {
  Gated(gate, up, n, [](auto d, auto g) { return GeluTanh(d, g); });
}

// x = cap * tanh(x / cap).
void SoftcapSimd(float* HWY_RESTRICT x, int64_t n, float cap) {
  const hn::ScalableTag<float> df;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  const auto vc = hn::Set(df, cap), vi = hn::Set(df, 1.0f / cap);
  int64_t i = 0;
  for (; i + N <= n; i += N)
    hn::StoreU(hn::Mul(vc, hn::Tanh(df, hn::Mul(hn::LoadU(df, x + i), vi))), df, x + i);
  for (; i < n; ++i) x[i] = cap * std::tanh(x[i] / cap);
}

int64_t ArgmaxSimd(const float* HWY_RESTRICT x, int64_t n) {
  const hn::ScalableTag<float> df;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  if (n < 2 * N) return argmax_ref(x, n);
  auto m0 = hn::LoadU(df, x), m1 = hn::LoadU(df, x + N);
  int64_t i = 2 * N;
  for (; i + 2 * N <= n; i += 2 * N) {  // two accumulators: the max's latency overlaps
    m0 = hn::Max(m0, hn::LoadU(df, x + i));
    m1 = hn::Max(m1, hn::LoadU(df, x + i + N));
  }
  float m = hn::GetLane(hn::MaxOfLanes(df, hn::Max(m0, m1)));
  for (; i < n; ++i) m = x[i] > m ? x[i] : m;
  const auto vm = hn::Set(df, m);
  int64_t j = 0;
  for (; j + N <= n; j += N) {
    const intptr_t k = hn::FindFirstTrue(df, hn::Eq(hn::LoadU(df, x + j), vm));
    if (k >= 0) return j + k;
  }
  for (; j < n; ++j)
    if (x[j] == m) return j;
  return 0;
}

}  // namespace HWY_NAMESPACE
}  // namespace hinge::kernels
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace hinge::kernels {

HWY_EXPORT(SwigluSimd);
HWY_EXPORT(GegluTanhSimd);
HWY_EXPORT(SoftcapSimd);
HWY_EXPORT(ArgmaxSimd);

void geglu_tanh(float* gate, const float* up, int64_t n) {
  HWY_DYNAMIC_DISPATCH(GegluTanhSimd)(gate, up, n);
}

void softcap_inplace(float* x, int64_t n, float cap) { HWY_DYNAMIC_DISPATCH(SoftcapSimd)(x, n, cap); }

int64_t argmax(const float* x, int64_t n) { return HWY_DYNAMIC_DISPATCH(ArgmaxSimd)(x, n); }

void swiglu(float* gate, const float* up, int64_t n) {
  HWY_DYNAMIC_DISPATCH(SwigluSimd)(gate, up, n);
}

}  // namespace hinge::kernels
#endif  // HWY_ONCE
