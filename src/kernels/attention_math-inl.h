// Per-target inner loops of the paged attention kernel (paged_attention.cpp): scores of a group
// of query heads against a tile of keys, the online softmax step and the weighted sum of value
// rows, each in a fixed operation order (batch invariance, see paged_attention.cpp). Included once
// per Highway target through foreach_target.h, hence the toggling include guard.
#if defined(HINGE_KERNELS_ATTENTION_MATH_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef HINGE_KERNELS_ATTENTION_MATH_INL_H_
#undef HINGE_KERNELS_ATTENTION_MATH_INL_H_
#else
#define HINGE_KERNELS_ATTENTION_MATH_INL_H_
#endif

// clang-format off
#include <hwy/highway.h>
#include <hwy/contrib/math/math-inl.h>
// clang-format on

#include <cmath>
#include <cstddef>
#include <limits>
#include <type_traits>

HWY_BEFORE_NAMESPACE();
namespace hinge::kernels {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using DF = hn::ScalableTag<float>;

#if HWY_TARGET != HWY_SCALAR
// Adds the 128-bit blocks of v: one 4-lane vector.
template <class D>
HWY_INLINE hn::Vec<hn::Full128<float>> SumBlocks(D d, hn::Vec<D> v) {
  if constexpr (hn::MaxLanes(D()) > 4) {
    const hn::Half<D> dh;
    return SumBlocks(dh, hn::Add(hn::LowerHalf(dh, v), hn::UpperHalf(dh, v)));
  } else {
    (void)d;
    return v;
  }
}

// [sum of the lanes of r0, .. of r3]: a transposing reduction, cheaper than four SumOfLanes.
HWY_INLINE hn::Vec<hn::Full128<float>> Sum4(DF df, hn::Vec<DF> r0, hn::Vec<DF> r1, hn::Vec<DF> r2,
                                            hn::Vec<DF> r3) {
  const hn::Repartition<uint64_t, DF> du;
  // Per block: [r0_0 + r0_2, r1_0 + r1_2, r0_1 + r0_3, r1_1 + r1_3], likewise r2 / r3.
  const auto t01 = hn::Add(hn::InterleaveLower(df, r0, r1), hn::InterleaveUpper(df, r0, r1));
  const auto t23 = hn::Add(hn::InterleaveLower(df, r2, r3), hn::InterleaveUpper(df, r2, r3));
  const auto u01 = hn::BitCast(du, t01), u23 = hn::BitCast(du, t23);
  const auto lo = hn::BitCast(df, hn::InterleaveLower(du, u01, u23));
  const auto hi = hn::BitCast(df, hn::InterleaveUpper(du, u01, u23));
  return SumBlocks(df, hn::Add(lo, hi));
}
#endif

// One vector of a K or V row as f32: f32 rows (the arena's, or a dequantized tile) as they are;
// f16, bf16 and int8 rows straight from the arena, int8 times its row's scale `sc`. Exact: the
// values DequantRow would write to the tile (the same conversion, the same one rounding of the
// scale's product), without its store and reload.
HWY_INLINE hn::Vec<DF> LoadRow(DF df, const float* p, float /*sc*/) {
  return hn::LoadU(df, p);
}
HWY_INLINE hn::Vec<DF> LoadRow(DF df, const hwy::float16_t* p, float /*sc*/) {
  return LoadKv(df, p);
}
HWY_INLINE hn::Vec<DF> LoadRow(DF df, const hwy::bfloat16_t* p, float /*sc*/) {
  return LoadKv(df, p);
}
HWY_INLINE hn::Vec<DF> LoadRow(DF df, const int8_t* p, float sc) {
  return hn::Mul(hn::Set(df, sc), LoadKv(df, p));
}

// Scores of HC query heads (q rows hdp apart) against keys k[t0 .. t0 + 4): each key vector
// is loaded once for all the heads. One accumulator per (head, key) over the row's vectors,
// then one transposing reduction per head: the same sequence for every (head, key).
template <int HC, typename T>
HWY_INLINE void DotHeads4(const float* HWY_RESTRICT q, const T* const* k, const float* sc,
                          size_t hdp, float sqrt_hd, float* s, size_t tp) {
  const DF df;
  const size_t N = hn::Lanes(df);
  hn::Vec<DF> acc[HC][4];
  for (int h = 0; h < HC; ++h)
    for (int r = 0; r < 4; ++r) acc[h][r] = hn::Zero(df);
  for (size_t i = 0; i < hdp; i += N) {
    const auto k0 = LoadRow(df, k[0] + i, sc[0]), k1 = LoadRow(df, k[1] + i, sc[1]);
    const auto k2 = LoadRow(df, k[2] + i, sc[2]), k3 = LoadRow(df, k[3] + i, sc[3]);
    for (int h = 0; h < HC; ++h) {
      const auto qv = hn::LoadU(df, q + h * hdp + i);
      acc[h][0] = hn::MulAdd(qv, k0, acc[h][0]);
      acc[h][1] = hn::MulAdd(qv, k1, acc[h][1]);
      acc[h][2] = hn::MulAdd(qv, k2, acc[h][2]);
      acc[h][3] = hn::MulAdd(qv, k3, acc[h][3]);
    }
  }
  for (int h = 0; h < HC; ++h) {
#if HWY_TARGET == HWY_SCALAR
    for (int r = 0; r < 4; ++r) s[h * tp + r] = hn::GetLane(acc[h][r]) / sqrt_hd;
#else
    const hn::Full128<float> d4;
    const auto sums = Sum4(df, acc[h][0], acc[h][1], acc[h][2], acc[h][3]);
    hn::StoreU(hn::Div(sums, hn::Set(d4, sqrt_hd)), d4, s + h * tp);
#endif
  }
}

// Scores of `heads` query heads of one KV head (q rows hdp apart, scores sp apart) for keys
// [begin, n): s[h * sp + t] (k[t] valid there). Groups of 4 keys may write up to 3 scores past n
// (within sp): a later range or FinishScores overwrites them. Each key's score is its own dot
// product: the same whatever the range is.
// sc: the keys' row scales (int8 rows read in place; unused, may be null, for other types).
template <typename T>
HWY_INLINE void ScoreRange(const float* HWY_RESTRICT q, size_t heads, const T* const* k,
                           size_t begin, size_t n, size_t hdp, size_t sp, float sqrt_hd,
                           float* HWY_RESTRICT s, const float* sc = nullptr) {
  for (size_t h0 = 0; h0 < heads; h0 += 4) {
    const size_t hc = std::min<size_t>(4, heads - h0);
    const float* qh = q + h0 * hdp;
    float* sh = s + h0 * sp;
    for (size_t t = begin; t < n; t += 4) {
      // The last 1..3 keys: missing ones repeat key t; their scores land past n.
      const size_t i4[4] = {t, t + 1 < n ? t + 1 : t, t + 2 < n ? t + 2 : t, t + 3 < n ? t + 3 : t};
      const T* k4[4] = {k[i4[0]], k[i4[1]], k[i4[2]], k[i4[3]]};
      float sc4[4] = {0.0f, 0.0f, 0.0f, 0.0f};
      if constexpr (std::is_same_v<T, int8_t>)
        for (int r = 0; r < 4; ++r) sc4[r] = sc[i4[r]];
      switch (hc) {
        case 4:
          DotHeads4<4, T>(qh, k4, sc4, hdp, sqrt_hd, sh + t, sp);
          break;
        case 3:
          DotHeads4<3, T>(qh, k4, sc4, hdp, sqrt_hd, sh + t, sp);
          break;
        case 2:
          DotHeads4<2, T>(qh, k4, sc4, hdp, sqrt_hd, sh + t, sp);
          break;
        default:
          DotHeads4<1, T>(qh, k4, sc4, hdp, sqrt_hd, sh + t, sp);
          break;
      }
    }
  }
}

// Soft-caps scores [begin, n) of each head when softcap > 0 and sets [0, begin) and [n, tp) to
// -inf.
HWY_INLINE void FinishScores(size_t heads, size_t begin, size_t n, size_t tp, size_t sp,
                             float softcap, float* HWY_RESTRICT s) {
  for (size_t h = 0; h < heads; ++h) {
    float* row = s + h * sp;
    if (softcap > 0.0f)
      for (size_t i = begin; i < n; ++i) row[i] = softcap * std::tanh(row[i] / softcap);
    for (size_t i = 0; i < begin; ++i) row[i] = -INFINITY;
    for (size_t i = n; i < tp; ++i) row[i] = -INFINITY;
  }
}

// ScoreRange over [begin, n), then FinishScores: a whole tile's scores.
template <typename T>
HWY_INLINE void ScoreTileHeads(const float* HWY_RESTRICT q, size_t heads, const T* const* k,
                               size_t begin, size_t n, size_t hdp, size_t tp, size_t sp,
                               float sqrt_hd, float softcap, float* HWY_RESTRICT s,
                               const float* sc = nullptr) {
  ScoreRange(q, heads, k, begin, n, hdp, sp, sqrt_hd, s, sc);
  FinishScores(heads, begin, n, tp, sp, softcap, s);
}

// Vector registers of the target: 32 with AVX-512, else taken as 16 (AVX2, SSE4; 32 on NEON,
// where 16 only costs a little).
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
constexpr int kVectorRegisters = 32;
#else
constexpr int kVectorRegisters = 16;
#endif

// Vectors of each head's accumulator row that AccumulateHeadsN keeps in registers per pass over
// the keys: HC x J accumulators, J value vectors and a weight fit with one register to spare
// (a spilled accumulator puts a store and a reload in every FMA chain: with 3 heads x 4 vectors
// on AVX2, f16 decode attention took 15-30% longer on Zen 3). At most 4.
template <int HC>
constexpr int AccumulateSpanVectors() {
  const int j = (kVectorRegisters - 2) / (HC + 1);
  return j > 4 ? 4 : j;
}

// acc[h][d, d + J N) += sum_{t < n} p[h][t] * rows[t][d, d + J N) for HC heads: each value vector
// is loaded once for all the heads; per element one FMA chain in t order.
template <int HC, int J, typename T>
HWY_INLINE void AccumulateSpan(const float* HWY_RESTRICT p, size_t tp, const T* const* rows,
                               const float* sc, size_t n, size_t d, size_t hdp,
                               float* HWY_RESTRICT acc) {
  const DF df;
  const size_t N = hn::Lanes(df);
  hn::Vec<DF> c[HC][J];
  for (int h = 0; h < HC; ++h)
    for (int j = 0; j < J; ++j) c[h][j] = hn::LoadU(df, acc + h * hdp + d + j * N);
  for (size_t t = 0; t < n; ++t) {
    const T* v = rows[t] + d;
    float st = 0.0f;
    if constexpr (std::is_same_v<T, int8_t>) st = sc[t];
    hn::Vec<DF> vj[J];
    for (int j = 0; j < J; ++j) vj[j] = LoadRow(df, v + j * N, st);
    for (int h = 0; h < HC; ++h) {
      const auto w = hn::Set(df, p[h * tp + t]);
      for (int j = 0; j < J; ++j) c[h][j] = hn::MulAdd(w, vj[j], c[h][j]);
    }
  }
  for (int h = 0; h < HC; ++h)
    for (int j = 0; j < J; ++j) hn::StoreU(c[h][j], df, acc + h * hdp + d + j * N);
}

// acc[h][0, hdp) += sum_{t < n} p[h][t] * rows[t][.] for HC heads at once (weights p rows tp
// (the scores' stride) apart, acc rows hdp apart), in spans of as many vectors as the registers
// hold. Every element's sum is the same FMA chain whatever the span it falls in.
template <int HC, typename T>
HWY_INLINE void AccumulateHeadsN(const float* HWY_RESTRICT p, size_t tp, const T* const* rows,
                                 const float* sc, size_t n, size_t hdp, float* HWY_RESTRICT acc) {
  const size_t N = hn::Lanes(DF());
  constexpr int J = AccumulateSpanVectors<HC>();
  size_t d = 0;
  for (; d + J * N <= hdp; d += J * N) AccumulateSpan<HC, J, T>(p, tp, rows, sc, n, d, hdp, acc);
  if constexpr (J > 2) {
    if (d + 2 * N <= hdp) {
      AccumulateSpan<HC, 2, T>(p, tp, rows, sc, n, d, hdp, acc);
      d += 2 * N;
    }
  }
  for (; d < hdp; d += N) AccumulateSpan<HC, 1, T>(p, tp, rows, sc, n, d, hdp, acc);
}

// sc: the rows' scales (int8 rows read in place; unused, may be null, for other types).
template <typename T>
HWY_INLINE void AccumulateHeads(const float* HWY_RESTRICT p, size_t tp, size_t heads,
                                const T* const* rows, size_t n, size_t hdp, float* HWY_RESTRICT acc,
                                const float* sc = nullptr) {
  for (size_t h0 = 0; h0 < heads; h0 += 4) {
    const float* ph = p + h0 * tp;
    float* ah = acc + h0 * hdp;
    switch (std::min<size_t>(4, heads - h0)) {
      case 4:
        AccumulateHeadsN<4, T>(ph, tp, rows, sc, n, hdp, ah);
        break;
      case 3:
        AccumulateHeadsN<3, T>(ph, tp, rows, sc, n, hdp, ah);
        break;
      case 2:
        AccumulateHeadsN<2, T>(ph, tp, rows, sc, n, hdp, ah);
        break;
      default:
        AccumulateHeadsN<1, T>(ph, tp, rows, sc, n, hdp, ah);
        break;
    }
  }
}

// Online softmax step of one query head: folds the tile's scores into (m, l), rescales acc when
// the running max grows, and turns s into the weights e^(s - m).
HWY_INLINE void SoftmaxStep(float* HWY_RESTRICT s, size_t tp, size_t hdp, float& m, float& l,
                            float* HWY_RESTRICT acc) {
  const DF df;
  const size_t N = hn::Lanes(df);
  auto vmax = hn::Set(df, -INFINITY);
  for (size_t i = 0; i < tp; i += N) vmax = hn::Max(vmax, hn::LoadU(df, s + i));
  const float m_new = std::max(m, hn::GetLane(hn::MaxOfLanes(df, vmax)));
  if (m_new > m && l > 0.0f) {
    const float alpha = std::exp(m - m_new);
    l *= alpha;
    const auto va = hn::Set(df, alpha);
    for (size_t i = 0; i < hdp; i += N)
      hn::StoreU(hn::Mul(va, hn::LoadU(df, acc + i)), df, acc + i);
  }
  m = m_new;
  const auto vm = hn::Set(df, m_new);
  auto vsum = hn::Zero(df);
  for (size_t i = 0; i < tp; i += N) {
    // exp(-inf - m) = 0 for the padding (hn::Exp returns 0 below -104).
    const auto e = hn::Exp(df, hn::Sub(hn::LoadU(df, s + i), vm));
    hn::StoreU(e, df, s + i);
    vsum = hn::Add(vsum, e);
  }
  l += hn::GetLane(hn::SumOfLanes(df, vsum));
}

}  // namespace HWY_NAMESPACE
}  // namespace hinge::kernels
HWY_AFTER_NAMESPACE();

#endif  // include guard
