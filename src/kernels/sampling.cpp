// Sampling kernels: the scalar reference here, the SIMD version below it (Highway, runtime
// dispatch).
#include "kernels/sampling.h"

#include <algorithm>
#include <cmath>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/sampling.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

HWY_BEFORE_NAMESPACE();
namespace hinge::kernels {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// exp(x) for x <= 0: Cody-Waite reduction x = n ln2 + r, |r| <= ln2 / 2, then cephes' expf
// polynomial (about 1 ulp) and 2^n into the exponent. Below -125 ln2 (~e^-86.6, 2^-125 of the
// top weight) it flushes to 0. Cheaper than hwy's general Exp (no overflow or large-n paths):
// this pass is most of what a sampled token costs.
template <class D>
HWY_INLINE hn::Vec<D> ExpNonPositive(D d, hn::Vec<D> x) {
  const hn::RebindToSigned<D> di;
  const auto lo = hn::Set(d, -86.6433983f);  // -125 ln2
  const auto tiny = hn::Lt(x, lo);
  x = hn::Max(x, lo);
  const auto n = hn::Round(hn::Mul(x, hn::Set(d, 1.44269504088896341f)));
  auto r = hn::NegMulAdd(n, hn::Set(d, 0.693359375f), x);
  r = hn::NegMulAdd(n, hn::Set(d, -2.12194440e-4f), r);
  auto p = hn::Set(d, 1.9875691500e-4f);
  p = hn::MulAdd(p, r, hn::Set(d, 1.3981999507e-3f));
  p = hn::MulAdd(p, r, hn::Set(d, 8.3334519073e-3f));
  p = hn::MulAdd(p, r, hn::Set(d, 4.1665795894e-2f));
  p = hn::MulAdd(p, r, hn::Set(d, 1.6666665459e-1f));
  p = hn::MulAdd(p, r, hn::Set(d, 5.0000001201e-1f));
  const auto y = hn::MulAdd(p, hn::Mul(r, r), hn::Add(r, hn::Set(d, 1.0f)));
  const auto scaled = hn::Add(hn::BitCast(di, y), hn::ShiftLeft<23>(hn::ConvertTo(di, n)));
  return hn::IfThenZeroElse(tiny, hn::BitCast(d, scaled));
}

double ExpShiftedSimd(const float* HWY_RESTRICT x, int64_t n, float max, float scale,
                      float* HWY_RESTRICT probs, double* HWY_RESTRICT run_sums,
                      float* HWY_RESTRICT block_max, uint16_t* HWY_RESTRICT log_bins) {
  const hn::ScalableTag<float> df;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  const auto vmax = hn::Set(df, max);
  const auto vscale = hn::Set(df, scale);
  const hn::RebindToSigned<decltype(df)> di;
  const hn::Rebind<uint16_t, decltype(df)> du16;
  const auto vone = hn::Set(di, static_cast<int32_t>(kLogOne));
  const auto vlast = hn::Set(di, kLogBins - 1);
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
        const auto e = ExpNonPositive(df, hn::Mul(hn::Sub(hn::LoadU(df, x + j), vmax), vscale));
        hn::StoreU(e, df, probs + j);
        if (log_bins) {  // min((1.0f - min(bits, 1.0f)) >> 18, last), as integers
          const auto d = hn::Sub(vone, hn::Min(hn::BitCast(di, e), vone));
          const auto b = hn::Min(hn::ShiftRight<kLogBinShift>(d), vlast);
          hn::StoreU(hn::DemoteTo(du16, b), du16, log_bins + j);
        }
        acc = hn::Add(acc, e);
        bmax = hn::Max(bmax, e);
      }
      if (block_max) block_max[i / kExpBlock] = hn::GetLane(hn::MaxOfLanes(df, bmax));
    }
    double run = static_cast<double>(hn::GetLane(hn::SumOfLanes(df, acc)));
    float tail_max = 0.0f;
    for (; i < end; ++i) {
      probs[i] = std::exp((x[i] - max) * scale);
      if (log_bins) log_bins[i] = static_cast<uint16_t>(log_bin(probs[i]));
      run += probs[i];
      tail_max = std::max(tail_max, probs[i]);
    }
    if (block_max && end % kExpBlock != 0) block_max[end / kExpBlock] = tail_max;
    if (run_sums) run_sums[r / kExpRun] = run;
    total += run;
  }
  return total;
}


// Block b of kExpBlock ids can hold no kept id.
inline bool skip_block(const float* block_max, int64_t b, float w_cut) {
  return block_max != nullptr && block_max[b] < w_cut;
}

// acc plus the kept values of block [i, i + kExpBlock) of a cut (w > w_cut, or w == w_cut and
// id <= id_cut), lane-wise.
template <class DF>
HWY_INLINE hn::Vec<DF> KeptBlockSum(DF df, const float* HWY_RESTRICT w, int64_t i, float w_cut,
                                    int32_t id_cut, hn::Vec<DF> acc) {
  const hn::RebindToSigned<DF> di;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  const auto vcut = hn::Set(df, w_cut);
  const auto vid = hn::Set(di, id_cut);
  const auto iota = hn::Iota(di, 0);
  for (int64_t j = i; j < i + kExpBlock; j += N) {
    const auto v = hn::LoadU(df, w + j);
    const auto idx = hn::Add(iota, hn::Set(di, static_cast<int32_t>(j)));
    const auto id_ok = hn::RebindMask(df, hn::Not(hn::Gt(idx, vid)));  // no int Le in hwy 1.0
    const auto kept = hn::Or(hn::Gt(v, vcut), hn::And(hn::Eq(v, vcut), id_ok));
    acc = hn::Add(acc, hn::IfThenElseZero(kept, v));
  }
  return acc;
}

double KeptSumSimd(const float* HWY_RESTRICT w, int64_t n, float w_cut, int32_t id_cut,
                   const float* HWY_RESTRICT block_max) {
  const hn::ScalableTag<float> df;
  const KeptCut c{w_cut, id_cut};
  double total = 0.0;
  for (int64_t r = 0; r < n; r += kExpRun) {
    const int64_t end = std::min(n, r + kExpRun);
    auto acc = hn::Zero(df);
    int64_t i = r;
    for (; i + kExpBlock <= end; i += kExpBlock)
      if (!skip_block(block_max, i / kExpBlock, w_cut))
        acc = KeptBlockSum(df, w, i, w_cut, id_cut, acc);
    double run = static_cast<double>(hn::GetLane(hn::SumOfLanes(df, acc)));
    for (; i < end; ++i)
      if (is_kept(w[i], i, c)) run += w[i];
    total += run;
  }
  return total;
}

int64_t GatherBetweenSimd(const float* HWY_RESTRICT w, int64_t n, float lo, float hi,
                          int32_t* HWY_RESTRICT ids, const float* HWY_RESTRICT block_max) {
  const hn::ScalableTag<float> df;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  const auto vlo = hn::Set(df, lo);
  const auto vhi = hn::Set(df, hi);
  int64_t count = 0;
  int64_t i = 0;
  // A test per vector and a scalar look at the few vectors that hold any: the gathered set is
  // small next to the vocabulary (hwy 1.0's CompressStore copies its 1 KiB table per call).
  for (; i + kExpBlock <= n; i += kExpBlock) {
    if (skip_block(block_max, i / kExpBlock, lo)) continue;
    for (int64_t j = i; j < i + kExpBlock; j += N) {
      const auto v = hn::LoadU(df, w + j);
      if (hn::AllFalse(df, hn::And(hn::Ge(v, vlo), hn::Le(v, vhi)))) continue;
      for (int64_t k = j; k < j + N; ++k) {
        ids[count] = static_cast<int32_t>(k);
        count += (w[k] >= lo && w[k] <= hi) ? 1 : 0;
      }
    }
  }
  for (; i < n; ++i)
    if (w[i] >= lo && w[i] <= hi) ids[count++] = static_cast<int32_t>(i);
  return count;
}

int64_t DrawKeptSimd(const float* HWY_RESTRICT w, int64_t n, float w_cut, int32_t id_cut,
                     double r, const float* HWY_RESTRICT block_max) {
  const hn::ScalableTag<float> df;
  const KeptCut c{w_cut, id_cut};
  double acc = 0.0;
  auto scan = [&](int64_t from, int64_t to) -> int64_t {  // exact f64, id order
    for (int64_t k = from; k < to; ++k) {
      if (!is_kept(w[k], k, c)) continue;
      acc += w[k];
      if (r < acc) return k;
    }
    return -1;
  };
  int64_t i = 0;
  for (; i + kExpBlock <= n; i += kExpBlock) {
    if (skip_block(block_max, i / kExpBlock, w_cut)) continue;
    const auto s = KeptBlockSum(df, w, i, w_cut, id_cut, hn::Zero(df));
    const double bs = static_cast<double>(hn::GetLane(hn::SumOfLanes(df, s)));
    // The f32 block sum may round below the exact one: enter the block when it comes close,
    // and let the exact scan decide.
    if (acc + bs * (1.0 + 1e-5) > r) {
      const int64_t k = scan(i, i + kExpBlock);
      if (k >= 0) return k;
    } else {
      acc += bs;
    }
  }
  return scan(i, n);
}

}  // namespace HWY_NAMESPACE
}  // namespace hinge::kernels
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace hinge::kernels {

HWY_EXPORT(ExpShiftedSimd);

double exp_shifted(const float* x, int64_t n, float max, float scale, float* probs,
                   double* run_sums, float* block_max, uint16_t* log_bins) {
  return HWY_DYNAMIC_DISPATCH(ExpShiftedSimd)(x, n, max, scale, probs, run_sums, block_max,
                                              log_bins);
}

HWY_EXPORT(KeptSumSimd);
HWY_EXPORT(GatherBetweenSimd);
HWY_EXPORT(DrawKeptSimd);

double kept_sum(const float* w, int64_t n, KeptCut c, const float* block_max) {
  return HWY_DYNAMIC_DISPATCH(KeptSumSimd)(w, n, c.w_cut, c.id_cut, block_max);
}

double kept_sum_ref(const float* w, int64_t n, KeptCut c) {
  double s = 0.0;
  for (int64_t i = 0; i < n; ++i)
    if (is_kept(w[i], i, c)) s += w[i];
  return s;
}

int64_t gather_between(const float* w, int64_t n, float lo, float hi, int32_t* ids,
                       const float* block_max) {
  return HWY_DYNAMIC_DISPATCH(GatherBetweenSimd)(w, n, lo, hi, ids, block_max);
}

int64_t gather_between_ref(const float* w, int64_t n, float lo, float hi, int32_t* ids) {
  int64_t count = 0;
  for (int64_t i = 0; i < n; ++i)
    if (w[i] >= lo && w[i] <= hi) ids[count++] = static_cast<int32_t>(i);
  return count;
}

int64_t draw_kept(const float* w, int64_t n, KeptCut c, double r, const float* block_max) {
  return HWY_DYNAMIC_DISPATCH(DrawKeptSimd)(w, n, c.w_cut, c.id_cut, r, block_max);
}

int64_t draw_kept_ref(const float* w, int64_t n, KeptCut c, double r) {
  double acc = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    if (!is_kept(w[i], i, c)) continue;
    acc += w[i];
    if (r < acc) return i;
  }
  return -1;
}

double exp_shifted_ref(const float* x, int64_t n, float max, float scale, float* probs,
                       double* run_sums, float* block_max, uint16_t* log_bins) {
  double total = 0.0;
  if (block_max)
    for (int64_t b = 0; b * kExpBlock < n; ++b) block_max[b] = 0.0f;
  for (int64_t r = 0; r < n; r += kExpRun) {
    double run = 0.0;
    for (int64_t i = r; i < std::min(n, r + kExpRun); ++i) {
      probs[i] = std::exp((x[i] - max) * scale);
      if (log_bins) log_bins[i] = static_cast<uint16_t>(log_bin(probs[i]));
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
