// The row-wise ops of the transformer block against hand-computed values.
#include <gtest/gtest.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>
#include <functional>
#include <numbers>
#include <vector>

#include "kernels/ops.h"
#include "kernels/sampling.h"

namespace hinge::kernels {
namespace {

TEST(KernelsOps, RmsnormSoftmaxSwiglu) {
  const float x[4] = {1, 2, 3, 4}, w[4] = {1, 1, 2, 0.5f};
  float out[4];
  rmsnorm(out, x, w, 4, 0.0f);
  const float inv = 1.0f / std::sqrt(30.0f / 4.0f);
  EXPECT_FLOAT_EQ(out[0], inv);
  EXPECT_FLOAT_EQ(out[2], 6 * inv);
  EXPECT_FLOAT_EQ(out[3], 2 * inv);
  float s[3] = {0, std::log(2.0f), std::log(5.0f)};
  softmax(s, 3);
  EXPECT_NEAR(s[0], 1.0 / 8, 1e-6);
  EXPECT_NEAR(s[2], 5.0 / 8, 1e-6);
  float g[2] = {0.0f, 2.0f};
  const float u[2] = {3.0f, 0.5f};
  swiglu(g, u, 2);
  EXPECT_FLOAT_EQ(g[0], 0.0f);
  EXPECT_NEAR(g[1], 2.0f / (1.0f + std::exp(-2.0f)) * 0.5f, 1e-6);
}

// The SIMD SwiGLU against the scalar formula (in double) over a range that overflows a naive
// exp(-g), with a length that leaves a vector tail.
TEST(KernelsOps, SwigluMatchesScalarFormula) {
  std::vector<float> g, u;
  for (int i = -1000; i <= 1000; i += 7) {
    g.push_back(static_cast<float>(i) * 0.125f);
    u.push_back(0.5f + static_cast<float>(i % 13));
  }
  std::vector<float> out = g;
  swiglu(out.data(), u.data(), static_cast<int64_t>(out.size()));
  for (size_t i = 0; i < g.size(); ++i) {
    const double x = g[i];
    const double want = x / (1.0 + std::exp(-x)) * u[i];
    EXPECT_NEAR(out[i], want, 1e-6 * std::fabs(want) + 1e-30) << "g=" << g[i];
  }
}

// GEGLU (tanh-GELU) and soft-capping: SIMD against the definitions, in double.
TEST(KernelsOps, GegluAndSoftcapMatchTheirFormulas) {
  std::vector<float> g, u;
  for (int i = -1000; i <= 1000; i += 7) {
    g.push_back(static_cast<float>(i) * 0.0125f);
    u.push_back(0.5f + static_cast<float>(i % 13));
  }
  std::vector<float> out = g, ref = g;
  geglu_tanh(out.data(), u.data(), static_cast<int64_t>(out.size()));
  geglu_tanh_ref(ref.data(), u.data(), static_cast<int64_t>(ref.size()));
  for (size_t i = 0; i < g.size(); ++i) {
    const double x = g[i];
    const double want = 0.5 * x * (1 + std::tanh(0.7978845608028654 * x * (1 + 0.044715 * x * x))) * u[i];
    EXPECT_NEAR(out[i], want, 1e-5 * std::fabs(want) + 1e-6) << "g=" << g[i];
    EXPECT_NEAR(ref[i], want, 1e-5 * std::fabs(want) + 1e-6) << "g=" << g[i];
  }
  std::vector<float> x;
  for (int i = -300; i <= 300; ++i) x.push_back(static_cast<float>(i) * 0.7f);
  std::vector<float> capped = x;
  softcap_inplace(capped.data(), static_cast<int64_t>(capped.size()), 30.0f);
  for (size_t i = 0; i < x.size(); ++i)
    EXPECT_NEAR(capped[i], 30.0 * std::tanh(x[i] / 30.0), 2e-6 * 30.0) << x[i];
}

// Interleaved and rotate-half RoPE rotate the same pairs, only laid out differently.
TEST(KernelsOps, RopeLayoutsAgreeUpToPermutation) {
  const int64_t d = 8;
  std::vector<float> inv(d / 2);
  rope_inv_freq(inv.data(), d, 10000.0f, nullptr);
  EXPECT_FLOAT_EQ(inv[0], 1.0f);
  EXPECT_NEAR(inv[1], std::pow(10000.0f, -2.0f / 8), 1e-7);
  std::vector<float> inter(d), neox(d);
  for (int64_t i = 0; i < d / 2; ++i) {
    inter[2 * i] = neox[i] = 0.1f * (i + 1);
    inter[2 * i + 1] = neox[i + d / 2] = -0.3f * (i + 2);
  }
  const RopeTable t_inter = make_rope_table({.style = RopeStyle::kInterleaved, .n_rot = d});
  const RopeTable t_neox = make_rope_table({.style = RopeStyle::kNeox, .n_rot = d});
  EXPECT_EQ(t_inter.inv_freq, inv);
  rope_ext(inter.data(), 1, d, 7, t_inter);
  rope_ext(neox.data(), 1, d, 7, t_neox);
  for (int64_t i = 0; i < d / 2; ++i) {
    EXPECT_FLOAT_EQ(inter[2 * i], neox[i]);
    EXPECT_FLOAT_EQ(inter[2 * i + 1], neox[i + d / 2]);
  }
  // Pair 0 at position 7 turns by 7 radians.
  EXPECT_NEAR(inter[0], 0.1f * std::cos(7.0f) + 0.6f * std::sin(7.0f), 1e-6);
}

// rope_ext_qk rotates Q and K as two rope_ext calls do, bit for bit: both layouts, partial
// rotary, YaRN's magnitude scale.
TEST(KernelsOps, RopeQkEqualsTwoRopeCalls) {
  const int64_t hd = 24;
  for (RopeStyle style : {RopeStyle::kInterleaved, RopeStyle::kNeox}) {
    for (float factor : {1.0f, 4.0f}) {
      RopeSpec spec{.style = style, .n_rot = 16, .theta = 10000.0f};
      if (factor != 1.0f) {  // YaRN: a quarter of the frequencies, mscale > 1
        spec.freq_scale = 1.0f / factor;
        spec.ext_factor = 1.0f;
        spec.attn_factor = 1.0f;
        spec.n_ctx_orig = 2048;
      }
      const RopeTable t = make_rope_table(spec);
      std::vector<float> q(5 * hd), k(2 * hd);
      for (size_t i = 0; i < q.size(); ++i) q[i] = std::sin(0.37f * static_cast<float>(i));
      for (size_t i = 0; i < k.size(); ++i) k[i] = std::cos(0.53f * static_cast<float>(i));
      for (int64_t pos : {0, 1, 77, 4095}) {
        std::vector<float> q1 = q, k1 = k, q2 = q, k2 = k;
        rope_ext(q1.data(), 5, hd, pos, t);
        rope_ext(k1.data(), 2, hd, pos, t);
        rope_ext_qk(q2.data(), 5, k2.data(), 2, hd, pos, t);
        EXPECT_EQ(0, std::memcmp(q1.data(), q2.data(), q1.size() * sizeof(float))) << pos;
        EXPECT_EQ(0, std::memcmp(k1.data(), k2.data(), k1.size() * sizeof(float))) << pos;
        if (pos != 0) {
          EXPECT_NE(q1, q);  // it rotated
        }
      }
    }
  }
}

// Llama 3 rope_scaling (factor 8, low 1, high 4, original context 8192, theta 500000): high
// frequencies keep their value, low frequencies are divided by 8, the band between is smoothed.
TEST(KernelsOps, Llama3FrequencyFactors) {
  const int64_t d = 128;
  const float theta = 500000.0f;
  std::vector<float> f(d / 2);
  llama3_freq_factors(f.data(), d, theta, 8.0f, 1.0f, 4.0f, 8192.0f);
  for (int64_t i = 0; i < d / 2; ++i) {
    const double freq = std::pow(static_cast<double>(theta), -2.0 * i / d);
    const double wavelen = 2 * std::numbers::pi / freq;
    double want;
    if (wavelen < 8192.0 / 4) want = 1.0;
    else if (wavelen > 8192.0 / 1) want = 8.0;
    else {
      const double smooth = (8192.0 / wavelen - 1.0) / (4.0 - 1.0);
      want = freq / ((1 - smooth) * freq / 8.0 + smooth * freq);
    }
    EXPECT_NEAR(f[i], want, 1e-3 * want) << i;
  }
  EXPECT_FLOAT_EQ(f[0], 1.0f);
  EXPECT_FLOAT_EQ(f[d / 2 - 1], 8.0f);
  int smoothed = 0;
  for (float v : f) smoothed += v > 1.0f && v < 8.0f;
  EXPECT_GT(smoothed, 0);
}

}  // namespace
}  // namespace hinge::kernels

namespace hinge::kernels {
namespace {

TEST(KernelsOps, HadamardIsOrthonormalAndPreservesDotProducts) {
  for (int64_t d : {1, 2, 8, 64, 128}) {
    std::vector<float> q(static_cast<size_t>(2 * d)), k(static_cast<size_t>(2 * d));
    for (int64_t i = 0; i < 2 * d; ++i) {
      q[static_cast<size_t>(i)] = std::sin(0.7f * static_cast<float>(i)) + 0.1f;
      k[static_cast<size_t>(i)] = (i % 7 == 0 ? 5.0f : 0.0f) + std::cos(1.3f * static_cast<float>(i));
    }
    const std::vector<float> q0 = q, k0 = k;
    hadamard_inplace(q.data(), 2, d);
    hadamard_inplace(k.data(), 2, d);
    for (int v = 0; v < 2; ++v) {
      const float before = dot_f32(&q0[static_cast<size_t>(v * d)], &k0[static_cast<size_t>(v * d)], d);
      const float after = dot_f32(&q[static_cast<size_t>(v * d)], &k[static_cast<size_t>(v * d)], d);
      EXPECT_NEAR(after, before, 1e-4f * (1 + std::fabs(before))) << "d " << d;
    }
    hadamard_inplace(q.data(), 2, d);  // H^-1 = H
    for (size_t i = 0; i < q.size(); ++i) EXPECT_NEAR(q[i], q0[i], 1e-5f) << "d " << d;
  }
  // d = 4: the known matrix [[1,1,1,1],[1,-1,1,-1],[1,1,-1,-1],[1,-1,-1,1]] / 2.
  float e[4] = {1, 0, 0, 0};
  hadamard_inplace(e, 1, 4);
  for (float x : e) EXPECT_FLOAT_EQ(x, 0.5f);
  float f[4] = {0, 1, 0, 0};
  hadamard_inplace(f, 1, 4);
  EXPECT_FLOAT_EQ(f[0], 0.5f);
  EXPECT_FLOAT_EQ(f[1], -0.5f);
  EXPECT_FLOAT_EQ(f[2], 0.5f);
  EXPECT_FLOAT_EQ(f[3], -0.5f);
}

}  // namespace
}  // namespace hinge::kernels

namespace hinge::kernels {
namespace {

// The SIMD exp pass of sampling against std::exp, with a vector tail and values that flush to 0.
TEST(KernelsSampling, ExpShiftedMatchesScalar) {
  std::vector<float> x;
  for (int i = 0; i < 5003; ++i) x.push_back(static_cast<float>((i * 7919) % 2001) * 0.05f - 90.0f);
  const float mx = *std::max_element(x.begin(), x.end());
  for (float scale : {1.0f, 0.5f, 1.3f}) {
    std::vector<float> a(x.size()), b(x.size());
    std::vector<double> ra(5, -1), rb(5, -1);
    const double sa =
        exp_shifted(x.data(), static_cast<int64_t>(x.size()), mx, scale, a.data(), ra.data());
    const double sb =
        exp_shifted_ref(x.data(), static_cast<int64_t>(x.size()), mx, scale, b.data(), rb.data());
    for (size_t k = 0; k < 5; ++k) EXPECT_NEAR(ra[k], rb[k], 1e-6 * rb[k] + 1e-30) << k;
    // Values below 2^-125 (of the top weight) flush to 0 in the SIMD kernel.
    for (size_t i = 0; i < x.size(); ++i)
      ASSERT_NEAR(a[i], b[i], 4e-7f * b[i] + 2.4e-38f) << i << " scale " << scale;
    EXPECT_NEAR(sa, sb, 1e-6 * sb);
    EXPECT_FLOAT_EQ(a[static_cast<size_t>(std::max_element(x.begin(), x.end()) - x.begin())], 1.0f);
  }
}

// The log bins the exp pass writes are log_bin() of the weights it wrote, SIMD lanes and tail.
TEST(KernelsSampling, ExpShiftedLogBinsAreThoseOfItsWeights) {
  std::vector<float> x;
  for (int i = 0; i < 3001; ++i) x.push_back(static_cast<float>((i * 7919) % 2001) * 0.05f - 99.0f);
  x[17] = 1.0f;
  std::vector<float> w(x.size());
  std::vector<uint16_t> bins(x.size(), 9999);
  exp_shifted(x.data(), static_cast<int64_t>(x.size()), 1.0f, 1.0f, w.data(), nullptr, nullptr,
              bins.data());
  EXPECT_EQ(bins[17], 0);
  int last = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    ASSERT_EQ(bins[i], log_bin(w[i])) << i;
    last += bins[i] == kLogBins - 1;
  }
  EXPECT_GT(last, 0);  // weights below 2^-32 share the last bin
}

// The cut kernels against their scalar definitions: kept sums, gathers and draws, with ties at
// the cut (the id decides), block skipping by block maxima, and vector tails.
TEST(KernelsSampling, CutKernelsMatchScalar) {
  for (int64_t n : {int64_t{1}, int64_t{63}, int64_t{64}, int64_t{1000}, int64_t{49157}}) {
    std::vector<float> x(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i)
      x[static_cast<size_t>(i)] = std::round(static_cast<float>((i * 7919) % 1009) * 0.02f) - 20.0f;
    const float mx = *std::max_element(x.begin(), x.end());
    std::vector<float> w(x.size()), bmax(static_cast<size_t>((n + kExpBlock - 1) / kExpBlock));
    std::vector<double> runs(static_cast<size_t>((n + kExpRun - 1) / kExpRun));
    const double total = exp_shifted(x.data(), n, mx, 1.0f, w.data(), runs.data(), bmax.data());
    std::vector<float> sorted(w);
    std::sort(sorted.begin(), sorted.end(), std::greater<float>());
    for (size_t q : {size_t{0}, sorted.size() / 3, sorted.size() - 1}) {
      const float w_cut = sorted[q];
      for (int32_t id_cut : {-1, static_cast<int32_t>(n / 2), INT32_MAX}) {
        const KeptCut c{w_cut, id_cut};
        const double ref = kept_sum_ref(w.data(), n, c);
        EXPECT_NEAR(kept_sum(w.data(), n, c, bmax.data()), ref, 1e-6 * ref + 1e-30) << n;
        EXPECT_NEAR(kept_sum(w.data(), n, c, nullptr), ref, 1e-6 * ref + 1e-30) << n;
        for (double f : {0.0, 0.25, 0.5, 0.999}) {
          const double r = f * ref;
          const int64_t got = draw_kept(w.data(), n, c, r, bmax.data());
          const int64_t want = draw_kept_ref(w.data(), n, c, r);
          if (ref == 0.0) {
            EXPECT_EQ(got, -1);
            continue;
          }
          ASSERT_GE(got, 0) << n;
          EXPECT_TRUE(is_kept(w[static_cast<size_t>(got)], got, c));
          EXPECT_EQ(got, want) << n << " r " << r;  // exact unless r sits on a rounding edge
        }
      }
      std::vector<int32_t> a(static_cast<size_t>(n + kGatherSlack)), b(a.size());
      const float hi = q == 0 ? HUGE_VALF : sorted[q / 2];
      const int64_t ma = gather_between(w.data(), n, w_cut, hi, a.data(), bmax.data());
      const int64_t mb = gather_between_ref(w.data(), n, w_cut, hi, b.data());
      ASSERT_EQ(ma, mb) << n;
      a.resize(static_cast<size_t>(ma));
      b.resize(static_cast<size_t>(mb));
      EXPECT_EQ(a, b);
    }
    EXPECT_NEAR(kept_sum(w.data(), n, {-1.0f, INT32_MAX}, bmax.data()), total, 1e-6 * total);
  }
}

}  // namespace
}  // namespace hinge::kernels

namespace hinge::kernels {
namespace {

// SIMD argmax against the scalar one: every length up to 70 (vector tails), the max anywhere,
// ties (the first wins), and a large row.
TEST(KernelsOps, ArgmaxMatchesScalarFirstOnTies) {
  std::vector<float> x(70);
  for (size_t n = 1; n <= x.size(); ++n) {
    for (size_t at = 0; at < n; ++at) {
      for (size_t i = 0; i < n; ++i) x[i] = static_cast<float>((i * 37) % 11) - 20.0f;
      x[at] = 5.0f;
      ASSERT_EQ(argmax(x.data(), static_cast<int64_t>(n)), static_cast<int64_t>(at)) << n;
      if (at + 3 < n) x[at + 3] = 5.0f;  // a later tie does not win
      ASSERT_EQ(argmax(x.data(), static_cast<int64_t>(n)), argmax_ref(x.data(), static_cast<int64_t>(n)));
    }
  }
  std::vector<float> big(49157);
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<float>((i * 7919) % 10007) * 0.01f;
  EXPECT_EQ(argmax(big.data(), static_cast<int64_t>(big.size())),
            argmax_ref(big.data(), static_cast<int64_t>(big.size())));
}

}  // namespace
}  // namespace hinge::kernels
