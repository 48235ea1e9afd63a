// Speculative decoding with a draft model (engine/draft_model.h) end to end on the real tiny
// models. The drafts come from stories260K itself (every draft accepted) and from its
// transplant to a widened Q4_K llama (model/transplant.h: the same function up to 4-bit
// rounding, so most drafts are accepted and some are not). Greedy output equals plain decoding
// alone, in a batch, with prefix hits, preemption and a grammar; sampled output keeps the
// model's distribution (rejection sampling with the draft's probabilities) and the same seeds
// give the same stream.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>

#include "grammar/grammar.h"
#include "hinge/engine.h"
#include "model/loaded_model.h"
#include "model/transplant.h"
#include "model_test_util.h"
#include "tokenizer/tokenizer.h"

namespace hinge {
namespace {

using testing::load_or_die;
using testing::request;
using testing::shared_path;

using DraftRun = testing::SampleStreams;

const LoadedModel& stories() {
  static const std::unique_ptr<LoadedModel> m = load_or_die(shared_path("models/stories260K.gguf"));
  return *m;
}

// stories260K as a widened Q4_K llama: a draft that mostly agrees.
const LoadedModel& q4k_draft() {
  static const std::unique_ptr<LoadedModel> m = [] {
    const std::string path = testing::temp_dir() + "/stories260K.transplant-q4k.gguf";
    EXPECT_TRUE(write_transplanted_model(stories(), "llama", GgmlType::Q4_K, path).ok());
    return load_or_die(path);
  }();
  return *m;
}

DraftRun run(const LoadedModel& m, const LoadedModel* draft, std::vector<GenerateRequest> reqs,
             int64_t kv_bytes = 64 << 20, const Tokenizer* tok = nullptr, int32_t spec_k = 4,
             int32_t max_batched_tokens = 0) {
  EngineConfig c = testing::small_f32_engine_config(1, kv_bytes);
  c.max_num_seqs = 32;
  if (max_batched_tokens > 0) c.max_batched_tokens = max_batched_tokens;
  c.spec_mode = draft ? SpecMode::kDraft : SpecMode::kNone;
  c.draft_model = draft;
  c.spec_k = spec_k;
  return testing::run_streams(m, c, std::move(reqs), tok);
}

std::vector<GenerateRequest> story_requests(const Tokenizer& tok, int n, int32_t max_new) {
  const char* starts[] = {"Once upon a time", "Lily and Ben went to the park.",
                          "The little dog was sad because", "Tom had a red ball. One day",
                          "Sue liked to", "There was a big tree"};
  std::vector<GenerateRequest> reqs;
  for (int i = 0; i < n; ++i)
    reqs.push_back(request(tok.encode(starts[i % 6], true, false), max_new + 3 * i));
  return reqs;
}

TEST(EngineSpecDraft, GreedyEqualsPlainAloneAndInABatch) {
  auto tok = std::move(Tokenizer::create(stories().vocab)).value();
  auto reqs = story_requests(*tok, 10, 40);
  for (size_t i = 0; i < reqs.size(); i += 3) reqs[i].logprobs = 2;  // rows of accepted drafts
  const DraftRun plain = run(stories(), nullptr, reqs);
  // The model drafting for itself: every draft accepted.
  const DraftRun self = run(stories(), &stories(), reqs);
  EXPECT_EQ(self.tokens, plain.tokens);
  // Log-probabilities of the same tokens (rows computed k + 1 at a time may round differently
  // in the last bits).
  ASSERT_EQ(self.logprobs.size(), plain.logprobs.size());
  for (const auto& [key, lps] : plain.logprobs) {
    ASSERT_EQ(self.logprobs.at(key).size(), lps.size());
    for (size_t i = 0; i < lps.size(); ++i) EXPECT_NEAR(self.logprobs.at(key)[i], lps[i], 1e-4);
  }
  EXPECT_GT(self.stats.spec_verifications, 0);
  EXPECT_EQ(self.stats.spec_accepted_tokens, self.stats.spec_draft_tokens);
  EXPECT_LT(self.stats.steps, plain.stats.steps);
  EXPECT_GT(self.stats.spec_draft_model_tokens, 0);
  // A draft that is sometimes wrong: rejected drafts' KV rolled back in both caches.
  for (int32_t k : {1, 3, 8}) {
    const DraftRun q4 = run(stories(), &q4k_draft(), reqs, 64 << 20, nullptr, k);
    EXPECT_EQ(q4.tokens, plain.tokens) << "k " << k;
    EXPECT_GT(q4.stats.spec_accepted_tokens, 0);
    EXPECT_LT(q4.stats.spec_accepted_tokens, q4.stats.spec_draft_tokens);
  }
  // Alone (one request per engine).
  for (size_t i = 0; i < 2; ++i) {
    const DraftRun a = run(stories(), &q4k_draft(), {reqs[i]});
    EXPECT_EQ(a.tokens.at({0, 0}), plain.tokens.at({i, 0}));
  }
}

// A step budget smaller than the prompts and than the requests drafting at once: the draft's
// catch-up and decode passes are split into passes of at most that many tokens.
TEST(EngineSpecDraft, SmallStepBudgetSplitsTheDraftPasses) {
  auto tok = std::move(Tokenizer::create(stories().vocab)).value();
  const auto reqs = story_requests(*tok, 12, 24);
  const DraftRun plain = run(stories(), nullptr, reqs, 64 << 20, nullptr, 4, 5);
  const DraftRun spec = run(stories(), &q4k_draft(), reqs, 64 << 20, nullptr, 4, 5);
  EXPECT_EQ(spec.tokens, plain.tokens);
  EXPECT_GT(spec.stats.spec_accepted_tokens, 0);
  EXPECT_GT(spec.stats.spec_draft_model_passes, 2 * spec.stats.spec_verifications / 5);
}

TEST(EngineSpecDraft, GreedyEqualsPlainTinyStories656k) {
  auto m = load_or_die(shared_path("models/tinystories-656k"));
  ASSERT_TRUE(m);
  auto tok = std::move(Tokenizer::create(m->vocab)).value();
  const auto reqs = story_requests(*tok, 6, 32);
  const DraftRun plain = run(*m, nullptr, reqs);
  const DraftRun self = run(*m, m.get(), reqs);
  EXPECT_EQ(self.tokens, plain.tokens);
  EXPECT_EQ(self.stats.spec_accepted_tokens, self.stats.spec_draft_tokens);
  EXPECT_GT(self.stats.spec_accepted_tokens, 0);
}

TEST(EngineSpecDraft, PrefixHitsAndPreemptionKeepTheOutputs) {
  auto tok = std::move(Tokenizer::create(stories().vocab)).value();
  const std::vector<int32_t> shared =
      tok->encode("Once upon a time, there was a little girl named Lily. She", true, false);
  std::vector<GenerateRequest> reqs;
  std::mt19937_64 rng(4);
  for (int i = 0; i < 10; ++i) {
    std::vector<int32_t> p = shared;
    for (int j = 0; j < 2 + i; ++j) p.push_back(static_cast<int32_t>(3 + rng() % 400));
    reqs.push_back(request(std::move(p), 48));
  }
  const DraftRun roomy = run(stories(), nullptr, reqs);
  const int64_t block_bytes = roomy.stats.kv_bytes_per_block;
  const DraftRun tight = run(stories(), &q4k_draft(), reqs, 14 * block_bytes);
  EXPECT_GT(tight.stats.preemptions, 0);
  EXPECT_GT(tight.stats.spec_accepted_tokens, 0);
  EXPECT_EQ(tight.tokens, roomy.tokens);
  const DraftRun hits = run(stories(), &q4k_draft(), reqs);
  EXPECT_GT(hits.stats.kv.num_prefix_hit_tokens, 0);
  EXPECT_EQ(hits.tokens, roomy.tokens);
}

TEST(EngineSpecDraft, GrammarRequestsBesideDrafts) {
  auto tok = std::move(Tokenizer::create(stories().vocab)).value();
  auto g = grammar::Grammar::parse(R"(root ::= [^e\n]{1,300})");
  ASSERT_TRUE(g.ok()) << g.status().message();
  auto grammar = std::make_shared<const grammar::Grammar>(std::move(g).value());
  auto reqs = story_requests(*tok, 6, 40);
  for (size_t i = 0; i < reqs.size(); i += 2) reqs[i].sampling.grammar = grammar;
  const DraftRun plain = run(stories(), nullptr, reqs, 64 << 20, tok.get());
  const DraftRun spec = run(stories(), &q4k_draft(), reqs, 64 << 20, tok.get());
  EXPECT_EQ(spec.tokens, plain.tokens);
  EXPECT_GT(spec.stats.spec_accepted_tokens, 0);
  // Sampled under the grammar: drafts the mask forbids are rejected; the output obeys it.
  for (auto& r : reqs) {
    r.sampling.temperature = 0.8f;
    r.sampling.seed = 17;
  }
  const DraftRun sampled = run(stories(), &q4k_draft(), reqs, 64 << 20, tok.get());
  for (size_t i = 0; i < reqs.size(); i += 2) {
    std::string text;
    int32_t prev = reqs[i].prompt_token_ids.back();
    for (int32_t t : sampled.tokens.at({i, 0})) {
      text += tok->piece_after(prev, t);
      prev = t;
    }
    EXPECT_EQ(text.find('e'), std::string::npos) << text;
  }
}

TEST(EngineSpecDraft, SameSeedsGiveTheSameStream) {
  auto tok = std::move(Tokenizer::create(stories().vocab)).value();
  auto reqs = story_requests(*tok, 6, 40);
  for (size_t i = 0; i < reqs.size(); ++i) {
    reqs[i].sampling.temperature = 0.7f;
    reqs[i].sampling.seed = 50 + i;
    reqs[i].sampling.top_p = i % 2 ? 0.9f : 1.0f;
    reqs[i].sampling.top_k = i % 3 == 0 ? 20 : 0;
  }
  reqs[1].n = 3;  // parallel samples draft after the fork, each with its own stream
  const DraftRun a = run(stories(), &q4k_draft(), reqs);
  const DraftRun b = run(stories(), &q4k_draft(), reqs);
  EXPECT_EQ(a.tokens, b.tokens);
  EXPECT_GT(a.stats.spec_accepted_tokens, 0);
  EXPECT_LT(a.stats.spec_accepted_tokens, a.stats.spec_draft_tokens);
  EXPECT_EQ(a.tokens.size(), reqs.size() + 2);
}

// Rejection sampling keeps the model's distribution: 600 seeds with the Q4_K draft against 600
// other seeds without, temperature 0.9 over the whole vocabulary: the counts of every frequent
// token at each of the first positions agree within 4 sd. The draft's q differs from the
// model's p, so drafts are both accepted and rejected (then drawn from max(0, p - q)).
TEST(EngineSpecDraft, SampledDraftsKeepTheTargetDistribution) {
  auto tok = std::move(Tokenizer::create(stories().vocab)).value();
  const std::vector<int32_t> prompt =
      tok->encode("Once upon a time, there was a little girl named Lily. She", true, false);
  constexpr int kSeeds = 600, kTokens = 6;
  auto draws = [&](const LoadedModel* draft, uint64_t seed0, EngineStats* stats) {
    std::vector<GenerateRequest> reqs;
    for (int i = 0; i < kSeeds; ++i) {
      GenerateRequest r = request(prompt, kTokens, 0.9f, seed0 + static_cast<uint64_t>(i));
      r.sampling.top_k = 0;
      r.sampling.top_p = 1.0f;
      r.sampling.min_p = 0.0f;
      reqs.push_back(r);
    }
    DraftRun out = run(stories(), draft, reqs);
    *stats = out.stats;
    return testing::token_counts(out, kTokens);
  };
  EngineStats plain_stats, spec_stats;
  const auto plain = draws(nullptr, 1000, &plain_stats);
  const auto spec = draws(&q4k_draft(), 900000, &spec_stats);
  EXPECT_GT(spec_stats.spec_accepted_tokens, 500);
  EXPECT_LT(spec_stats.spec_accepted_tokens, spec_stats.spec_draft_tokens * 95 / 100);
  const int compared = testing::expect_same_token_distribution(plain, spec);
  EXPECT_GT(compared, 8);
}

// A lossy KV dtype: the draft's KV is calibrated at start as the target's, so the drafts (and
// the outputs) do not depend on which request ran first.
TEST(EngineSpecDraft, QuantizedKvDraftDoesNotDependOnTheFirstRequest) {
  auto tok = std::move(Tokenizer::create(stories().vocab)).value();
  auto reqs = story_requests(*tok, 4, 32);
  for (size_t i = 0; i < reqs.size(); ++i) {
    reqs[i].sampling.temperature = 0.8f;
    reqs[i].sampling.seed = 7 + i;
  }
  auto alone = [&](const GenerateRequest& r, const std::vector<GenerateRequest>& before) {
    EngineConfig c = testing::small_kv_engine_config(KvDtype::kInt8);
    c.spec_mode = SpecMode::kDraft;
    c.draft_model = &q4k_draft();
    auto e = std::move(Engine::create(stories(), nullptr, c)).value();
    for (const GenerateRequest& b : before) testing::run_all(*e, {b});
    const auto out = testing::run_all(*e, {r});
    EXPECT_GT(e->stats().spec_draft_tokens, 0);
    return out[0];
  };
  // The last request's stream, first on a fresh engine, then after the others ran.
  EXPECT_EQ(alone(reqs[3], {}), alone(reqs[3], {reqs[0], reqs[1], reqs[2]}));
}

TEST(EngineSpecDraft, RefusesAnotherVocabularyAndAMissingDraft) {
  auto other = load_or_die(shared_path("models/tinystories-656k"));
  ASSERT_TRUE(other);
  EngineConfig c = testing::small_f32_engine_config(1, 16 << 20);
  c.spec_mode = SpecMode::kDraft;
  c.draft_model = other.get();
  auto e = Engine::create(stories(), nullptr, c);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("vocabulary"), std::string::npos) << e.status().message();
  c.draft_model = nullptr;
  e = Engine::create(stories(), nullptr, c);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("--draft-model"), std::string::npos);
  c.spec_mode = SpecMode::kNgram;
  c.draft_model = &stories();
  EXPECT_FALSE(Engine::create(stories(), nullptr, c).ok());
}

}  // namespace
}  // namespace hinge
