// GenerateRequest::prompt_logprobs and SamplingParams::logit_bias through the engine on
// stories260K: prompt logprobs equal the decode logprobs of the same tokens at the same
// positions (chunked prefill, parallel samples, a warm prefix cache), and logit bias steers
// greedy decoding.
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "hinge/engine.h"
#include "model/loaded_model.h"
#include "model_test_util.h"

namespace hinge {
namespace {

struct Outcome {
  std::vector<int32_t> tokens;            // sample 0's
  std::vector<PositionLogprobs> logprobs;  // sample 0's
  std::vector<std::vector<PositionLogprobs>> prompt_logprobs;  // per sample
  int32_t cached_tokens = -1;
};

Outcome run(Engine& e, const GenerateRequest& r) {
  Outcome out;
  out.prompt_logprobs.resize(static_cast<size_t>(r.n));
  std::vector<int> deltas_with_prompt(static_cast<size_t>(r.n), 0);
  EXPECT_TRUE(e.add_request(r).ok());
  std::vector<RequestDelta> deltas;
  while (e.has_unfinished()) {
    EXPECT_TRUE(e.step(&deltas).ok());
    for (auto& d : deltas) {
      const auto i = static_cast<size_t>(d.index);
      if (!d.prompt_logprobs.empty()) {
        ++deltas_with_prompt[i];
        out.prompt_logprobs[i] = d.prompt_logprobs;
      }
      if (d.index != 0) continue;
      out.tokens.insert(out.tokens.end(), d.token_ids.begin(), d.token_ids.end());
      out.logprobs.insert(out.logprobs.end(), d.logprobs.begin(), d.logprobs.end());
      out.cached_tokens = d.usage.cached_tokens;
    }
  }
  for (int c : deltas_with_prompt) EXPECT_LE(c, 1) << "prompt logprobs come once per sample";
  return out;
}

EngineConfig config(int32_t max_batched_tokens) {
  EngineConfig c;
  c.k_dtype = c.v_dtype = KvDtype::kF32;
  c.kv_memory_bytes = 4 << 20;
  c.max_batched_tokens = max_batched_tokens;
  return c;
}

GenerateRequest greedy(std::vector<int32_t> prompt, int32_t max_new) {
  GenerateRequest r;
  r.prompt_token_ids = std::move(prompt);
  r.max_new_tokens = max_new;
  r.sampling.temperature = 0;
  r.sampling.ignore_eos = true;
  return r;
}

TEST(EnginePromptLogprobs, EqualTheDecodeLogprobsOfTheSameTokens) {
  auto m = testing::load_or_die(testing::shared_path("models/stories260K.gguf"));
  ASSERT_TRUE(m);
  const std::vector<int32_t> p0 = {1, 403, 407, 261, 378};
  // Decode: 20 greedy tokens with their logprobs (top 4).
  auto e = std::move(Engine::create(*m, nullptr, config(64))).value();
  GenerateRequest g = greedy(p0, 20);
  g.logprobs = 4;
  const Outcome decoded = run(*e, g);
  ASSERT_EQ(decoded.tokens.size(), 20u);
  // The prompt p0 + those tokens, with prompt logprobs, under several chunk sizes (7: the
  // prompt spans 4 steps), 2 parallel samples, twice (the second time the prefix cache holds
  // the prompt's blocks, which this request must not adopt).
  std::vector<int32_t> prompt = p0;
  prompt.insert(prompt.end(), decoded.tokens.begin(), decoded.tokens.end());
  for (int32_t budget : {7, 64}) {
    auto pe = std::move(Engine::create(*m, nullptr, config(budget))).value();
    for (int round = 0; round < 2; ++round) {
      GenerateRequest r = greedy(prompt, 2);
      r.prompt_logprobs = 4;
      r.n = 2;
      const Outcome got = run(*pe, r);
      EXPECT_EQ(got.cached_tokens, 0);
      for (const auto& plp : got.prompt_logprobs) {
        ASSERT_EQ(plp.size(), prompt.size() - 1);
        for (size_t i = 0; i < plp.size(); ++i) {
          EXPECT_EQ(plp[i].sampled.token, prompt[i + 1]);
          EXPECT_TRUE(std::isfinite(plp[i].sampled.logprob));
          EXPECT_LE(plp[i].sampled.logprob, 0.0f);
          ASSERT_EQ(plp[i].top.size(), 4u);
        }
        for (size_t j = 0; j < decoded.logprobs.size(); ++j) {
          const PositionLogprobs& want = decoded.logprobs[j];
          const PositionLogprobs& have = plp[p0.size() - 1 + j];
          EXPECT_NEAR(have.sampled.logprob, want.sampled.logprob, 1e-4) << "budget " << budget << " j " << j;
          for (size_t k = 0; k < 4; ++k) {
            EXPECT_EQ(have.top[k].token, want.top[k].token);
            EXPECT_NEAR(have.top[k].logprob, want.top[k].logprob, 1e-4);
          }
        }
      }
      // The continuation is still the greedy one of the whole prompt.
      EXPECT_EQ(got.tokens, testing::greedy(*m, prompt, 2));
    }
    // Requests without prompt logprobs still hit the blocks it cached.
    const Outcome plain = run(*pe, greedy(prompt, 1));
    EXPECT_GT(plain.cached_tokens, 0);
    EXPECT_TRUE(plain.prompt_logprobs[0].empty());
  }
}

// Preemption by recompute (before and after the prompt is done) neither loses nor repeats a
// prompt position: the same prompt logprobs as with a roomy cache.
TEST(EnginePromptLogprobs, SameUnderPreemption) {
  auto m = testing::load_or_die(testing::shared_path("models/stories260K.gguf"));
  ASSERT_TRUE(m);
  std::vector<GenerateRequest> reqs;
  for (int i = 0; i < 8; ++i) {
    std::vector<int32_t> prompt{1};
    for (int k = 0; k < 30 + 7 * i; ++k) prompt.push_back(3 + (k * 37 + i * 11) % 500);
    GenerateRequest r = greedy(std::move(prompt), 30);
    r.prompt_logprobs = 1;
    reqs.push_back(std::move(r));
  }
  auto all = [&](int64_t kv_bytes, EngineStats* stats) {
    EngineConfig c = config(24);
    c.kv_memory_bytes = kv_bytes;
    auto e = std::move(Engine::create(*m, nullptr, c)).value();
    std::vector<RequestId> ids;
    for (const auto& r : reqs) ids.push_back(e->add_request(r).value());
    std::map<uint64_t, std::vector<PositionLogprobs>> got;
    std::vector<RequestDelta> deltas;
    while (e->has_unfinished()) {
      EXPECT_TRUE(e->step(&deltas).ok());
      for (auto& d : deltas)
        if (!d.prompt_logprobs.empty()) {
          EXPECT_TRUE(got[d.id.value].empty()) << "twice";
          got[d.id.value] = d.prompt_logprobs;
        }
    }
    *stats = e->stats();
    std::vector<std::vector<PositionLogprobs>> out;
    for (RequestId id : ids) out.push_back(got[id.value]);
    return out;
  };
  EngineStats roomy, tight;
  const auto want = all(64 << 20, &roomy);
  EXPECT_EQ(roomy.preemptions, 0);
  const auto have = all(9 * roomy.kv_bytes_per_block, &tight);  // the largest needs 7 blocks
  EXPECT_GT(tight.preemptions, 0);
  ASSERT_EQ(have.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_EQ(have[i].size(), reqs[i].prompt_token_ids.size() - 1) << "request " << i;
    ASSERT_EQ(want[i].size(), have[i].size());
    for (size_t k = 0; k < want[i].size(); ++k) {
      EXPECT_EQ(have[i][k].sampled.token, want[i][k].sampled.token);
      EXPECT_NEAR(have[i][k].sampled.logprob, want[i][k].sampled.logprob, 1e-5);
    }
  }
}

TEST(EngineLogitBias, ForcesAndBansUnderGreedy) {
  auto m = testing::load_or_die(testing::shared_path("models/stories260K.gguf"));
  ASSERT_TRUE(m);
  auto e = std::move(Engine::create(*m, nullptr, config(64))).value();
  const std::vector<int32_t> p0 = {1, 403, 407, 261, 378};
  const std::vector<int32_t> plain = testing::greedy(*m, p0, 6);
  GenerateRequest force = greedy(p0, 6);
  force.sampling.logit_bias = {{300, 100.0f}};
  EXPECT_EQ(run(*e, force).tokens, std::vector<int32_t>(6, 300));
  GenerateRequest ban = greedy(p0, 6);
  ban.sampling.logit_bias = {{plain[0], -100.0f}};
  ban.logprobs = 2;
  const Outcome b = run(*e, ban);
  ASSERT_EQ(b.tokens.size(), 6u);
  EXPECT_NE(b.tokens[0], plain[0]);
  EXPECT_EQ(b.tokens[0], b.logprobs[0].top[1].token);  // raw logprobs: the runner-up
  GenerateRequest oov = greedy(p0, 6);
  oov.sampling.logit_bias = {{static_cast<int32_t>(m->config.n_vocab), 1.0f}};
  EXPECT_FALSE(e->check_request(oov).ok());
  GenerateRequest bad = greedy(p0, 6);
  bad.prompt_logprobs = 21;
  EXPECT_FALSE(e->check_request(bad).ok());
}

}  // namespace
}  // namespace hinge
