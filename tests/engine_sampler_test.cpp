#include <gtest/gtest.h>

#include <map>
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
  s.sample(l.data(), history);
  EXPECT_FLOAT_EQ(l[1], 3.0f / 2.0f - 2 * 0.5f - 0.25f);
  EXPECT_FLOAT_EQ(l[5], -1.0f * 2.0f - 0.5f - 0.25f);
  EXPECT_FLOAT_EQ(l[4], 2.9f);
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
  EXPECT_TRUE(SamplingParams{}.validate().ok());
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
