// Speculative decoding (prompt lookup) end to end on the real tiny models: the outputs are the
// same token streams as without it — greedy and sampled (the same seeds), with repetition
// penalties, logprobs, parallel samples, a grammar request beside, prefix hits and preemption —
// while drafts are accepted (more than one token per verification).
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>

#include "engine/spec_decode.h"
#include "hinge/engine.h"
#include "model/loaded_model.h"
#include "grammar/grammar.h"
#include "model_test_util.h"
#include "tokenizer/tokenizer.h"

namespace hinge {
namespace {

using testing::load_or_die;
using testing::request;
using testing::shared_path;

using SpecRun = testing::SampleStreams;

// Text that repeats itself (what prompt lookup is for): a random phrase, some noise, the
// phrase again, cut short so the model's continuation may follow it.
std::vector<int32_t> repeating_prompt(std::mt19937_64& rng, int32_t n_vocab) {
  std::uniform_int_distribution<int32_t> pick(3, n_vocab - 1);
  std::vector<int32_t> phrase;
  for (int i = 0, n = 6 + static_cast<int>(rng() % 10); i < n; ++i) phrase.push_back(pick(rng));
  std::vector<int32_t> p{1};
  p.insert(p.end(), phrase.begin(), phrase.end());
  for (int i = 0, n = static_cast<int>(rng() % 8); i < n; ++i) p.push_back(pick(rng));
  p.insert(p.end(), phrase.begin(), phrase.begin() + 3);
  return p;
}

SpecRun run(const LoadedModel& m, std::vector<GenerateRequest> reqs, SpecMode mode,
            int64_t kv_bytes = 64 << 20, const Tokenizer* tok = nullptr) {
  EngineConfig c = testing::small_f32_engine_config(1, kv_bytes);
  c.max_num_seqs = 32;
  c.spec_mode = mode;
  return testing::run_streams(m, c, std::move(reqs), tok);
}

void expect_same_streams_with_drafts_accepted(const LoadedModel& m,
                                              const std::vector<GenerateRequest>& reqs,
                                              const Tokenizer* tok = nullptr) {
  const SpecRun plain = run(m, reqs, SpecMode::kNone, 64 << 20, tok);
  const SpecRun spec = run(m, reqs, SpecMode::kNgram, 64 << 20, tok);
  EXPECT_EQ(spec.tokens, plain.tokens);
  // Log-probabilities: the same tokens' (rows computed k + 1 at a time may round differently
  // in the last bits than rows computed one at a time).
  ASSERT_EQ(spec.logprobs.size(), plain.logprobs.size());
  for (const auto& [key, lps] : plain.logprobs) {
    const std::vector<float>& got = spec.logprobs.at(key);
    ASSERT_EQ(got.size(), lps.size());
    for (size_t i = 0; i < lps.size(); ++i) EXPECT_NEAR(got[i], lps[i], 1e-4) << i;
  }
  EXPECT_EQ(plain.stats.spec_verifications, 0);
  EXPECT_GT(spec.stats.spec_verifications, 0);
  EXPECT_GT(spec.stats.spec_accepted_tokens, 0);
  EXPECT_LE(spec.stats.steps, plain.stats.steps);
  if (reqs.size() == 1) {
    EXPECT_LT(spec.stats.steps, plain.stats.steps) << "accepted drafts save steps";
  }
}

TEST(EngineSpec, GreedyAloneAndInABatchEqualsPlainStories260K) {
  auto m = load_or_die(shared_path("models/stories260K.gguf"));
  ASSERT_TRUE(m);
  std::mt19937_64 rng(1);
  std::vector<GenerateRequest> reqs;
  for (int i = 0; i < 12; ++i) reqs.push_back(request(repeating_prompt(rng, m->config.n_vocab), 48));
  // Alone: one request per engine.
  for (int i = 0; i < 3; ++i) expect_same_streams_with_drafts_accepted(*m, {reqs[static_cast<size_t>(i)]});
  // In a batch, with another's prefill in the same steps.
  expect_same_streams_with_drafts_accepted(*m, reqs);
}

TEST(EngineSpec, GreedyEqualsPlainTinyStories656k) {
  auto m = load_or_die(shared_path("models/tinystories-656k"));
  ASSERT_TRUE(m);
  std::mt19937_64 rng(2);
  std::vector<GenerateRequest> reqs;
  for (int i = 0; i < 6; ++i) reqs.push_back(request(repeating_prompt(rng, m->config.n_vocab), 40));
  expect_same_streams_with_drafts_accepted(*m, reqs);
}

TEST(EngineSpec, SampledWithPenaltiesAndLogprobsIsTheSameStreamForTheSameSeeds) {
  auto m = load_or_die(shared_path("models/stories260K.gguf"));
  ASSERT_TRUE(m);
  std::mt19937_64 rng(3);
  std::vector<GenerateRequest> reqs;
  for (int i = 0; i < 8; ++i) {
    GenerateRequest r = request(repeating_prompt(rng, m->config.n_vocab), 40, 0.3f + 0.1f * i, 100 + i);
    r.sampling.top_p = i % 2 ? 0.9f : 1.0f;
    r.sampling.top_k = i % 3 == 0 ? 20 : 0;
    if (i % 4 == 1) r.sampling.repetition_penalty = 1.1f;
    r.logprobs = i % 2 ? 2 : -1;
    if (i == 5) r.n = 3;  // parallel samples: each speculates after the fork
    reqs.push_back(r);
  }
  expect_same_streams_with_drafts_accepted(*m, reqs);
}

TEST(EngineSpec, GrammarAndEosRequestsBesideDrafts) {
  auto m = load_or_die(shared_path("models/stories260K.gguf"));
  ASSERT_TRUE(m);
  auto tok = std::move(Tokenizer::create(m->vocab)).value();
  auto g = grammar::Grammar::parse(R"(root ::= "{" [a-z ]{1,20} "}")");
  ASSERT_TRUE(g.ok()) << g.status().message();
  auto grammar = std::make_shared<const grammar::Grammar>(std::move(g).value());
  std::mt19937_64 rng(6);
  std::vector<GenerateRequest> reqs;
  for (int i = 0; i < 8; ++i) {
    GenerateRequest r = request(repeating_prompt(rng, m->config.n_vocab), 64);
    r.sampling.ignore_eos = i % 2 == 0;  // the others end at EOS, maybe inside accepted drafts
    if (i >= 6) {
      r.sampling.grammar = grammar;  // drafts verified under its mask, beside the others'
      r.sampling.temperature = 0.9f;
      r.sampling.seed = 7 + static_cast<uint64_t>(i);
    }
    reqs.push_back(r);
  }
  expect_same_streams_with_drafts_accepted(*m, reqs, tok.get());
}

// A grammar's requests draft under their mask: a story that repeats itself, copied under a
// grammar that forbids the letter 'e' (so drafts copied from the prompt are cut wherever the
// mask disallows them): the same tokens as without drafts, no 'e' anywhere, drafts accepted.
TEST(EngineSpec, GrammarRequestsDraftUnderTheirMask) {
  auto m = load_or_die(shared_path("models/stories260K.gguf"));
  ASSERT_TRUE(m);
  auto tok = std::move(Tokenizer::create(m->vocab)).value();
  auto g = grammar::Grammar::parse(R"(root ::= [^e\n]{1,300})");
  ASSERT_TRUE(g.ok()) << g.status().message();
  auto grammar = std::make_shared<const grammar::Grammar>(std::move(g).value());
  const std::vector<int32_t> prompt = tok->encode(
      "Lily had a big dog. Lily had a big dog. Lily had a big dog. Lily had a big", true, false);
  std::vector<GenerateRequest> reqs;
  for (int i = 0; i < 4; ++i) {
    GenerateRequest r = request(prompt, 60, i < 2 ? 0.0f : 0.7f, 40 + static_cast<uint64_t>(i));
    r.sampling.ignore_eos = true;
    r.sampling.grammar = grammar;
    reqs.push_back(r);
  }
  const SpecRun plain = run(*m, reqs, SpecMode::kNone, 64 << 20, tok.get());
  const SpecRun spec = run(*m, reqs, SpecMode::kNgram, 64 << 20, tok.get());
  EXPECT_EQ(spec.tokens, plain.tokens);
  EXPECT_GT(spec.stats.spec_accepted_tokens, 0);
  for (const auto& [key, tokens] : spec.tokens) {
    std::string text;
    int32_t prev = prompt.back();
    for (int32_t t : tokens) {
      text += tok->piece_after(prev, t);
      prev = t;
    }
    EXPECT_EQ(text.find('e'), std::string::npos) << text;
    EXPECT_FALSE(text.empty());
  }
}

TEST(EngineSpec, PrefixHitsAndPreemptionKeepTheStreams) {
  auto m = load_or_die(shared_path("models/stories260K.gguf"));
  ASSERT_TRUE(m);
  std::mt19937_64 rng(4);
  const std::vector<int32_t> shared = repeating_prompt(rng, m->config.n_vocab);
  std::vector<GenerateRequest> reqs;
  for (int i = 0; i < 10; ++i) {
    std::vector<int32_t> p = shared;
    for (int j = 0; j < 3 + i; ++j) p.push_back(static_cast<int32_t>(3 + (rng() % 400)));
    p.insert(p.end(), shared.begin() + 1, shared.begin() + 5);
    reqs.push_back(request(std::move(p), 48));
  }
  const SpecRun roomy = run(*m, reqs, SpecMode::kNone);
  const int64_t block_bytes = roomy.stats.kv_bytes_per_block;
  // Tight: preemption by recompute, with drafts in flight.
  const SpecRun tight = run(*m, reqs, SpecMode::kNgram, 14 * block_bytes);
  EXPECT_GT(tight.stats.preemptions, 0);
  EXPECT_GT(tight.stats.spec_accepted_tokens, 0);
  EXPECT_EQ(tight.tokens, roomy.tokens);
  const SpecRun hits = run(*m, reqs, SpecMode::kNgram);
  EXPECT_EQ(hits.tokens, roomy.tokens);
}

// Sampled speculation keeps the target's distribution: 600 seeds with drafts against 600 other
// seeds without, temperature 0.6 over the whole vocabulary, on a story that repeats itself (the
// model copies it, so drafts are proposed and accepted or rejected at random): the counts of
// every frequent token at each of the positions after the first agree within 4 sd.
TEST(EngineSpec, SampledDraftsKeepTheTargetDistribution) {
  auto m = load_or_die(shared_path("models/stories260K.gguf"));
  ASSERT_TRUE(m);
  auto tok = std::move(Tokenizer::create(m->vocab)).value();
  const std::vector<int32_t> prompt = tok->encode(
      "Once upon a time, there was a little girl named Lily. She liked to play with her ball. "
      "Once upon a time, there was a little girl named Lily. She",
      true, false);
  constexpr int kSeeds = 600, kTokens = 8;
  auto draws = [&](SpecMode mode, uint64_t seed0, EngineStats* stats) {
    std::vector<GenerateRequest> reqs;
    for (int i = 0; i < kSeeds; ++i) {
      GenerateRequest r = request(prompt, kTokens, 0.6f, seed0 + static_cast<uint64_t>(i));
      r.sampling.top_k = 0;
      r.sampling.top_p = 1.0f;
      r.sampling.min_p = 0.0f;
      reqs.push_back(r);
    }
    SpecRun out = run(*m, reqs, mode);
    *stats = out.stats;
    return testing::token_counts(out, kTokens);
  };
  EngineStats plain_stats, spec_stats;
  const auto plain = draws(SpecMode::kNone, 1000, &plain_stats);
  const auto spec = draws(SpecMode::kNgram, 900000, &spec_stats);
  EXPECT_GT(spec_stats.spec_accepted_tokens, 100);
  EXPECT_LT(spec_stats.spec_accepted_tokens, spec_stats.spec_draft_tokens);
  const int compared = testing::expect_same_token_distribution(plain, spec);
  EXPECT_GT(compared, 8);
}

TEST(EngineSpec, ZeroAcceptanceCostsNoStepsAndPausesDrafting) {
  SpecController c(4);
  EXPECT_EQ(c.next_k(), 4);
  for (int i = 0; i < 6; ++i) c.observe(c.next_k() > 0 ? 4 : 0, 0);
  int paused = 0;
  for (int i = 0; i < 16; ++i) paused += c.next_k() == 0 ? 1 : 0;
  EXPECT_GE(paused, 10) << "drafts that never pass stop being proposed for a while";
  SpecController good(6);
  for (int i = 0; i < 10; ++i) good.observe(good.next_k(), good.next_k());
  EXPECT_EQ(good.next_k(), 6);
}

TEST(EngineSpec, NgramDraftFindsTheMostRecentLongestMatch) {
  std::vector<int32_t> out;
  // ... 5 6 7 [8 9] ... 5 6 7 [1 2] ... 5 6 7: the most recent 3-gram match continues 1 2.
  const std::vector<int32_t> t = {5, 6, 7, 8, 9, 0, 5, 6, 7, 1, 2, 3, 5, 6, 7};
  EXPECT_EQ(ngram_draft(t, 2, 3, 2, &out), 2);
  EXPECT_EQ(out, (std::vector<int32_t>{1, 2}));
  EXPECT_EQ(ngram_draft(t, 2, 3, 8, &out), 6);  // up to the end of the sequence
  EXPECT_EQ(out, (std::vector<int32_t>{1, 2, 3, 5, 6, 7}));
  EXPECT_EQ(ngram_draft(std::vector<int32_t>{1, 2, 3, 4}, 1, 3, 4, &out), 0);
  EXPECT_TRUE(out.empty());
  EXPECT_EQ(ngram_draft(std::vector<int32_t>{4, 4}, 1, 3, 4, &out), 1);  // a 1-gram
  EXPECT_EQ(out, (std::vector<int32_t>{4}));
  EXPECT_EQ(ngram_draft(std::vector<int32_t>{7}, 1, 3, 4, &out), 0);
}

}  // namespace
}  // namespace hinge
