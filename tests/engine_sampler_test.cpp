#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <vector>

#include "engine/sampler.h"
#include "engine/stop_matcher.h"

namespace hinge {
namespace {

std::vector<float> logits_fixture() { return {1.0f, 3.0f, 2.0f, 0.5f, 2.9f, -1.0f}; }

TEST(Sampler, GreedyIsArgmaxFirstOnTies) {
  SamplingParams p;
  p.temperature = 0;
  Sampler s(p, 6);
  auto l = logits_fixture();
  EXPECT_EQ(s.sample(l.data(), {}), 1);
  std::vector<float> ties = {2, 5, 5, 1, 0, 0};
  EXPECT_EQ(s.sample(ties.data(), {}), 1);
}

TEST(Sampler, SameSeedSameOutputDifferentSeedDiffers) {
  auto draw = [](uint64_t seed) {
    SamplingParams p;
    p.temperature = 1.5f;
    p.top_k = 0;
    p.top_p = 1.0f;
    p.min_p = 0.0f;
    p.seed = seed;
    Sampler s(p, 6);
    std::vector<int32_t> out;
    for (int i = 0; i < 64; ++i) {
      auto l = logits_fixture();
      out.push_back(s.sample(l.data(), {}));
    }
    return out;
  };
  EXPECT_EQ(draw(7), draw(7));
  EXPECT_NE(draw(7), draw(8));
}

// Temperature only (OpenAI's defaults) takes the no-sort path: its draws follow
// softmax(logits / T) exactly, as the sorted path's do (same distribution, another stream).
TEST(Sampler, TemperatureOnlyDrawsFollowTheSoftmax) {
  const auto l0 = logits_fixture();
  const float t = 0.7f;
  std::vector<double> expect(l0.size());
  double z = 0;
  for (size_t i = 0; i < l0.size(); ++i) z += expect[i] = std::exp(l0[i] / t);
  for (double& e : expect) e /= z;
  auto frequencies = [&](int32_t top_k) {
    SamplingParams p;
    p.temperature = t;
    p.top_k = top_k;  // 0: the no-sort path; 6 (= vocab): also no truncation, same path
    p.top_p = 1.0f;
    p.min_p = 0.0f;
    p.seed = 99;
    Sampler s(p, static_cast<int64_t>(l0.size()));
    std::vector<double> f(l0.size());
    const int draws = 60000;
    for (int i = 0; i < draws; ++i) {
      auto l = l0;
      f[static_cast<size_t>(s.sample(l.data(), {}))] += 1.0 / draws;
    }
    return f;
  };
  for (int32_t k : {0, 6}) {
    const auto f = frequencies(k);
    for (size_t i = 0; i < l0.size(); ++i)
      EXPECT_NEAR(f[i], expect[i], 0.01) << "token " << i << " top_k " << k;
  }
  // The sorted path (top_p just below 1 keeps the whole support here) agrees.
  SamplingParams p;
  p.temperature = t;
  p.top_k = 0;
  p.top_p = 0.99999f;
  p.min_p = 0.0f;
  Sampler s(p, static_cast<int64_t>(l0.size()));
  std::vector<double> f(l0.size());
  for (int i = 0; i < 60000; ++i) {
    auto l = l0;
    f[static_cast<size_t>(s.sample(l.data(), {}))] += 1.0 / 60000;
  }
  for (size_t i = 0; i < l0.size(); ++i) EXPECT_NEAR(f[i], expect[i], 0.01) << "sorted, token " << i;
}

TEST(Sampler, TopKOneIsGreedyAndTopKLimitsSupport) {
  SamplingParams p;
  p.temperature = 5.0f;
  p.top_k = 1;
  p.top_p = 1;
  p.min_p = 0;
  Sampler s(p, 6);
  for (int i = 0; i < 20; ++i) {
    auto l = logits_fixture();
    EXPECT_EQ(s.sample(l.data(), {}), 1);
  }
  p.top_k = 2;
  Sampler s2(p, 6);
  for (int i = 0; i < 200; ++i) {
    auto l = logits_fixture();
    const int32_t t = s2.sample(l.data(), {});
    EXPECT_TRUE(t == 1 || t == 4) << t;
  }
}

TEST(Sampler, TopPAndMinPCutTheTail) {
  SamplingParams p;
  p.temperature = 1.0f;
  p.top_k = 0;
  p.top_p = 0.5f;  // token 1 alone has p ~ 0.39, with 4 (~0.35) the mass passes 0.5
  p.min_p = 0;
  Sampler s(p, 6);
  std::map<int32_t, int> seen;
  for (int i = 0; i < 300; ++i) {
    auto l = logits_fixture();
    seen[s.sample(l.data(), {})]++;
  }
  EXPECT_EQ(seen.size(), 2u);
  EXPECT_GT(seen[1], 0);
  EXPECT_GT(seen[4], 0);
  p.top_p = 1;
  p.min_p = 0.5f;  // keep p >= 0.5 * p(top): tokens 1 (3.0), 4 (2.9), 2 (2.0: e^-1 = 0.37 < 0.5 -> out)
  Sampler s2(p, 6);
  for (int i = 0; i < 300; ++i) {
    auto l = logits_fixture();
    const int32_t t = s2.sample(l.data(), {});
    EXPECT_TRUE(t == 1 || t == 4) << t;
  }
}

TEST(Sampler, PenaltiesFollowLlamaCpp) {
  SamplingParams p;
  p.temperature = 0;
  p.repetition_penalty = 2.0f;
  p.frequency_penalty = 0.5f;
  p.presence_penalty = 0.25f;
  Sampler s(p, 6);
  auto l = logits_fixture();
  const std::vector<int32_t> history = {1, 1, 5};
  const float* adj = s.adjusted_for_testing(l.data(), history);
  EXPECT_FLOAT_EQ(adj[1], 3.0f / 2.0f - 2 * 0.5f - 0.25f);
  EXPECT_FLOAT_EQ(adj[5], -1.0f * 2.0f - 0.5f - 0.25f);
  EXPECT_FLOAT_EQ(adj[4], 2.9f);
  EXPECT_EQ(l, logits_fixture());  // the caller's row is left as it was
  // Token 1 is no longer the best: the penalty changed the greedy choice.
  auto l2 = logits_fixture();
  EXPECT_EQ(s.sample(l2.data(), history), 4);
}

TEST(Sampler, ValidateRejectsBadValues) {
  SamplingParams p;
  p.temperature = -1;
  EXPECT_FALSE(p.validate().ok());
  p = {};
  p.top_p = 0;
  EXPECT_FALSE(p.validate().ok());
  p = {};
  p.min_p = 2;
  EXPECT_FALSE(p.validate().ok());
  p = {};
  p.stop = {""};
  EXPECT_FALSE(p.validate().ok());
  p = {};
  p.logit_bias = {{3, 100.5f}};
  EXPECT_FALSE(p.validate().ok());
  p.logit_bias = {{-1, 1.0f}};
  EXPECT_FALSE(p.validate().ok());
  p.logit_bias = {{3, 1.0f}, {3, 2.0f}};
  EXPECT_FALSE(p.validate().ok());
  p.logit_bias = {{3, -100.0f}, {4, 100.0f}};
  EXPECT_TRUE(p.validate().ok());
  EXPECT_TRUE(SamplingParams{}.validate().ok());
}

TEST(Sampler, LogitBiasIsASparseAddBeforeGreedyAndSampling) {
  // Greedy: -100 on the argmax (1) hands it to the runner-up (4); +2 on token 3 (0.5 -> 2.5)
  // is not enough to win, +3 is; only the biased entries of the row change.
  SamplingParams p;
  p.temperature = 0;
  p.logit_bias = {{1, -100.0f}};
  auto l = logits_fixture();
  EXPECT_EQ(Sampler(p, 6).sample(l.data(), {}), 4);
  Sampler biased(p, 6);
  const float* adj = biased.adjusted_for_testing(l.data(), {});
  EXPECT_FLOAT_EQ(adj[1], 3.0f - 100.0f);
  EXPECT_FLOAT_EQ(adj[4], 2.9f);
  EXPECT_EQ(l, logits_fixture());
  p.logit_bias = {{3, 2.0f}};
  l = logits_fixture();
  EXPECT_EQ(Sampler(p, 6).sample(l.data(), {}), 1);
  p.logit_bias = {{3, 3.0f}};
  l = logits_fixture();
  EXPECT_EQ(Sampler(p, 6).sample(l.data(), {}), 3);
  // Out-of-vocabulary entries are skipped, not written.
  p.logit_bias = {{6, 100.0f}};
  l = logits_fixture();
  EXPECT_EQ(Sampler(p, 6).sample(l.data(), {}), 1);
  // Temperature sampling: +100 on token 5 makes every draw token 5, -100 on all but token 0
  // makes every draw token 0.
  SamplingParams t;
  t.temperature = 1.0f;
  t.top_k = 0;
  t.top_p = 1.0f;
  t.min_p = 0.0f;
  t.logit_bias = {{5, 100.0f}};
  Sampler force(t, 6);
  for (int i = 0; i < 64; ++i) {
    auto row = logits_fixture();
    EXPECT_EQ(force.sample(row.data(), {}), 5);
  }
  t.logit_bias = {{1, -100.0f}, {2, -100.0f}, {3, -100.0f}, {4, -100.0f}, {5, -100.0f}};
  Sampler ban(t, 6);
  for (int i = 0; i < 64; ++i) {
    auto row = logits_fixture();
    EXPECT_EQ(ban.sample(row.data(), {}), 0);
  }
}

TEST(StopMatcher, HoldsBackPrefixesAndCutsAtStop) {
  StopMatcher m({"END", "\n\n"});
  std::string out;
  out += m.push("Hello E");
  EXPECT_EQ(out, "Hello ");  // "E" might start "END"
  out += m.push("x");
  EXPECT_EQ(out, "Hello Ex");
  out += m.push(" then EN");
  EXPECT_FALSE(m.stopped());
  out += m.push("D and more");
  EXPECT_TRUE(m.stopped());
  EXPECT_EQ(out, "Hello Ex then ");
  EXPECT_EQ(m.push("ignored"), "");
  EXPECT_EQ(m.flush(), "");
}

TEST(StopMatcher, FlushReleasesHeldText) {
  StopMatcher m({"STOP"});
  EXPECT_EQ(m.push("abcST"), "abc");
  EXPECT_EQ(m.flush(), "ST");
  StopMatcher none({});
  EXPECT_EQ(none.push("x"), "x");
}

}  // namespace
}  // namespace hinge

namespace hinge {
namespace {

// Logit rows of three shapes at a 49152 vocabulary: flat (random-weight models: the nucleus is
// most of the vocabulary), peaked (trained models: a few tokens), and with ties.
std::vector<float> row(int shape, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> l(49152);
  for (size_t i = 0; i < l.size(); ++i) {
    if (shape == 0) l[i] = normal(rng);
    if (shape == 1) l[i] = normal(rng) * 4.0f - static_cast<float>(i % 997) * 0.02f;
    if (shape == 2) l[i] = std::round(normal(rng) * 2.0f);  // many exact ties
  }
  if (shape == 1) l[123] = 30.0f;
  return l;
}

// Issue 13: the truncation keeps exactly the set the sorted chain keeps, for every combination
// of top-k / top-p / min-p and temperature, on flat, peaked and tied rows.
TEST(Sampler, PartialSelectionKeepsWhatTheSortedChainKeeps) {
  const int32_t ks[] = {0, 1, 40, 1000};
  const float ps[] = {1.0f, 0.9f, 0.5f, 0.999f};
  const float ms[] = {0.0f, 0.05f, 0.5f};
  const float temps[] = {0.7f, 1.0f, 1.5f};
  int cases = 0;
  for (int shape = 0; shape < 3; ++shape) {
    const auto l = row(shape, 7 + static_cast<uint64_t>(shape));
    for (int32_t k : ks)
      for (float p : ps)
        for (float m : ms)
          for (float t : temps) {
            if (k == 0 && p == 1.0f && m == 0.0f) continue;  // no truncation
            SamplingParams sp;
            sp.temperature = t;
            sp.top_k = k;
            sp.top_p = p;
            sp.min_p = m;
            Sampler s(sp, static_cast<int64_t>(l.size()));
            const auto fast = s.kept_for_testing(l.data(), {});
            const auto ref = s.kept_sorted_ref(l.data(), {});
            ASSERT_EQ(fast, ref) << "shape " << shape << " k " << k << " p " << p << " min_p " << m
                                 << " T " << t << ": " << fast.size() << " vs " << ref.size();
            ++cases;
          }
  }
  EXPECT_EQ(cases, 3 * (4 * 4 * 3 - 1) * 3);
}

// Draws land in the kept set, and follow its weights (top-k 3 over a known row).
TEST(Sampler, TruncatedDrawsFollowTheKeptWeights) {
  SamplingParams sp;
  sp.temperature = 1.0f;
  sp.top_k = 3;
  sp.top_p = 1.0f;
  sp.min_p = 0.0f;
  const std::vector<float> l = {0.0f, std::log(2.0f), -5.0f, std::log(5.0f), -9.0f, 0.0f};
  Sampler s(sp, 6);
  std::map<int32_t, int> seen;
  const int n = 20000;
  for (int i = 0; i < n; ++i) ++seen[s.sample(l.data(), {})];
  // Top 3 by (weight, id): 3 (5), 1 (2), 0 (1; ties with 5, lower id first).
  EXPECT_EQ(seen.size(), 3u);
  EXPECT_NEAR(seen[3] / static_cast<double>(n), 5.0 / 8, 0.015);
  EXPECT_NEAR(seen[1] / static_cast<double>(n), 2.0 / 8, 0.015);
  EXPECT_NEAR(seen[0] / static_cast<double>(n), 1.0 / 8, 0.015);
}

// top-p at >= 0.5 draws by rejection (Sampler::draw_nucleus): every draw is in the sorted
// chain's kept set, and the kept tokens come out in proportion to their weights. Rows of 2000
// tokens, sd 2 logits, top-p 0.9 and 0.6, with and without min-p (at min-p 0.3 most draws are
// rejected, so some samples take the exact cut after kMaxRejections).
TEST(Sampler, TopPByRejectionDrawsTheNucleusWeights) {
  std::mt19937_64 rng(42);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  std::vector<float> l(2000);
  for (float& x : l) x = normal(rng);
  uint64_t seed = 100;
  for (const auto& [p, m] : {std::pair{0.9f, 0.0f}, {0.6f, 0.0f}, {0.9f, 0.01f}, {0.9f, 0.3f}}) {
    SamplingParams sp;
    sp.temperature = 1.0f;
    sp.top_k = 0;
    sp.top_p = p;
    sp.min_p = m;
    sp.seed = ++seed;  // independent streams per case
    Sampler s(sp, static_cast<int64_t>(l.size()));
    const auto kept = s.kept_sorted_ref(l.data(), {});
    ASSERT_GT(kept.size(), 5u);
    double z = 0;
    for (int32_t id : kept) z += std::exp(static_cast<double>(l[static_cast<size_t>(id)]));
    std::map<int32_t, int> seen;
    const int n = 40000;
    for (int i = 0; i < n; ++i) ++seen[s.sample(l.data(), {})];
    for (const auto& [id, count] : seen)
      ASSERT_TRUE(std::binary_search(kept.begin(), kept.end(), id))
          << "token " << id << " outside the nucleus (top_p " << p << ", min_p " << m << ")";
    // The heaviest tokens' frequencies against their renormalized weights (4 sd of a binomial).
    for (size_t j = 0; j < kept.size(); ++j) {
      const int32_t id = kept[j];
      const double q = std::exp(static_cast<double>(l[static_cast<size_t>(id)])) / z;
      if (q < 0.01) continue;
      const double sd = std::sqrt(q * (1 - q) / n);
      EXPECT_NEAR(seen[id] / static_cast<double>(n), q, 4 * sd) << "token " << id;
    }
  }
}

// The acceptance test of top-p by rejection keeps exactly the sorted chain's set, also where
// f32 sums would misjudge the boundary (top_p within 1e-6 of 1, wide logits).
TEST(Sampler, TopPByRejectionAcceptsExactlyTheSortedChainsSet) {
  for (const auto& [vocab, sd] : {std::pair{16384, 5.0f}, {8192, 3.0f}}) {
    std::mt19937_64 rng(static_cast<uint64_t>(vocab));
    std::normal_distribution<float> normal(0.0f, sd);
    std::vector<float> l(static_cast<size_t>(vocab));
    for (float& x : l) x = normal(rng);
    for (float p : {0.9f, 0.99999f, 0.999999f}) {
      for (float m : {0.0f, 0.001f}) {
        SamplingParams sp;
        sp.temperature = 1.0f;
        sp.top_k = 0;
        sp.top_p = p;
        sp.min_p = m;
        Sampler s(sp, vocab);
        const auto got = s.nucleus_for_testing(l.data(), {});
        const auto ref = s.kept_sorted_ref(l.data(), {});
        EXPECT_EQ(got, ref) << "vocab " << vocab << " sd " << sd << " top_p " << p << " min_p "
                            << m << ": " << got.size() << " vs " << ref.size();
      }
    }
  }
}

}  // namespace
}  // namespace hinge
