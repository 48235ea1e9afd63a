// The engine end to end on real models: batch invariance (issue 3, acceptance 2), prefix
// caching with cached_tokens (3), preemption by recompute (4), parallel samples sharing the
// prompt's blocks (5), KV waste under one block per request (7).
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <random>

#include "hinge/engine.h"
#include "model/loaded_model.h"
#include "model_test_util.h"
#include "tokenizer/tokenizer.h"

namespace hinge {
namespace {

using testing::load_or_die;
using testing::shared_path;

struct Finished {
  std::vector<int32_t> tokens;
  RequestUsage usage;
  FinishReason reason = FinishReason::kNone;
};

// Runs the engine until idle; results per (request id, sample index). Checks that deltas stop
// after the final one.
std::map<std::pair<uint64_t, int32_t>, Finished> drain(Engine& e) {
  std::map<std::pair<uint64_t, int32_t>, Finished> res;
  std::vector<RequestDelta> deltas;
  for (int guard = 0; e.has_unfinished() && guard < 100000; ++guard) {
    EXPECT_TRUE(e.step(&deltas).ok());
    for (const RequestDelta& d : deltas) {
      Finished& f = res[{d.id.value, d.index}];
      EXPECT_EQ(f.reason, FinishReason::kNone) << "delta after the final one";
      f.tokens.insert(f.tokens.end(), d.token_ids.begin(), d.token_ids.end());
      f.usage = d.usage;
      f.reason = d.finish_reason;
    }
  }
  EXPECT_FALSE(e.has_unfinished());
  return res;
}

EngineConfig f32_config(int threads = 1) {
  EngineConfig c = testing::small_f32_engine_config(threads, 64 << 20);
  c.max_num_seqs = 32;
  return c;
}

GenerateRequest greedy_request(std::vector<int32_t> prompt, int32_t max_new) {
  GenerateRequest r;
  r.prompt_token_ids = std::move(prompt);
  r.max_new_tokens = max_new;
  r.sampling.temperature = 0;
  r.sampling.ignore_eos = true;
  return r;
}

std::vector<int32_t> random_prompt(std::mt19937_64& rng, int32_t len, int32_t n_vocab) {
  std::vector<int32_t> p{1};  // BOS
  std::uniform_int_distribution<int32_t> pick(3, n_vocab - 1);
  while (static_cast<int32_t>(p.size()) < len) p.push_back(pick(rng));
  return p;
}

std::unique_ptr<Engine> make_engine(const LoadedModel& m, const EngineConfig& c) {
  auto e = Engine::create(m, nullptr, c);
  EXPECT_TRUE(e.ok()) << e.status().message();
  return e.ok() ? std::move(e).value() : nullptr;
}

void check_batch_invariance(const LoadedModel& m, int threads) {
  std::mt19937_64 rng(7);
  std::vector<GenerateRequest> reqs;
  for (int i = 0; i < 16; ++i)
    reqs.push_back(greedy_request(random_prompt(rng, 1 + 13 * i % 97, m.config.n_vocab),
                                  4 + (i * 7) % 29));
  // Alone: a fresh engine per request.
  std::vector<std::vector<int32_t>> alone;
  for (const auto& r : reqs) {
    auto e = make_engine(m, f32_config(threads));
    ASSERT_TRUE(e);
    ASSERT_TRUE(e->add_request(r).ok());
    auto res = drain(*e);
    ASSERT_EQ(res.size(), 1u);
    alone.push_back(res.begin()->second.tokens);
    EXPECT_EQ(static_cast<int32_t>(alone.back().size()), r.max_new_tokens);
    // And the contiguous single-sequence reference path agrees.
    EXPECT_EQ(alone.back(), testing::greedy(m, r.prompt_token_ids, r.max_new_tokens));
  }
  // Together, 16 at once, chunked prefill mixed with decode (budget 64 tokens per step).
  auto e = make_engine(m, f32_config(threads));
  ASSERT_TRUE(e);
  std::vector<RequestId> ids;
  for (const auto& r : reqs) ids.push_back(e->add_request(r).value());
  auto res = drain(*e);
  for (size_t i = 0; i < reqs.size(); ++i) {
    const Finished& f = res.at({ids[i].value, 0});
    EXPECT_EQ(f.tokens, alone[i]) << "request " << i;
    EXPECT_EQ(f.reason, FinishReason::kLength);
    EXPECT_EQ(f.usage.completion_tokens, reqs[i].max_new_tokens);
    EXPECT_EQ(f.usage.prompt_tokens, static_cast<int32_t>(reqs[i].prompt_token_ids.size()));
  }
}

TEST(EngineBatch, SixteenConcurrentEqualAloneStories260K) {
  auto m = load_or_die(shared_path("models/stories260K.gguf"));
  ASSERT_TRUE(m);
  check_batch_invariance(*m, 1);
}

TEST(EngineBatch, SixteenConcurrentEqualAloneTinyStories656kTwoThreads) {
  auto m = load_or_die(shared_path("models/tinystories-656k"));
  ASSERT_TRUE(m);
  check_batch_invariance(*m, 2);
}

class EnginePrefix : public ::testing::Test {
 protected:
  void SetUp() override {
    m_ = load_or_die(shared_path("models/stories260K.gguf"));
    ASSERT_TRUE(m_);
    e_ = make_engine(*m_, f32_config());
    ASSERT_TRUE(e_);
  }
  Finished run_one(const GenerateRequest& r, int64_t* computed = nullptr) {
    const int64_t before = e_->stats().prompt_tokens_computed;
    auto id = e_->add_request(r);
    EXPECT_TRUE(id.ok());
    auto res = drain(*e_);
    if (computed) *computed = e_->stats().prompt_tokens_computed - before;
    return res.at({id.value().value, 0});
  }
  std::unique_ptr<LoadedModel> m_;
  std::unique_ptr<Engine> e_;
  std::mt19937_64 rng_{11};
};

TEST_F(EnginePrefix, SameHundredTokenPrefixHitsSixBlocks) {
  const auto prompt = random_prompt(rng_, 100, m_->config.n_vocab);
  const Finished first = run_one(greedy_request(prompt, 8));
  EXPECT_EQ(first.usage.cached_tokens, 0);
  int64_t computed = 0;
  const Finished second = run_one(greedy_request(prompt, 8), &computed);
  EXPECT_EQ(second.usage.cached_tokens, 96);
  EXPECT_EQ(computed, 4);  // only the rest of the prompt
  EXPECT_EQ(second.tokens, first.tokens);
  // Longer prompt with the same 100-token prefix: still the 6 full blocks.
  auto longer = prompt;
  for (int i = 0; i < 20; ++i) longer.push_back(5 + i);
  const Finished third = run_one(greedy_request(longer, 4), &computed);
  EXPECT_EQ(third.usage.cached_tokens, 96);
  EXPECT_EQ(computed, 120 - 96);
}

// Issue 13, trap 4: 8 identical prompts admitted in one step compute the prompt once plus the
// last partial block for each of the other 7, and decode exactly as one alone does.
TEST_F(EnginePrefix, EightIdenticalPromptsAdmittedTogetherComputeThePrefixOnce) {
  const auto prompt = random_prompt(rng_, 100, m_->config.n_vocab);
  const Finished alone = run_one(greedy_request(prompt, 6));
  auto e = make_engine(*m_, f32_config());
  ASSERT_TRUE(e);
  std::vector<RequestId> ids;
  for (int i = 0; i < 8; ++i) ids.push_back(e->add_request(greedy_request(prompt, 6)).value());
  auto res = drain(*e);
  EXPECT_EQ(e->stats().prompt_tokens_computed, 100 + 7 * 4);
  for (size_t i = 0; i < ids.size(); ++i) {
    const Finished& f = res.at({ids[i].value, 0});
    EXPECT_EQ(f.tokens, alone.tokens) << "request " << i;
    EXPECT_EQ(f.usage.cached_tokens, i == 0 ? 0 : 96) << "request " << i;
  }
}

TEST_F(EnginePrefix, NextChatTurnReusesPreviousTurnAndEditReusesOnlyBeforeTheEdit) {
  const auto turn1 = random_prompt(rng_, 50, m_->config.n_vocab);
  const Finished a = run_one(greedy_request(turn1, 20));
  // Turn 2 = turn 1 + its answer + a new message.
  std::vector<int32_t> turn2 = turn1;
  turn2.insert(turn2.end(), a.tokens.begin(), a.tokens.end());
  const int32_t history = static_cast<int32_t>(turn2.size());  // 70
  for (int i = 0; i < 30; ++i) turn2.push_back(40 + i);
  const Finished b = run_one(greedy_request(turn2, 5));
  // Computed KV of turn 1 covers its prompt and all answer tokens but the last one.
  EXPECT_EQ(b.usage.cached_tokens, (history - 1) / 16 * 16);
  // Editing token 40 of the history: only the blocks before it are reused.
  auto edited = turn2;
  edited[40] = edited[40] == 7 ? 8 : 7;
  const Finished c = run_one(greedy_request(edited, 5));
  EXPECT_EQ(c.usage.cached_tokens, 32);
}

TEST_F(EnginePrefix, OtherNamespaceSharesNothing) {
  const auto prompt = random_prompt(rng_, 100, m_->config.n_vocab);
  auto r = greedy_request(prompt, 4);
  r.cache_scope = CacheNamespace::from_string("tenant-a", 8);
  EXPECT_EQ(run_one(r).usage.cached_tokens, 0);
  EXPECT_EQ(run_one(r).usage.cached_tokens, 96);
  r.cache_scope = CacheNamespace::from_string("tenant-b", 8);
  int64_t computed = 0;
  EXPECT_EQ(run_one(r, &computed).usage.cached_tokens, 0);
  EXPECT_EQ(computed, 100);
}

TEST(EnginePreemption, TightKvBudgetGivesSameOutputsWithPreemptions) {
  auto m = load_or_die(shared_path("models/stories260K.gguf"));
  ASSERT_TRUE(m);
  std::mt19937_64 rng(3);
  std::vector<GenerateRequest> reqs;
  for (int i = 0; i < 12; ++i)
    reqs.push_back(greedy_request(random_prompt(rng, 20 + 5 * i, m->config.n_vocab), 40));
  auto run = [&](int64_t kv_bytes, EngineStats* stats) {
    EngineConfig c = f32_config();
    c.kv_memory_bytes = kv_bytes;
    c.enable_prefix_cache = false;
    auto e = make_engine(*m, c);
    std::vector<RequestId> ids;
    for (const auto& r : reqs) ids.push_back(e->add_request(r).value());
    auto res = drain(*e);
    *stats = e->stats();
    std::vector<std::vector<int32_t>> out;
    for (RequestId id : ids) out.push_back(res.at({id.value, 0}).tokens);
    return out;
  };
  EngineStats roomy, tight;
  const auto expected = run(64 << 20, &roomy);
  EXPECT_EQ(roomy.preemptions, 0);
  // The largest request needs ceil((75 + 39) / 16) = 8 blocks; give the cache 12.
  const int64_t block_bytes = roomy.kv_bytes_per_block;
  const auto got = run(12 * block_bytes, &tight);
  EXPECT_EQ(tight.kv_blocks_total, 12);
  EXPECT_GT(tight.preemptions, 0);
  EXPECT_EQ(got, expected);
}

TEST(EngineSamples, FourSamplesShareThePromptBlocks) {
  auto m = load_or_die(shared_path("models/stories260K.gguf"));
  ASSERT_TRUE(m);
  std::mt19937_64 rng(5);
  GenerateRequest r = greedy_request(random_prompt(rng, 512, m->config.n_vocab), 16);
  r.n = 4;
  r.sampling.temperature = 1.0f;
  r.sampling.top_k = 0;
  r.sampling.top_p = 1.0f;
  r.sampling.min_p = 0.0f;
  EngineConfig c = f32_config();
  c.max_batched_tokens = 512;
  auto e = make_engine(*m, c);
  const RequestId id = e->add_request(r).value();
  auto res = drain(*e);
  ASSERT_EQ(res.size(), 4u);
  std::set<std::vector<int32_t>> distinct;
  for (int i = 0; i < 4; ++i) {
    const Finished& f = res.at({id.value, i});
    EXPECT_EQ(f.tokens.size(), 16u);
    EXPECT_EQ(f.usage.prompt_tokens, 512);
    distinct.insert(f.tokens);
  }
  EXPECT_GT(distinct.size(), 1u) << "samples should differ at temperature 1";
  // 32 prompt blocks once, plus each sample's own block for its 15 computed output tokens
  // (4 x 32 + 4 = 132 if each sample held its own copy of the prompt).
  EXPECT_EQ(e->stats().kv_blocks_peak, 32 + 4);
}

TEST(EngineWaste, UnderOneBlockPerRequestOnMixedLengths) {
  auto m = load_or_die(shared_path("models/stories260K.gguf"));
  ASSERT_TRUE(m);
  std::mt19937_64 rng(9);
  EngineConfig c = f32_config();
  auto e = make_engine(*m, c);
  for (int i = 0; i < 24; ++i)
    ASSERT_TRUE(e->add_request(greedy_request(random_prompt(rng, 3 + 17 * i % 150, m->config.n_vocab),
                                              1 + 11 * i % 60))
                    .ok());
  std::vector<RequestDelta> deltas;
  int steps = 0;
  while (e->has_unfinished()) {
    ASSERT_TRUE(e->step(&deltas).ok());
    const EngineStats s = e->stats();
    const int64_t waste = s.kv_slots_allocated - s.kv_slots_used;
    EXPECT_GE(waste, 0);
    if (s.running > 0) {
      EXPECT_LT(waste, int64_t{c.block_size} * s.running);
    }
    ++steps;
  }
  EXPECT_GT(steps, 10);
}

TEST(EngineApi, RejectsBadRequestsAndAborts) {
  auto m = load_or_die(shared_path("models/stories260K.gguf"));
  ASSERT_TRUE(m);
  auto e = make_engine(*m, f32_config());
  EXPECT_FALSE(e->add_request(greedy_request({}, 4)).ok());
  EXPECT_FALSE(e->add_request(greedy_request({1, 100000}, 4)).ok());
  EXPECT_FALSE(e->add_request(greedy_request({1, 2}, 0)).ok());
  EXPECT_FALSE(e->add_request(greedy_request({1, 2}, 3000)).ok());  // beyond the 2048 context
  auto bad_sampling = greedy_request({1, 2}, 4);
  bad_sampling.sampling.top_p = -1;
  EXPECT_FALSE(e->add_request(bad_sampling).ok());
  EXPECT_FALSE(e->has_unfinished());

  const RequestId a = e->add_request(greedy_request({1, 5, 6}, 50)).value();
  const RequestId b = e->add_request(greedy_request({1, 7, 8}, 5)).value();
  std::vector<RequestDelta> deltas;
  ASSERT_TRUE(e->step(&deltas).ok());
  EXPECT_TRUE(e->abort(a));
  EXPECT_FALSE(e->abort(RequestId(999)));
  auto res = drain(*e);
  EXPECT_EQ(res.at({a.value, 0}).reason, FinishReason::kAborted);
  EXPECT_EQ(res.at({b.value, 0}).reason, FinishReason::kLength);
  EXPECT_FALSE(e->abort(a));
}

TEST(EngineText, StopsAtEosAndStreamsText) {
  auto m = load_or_die(shared_path("models/stories260K.gguf"));
  ASSERT_TRUE(m);
  auto tok = Tokenizer::create(m->vocab);
  ASSERT_TRUE(tok.ok());
  auto e = Engine::create(*m, tok->get(), f32_config());
  ASSERT_TRUE(e.ok());
  GenerateRequest r = greedy_request({1}, 256);
  r.sampling.ignore_eos = false;
  const RequestId id = (*e)->add_request(r).value();
  std::string text;
  std::vector<int32_t> tokens;
  std::vector<RequestDelta> deltas;
  FinishReason reason = FinishReason::kNone;
  while ((*e)->has_unfinished()) {
    ASSERT_TRUE((*e)->step(&deltas).ok());
    for (const auto& d : deltas) {
      EXPECT_EQ(d.id, id);
      text += d.text;
      tokens.insert(tokens.end(), d.token_ids.begin(), d.token_ids.end());
      reason = d.finish_reason;
    }
  }
  // Same as the contiguous reference path's greedy story (llama2.c's golden ids up to EOS).
  const auto golden = testing::read_csv_ids(
      shared_path("models/reference/stories260K_greedy_t0_n256.token_ids.csv"));
  std::vector<int32_t> expect;
  for (int32_t t : golden) {
    if (t == 2) break;
    expect.push_back(t);
  }
  if (!expect.empty() && expect.front() == 1) expect.erase(expect.begin());
  EXPECT_EQ(tokens, expect);
  EXPECT_EQ(text, (*tok)->decode(tokens));
  EXPECT_FALSE(text.empty());
  EXPECT_EQ(reason, tokens.size() < 256 ? FinishReason::kStop : FinishReason::kLength);
}

}  // namespace
}  // namespace hinge

namespace hinge {
namespace {

TEST(EngineLogprobs, SampledAndTopAreTheLogSoftmaxOfTheLogits) {
  auto m = testing::load_or_die(testing::shared_path("models/stories260K.gguf"));
  ASSERT_TRUE(m);
  EngineConfig c;
  c.k_dtype = c.v_dtype = KvDtype::kF32;
  c.kv_memory_bytes = 4 << 20;
  auto engine = std::move(Engine::create(*m, nullptr, c)).value();
  GenerateRequest r;
  r.prompt_token_ids = {1, 403, 407, 261, 378};
  r.max_new_tokens = 6;
  r.sampling.temperature = 0;
  r.logprobs = 4;
  ASSERT_TRUE(engine->add_request(r).ok());
  std::vector<int32_t> tokens;
  std::vector<PositionLogprobs> lps;
  std::vector<RequestDelta> deltas;
  while (engine->has_unfinished()) {
    ASSERT_TRUE(engine->step(&deltas).ok());
    for (auto& d : deltas) {
      ASSERT_EQ(d.logprobs.size(), d.token_ids.size());
      tokens.insert(tokens.end(), d.token_ids.begin(), d.token_ids.end());
      lps.insert(lps.end(), d.logprobs.begin(), d.logprobs.end());
    }
  }
  ASSERT_EQ(tokens.size(), 6u);
  EXPECT_EQ(tokens, testing::greedy(*m, r.prompt_token_ids, 6));
  for (size_t i = 0; i < lps.size(); ++i) {
    const PositionLogprobs& p = lps[i];
    EXPECT_EQ(p.sampled.token, tokens[i]);
    ASSERT_EQ(p.top.size(), 4u);
    EXPECT_EQ(p.top[0].token, tokens[i]);  // greedy takes the most likely
    EXPECT_FLOAT_EQ(p.top[0].logprob, p.sampled.logprob);
    double mass = 0;
    for (size_t k = 0; k < p.top.size(); ++k) {
      EXPECT_LE(p.top[k].logprob, 0.0f);
      if (k > 0) {
        EXPECT_LE(p.top[k].logprob, p.top[k - 1].logprob);
      }
      mass += std::exp(static_cast<double>(p.top[k].logprob));
    }
    EXPECT_LE(mass, 1.0 + 1e-5);
    EXPECT_GT(mass, 0.0);
  }
}

}  // namespace
}  // namespace hinge
