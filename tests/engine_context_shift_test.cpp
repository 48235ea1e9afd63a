// The shift context policy on a real model: generation goes far past the context with finite
// log-probabilities in every KV dtype, the sequence never holds more than its window, a shifted
// request's tokens do not depend on the batch it runs in, and what cannot shift is refused.
#include <gtest/gtest.h>

#include <cmath>
#include <algorithm>
#include <map>
#include <random>

#include "common/thread_pool.h"
#include "hinge/engine.h"
#include "model/synth.h"
#include "model_test_util.h"

namespace hinge {
namespace {

using testing::load_or_die;
using testing::seeded_request;
using testing::shared_path;

EngineConfig shift_config(KvDtype dtype, int32_t ctx = 128) {
  EngineConfig c = testing::small_f32_engine_config(1, 8 << 20);
  c.k_dtype = c.v_dtype = dtype;
  c.max_model_len = ctx;
  c.context_policy = ContextPolicy::kShift;
  c.sink_tokens = 4;
  return c;
}

struct Outcome {
  std::map<uint64_t, std::vector<int32_t>> tokens;
  std::map<uint64_t, std::vector<float>> logprobs;
  std::map<uint64_t, RequestUsage> usage;
  int64_t max_kv_used = 0;
};

Outcome run(Engine& e, const std::vector<GenerateRequest>& reqs) {
  Outcome out;
  for (const GenerateRequest& r : reqs) EXPECT_TRUE(e.add_request(r).ok());
  std::vector<RequestDelta> deltas;
  while (e.has_unfinished()) {
    EXPECT_TRUE(e.step(&deltas).ok());
    out.max_kv_used = std::max<int64_t>(out.max_kv_used, e.stats().kv_blocks_used);
    for (const RequestDelta& d : deltas) {
      auto& t = out.tokens[d.id.value];
      t.insert(t.end(), d.token_ids.begin(), d.token_ids.end());
      for (const PositionLogprobs& lp : d.logprobs) out.logprobs[d.id.value].push_back(lp.sampled.logprob);
      if (d.finished()) out.usage[d.id.value] = d.usage;
    }
  }
  return out;
}

TEST(EngineContextShift, GoesFarPastTheContextWithFiniteLogprobsInEveryDtype) {
  auto m = load_or_die(shared_path("models/stories260K.gguf"));
  ASSERT_TRUE(m);
  for (KvDtype t : {KvDtype::kF32, KvDtype::kF16, KvDtype::kInt8, KvDtype::kFp8E4m3,
                    KvDtype::kInt4}) {
    auto e = Engine::create(*m, nullptr, shift_config(t));
    ASSERT_TRUE(e.ok()) << e.status().message();
    GenerateRequest r = seeded_request(3, 20, 5000);
    r.logprobs = 0;
    const Outcome out = run(**e, {r});
    ASSERT_EQ(out.tokens.at(1).size(), 5000u) << kv::kv_dtype_name(t);
    ASSERT_EQ(out.logprobs.at(1).size(), 5000u);
    for (float lp : out.logprobs.at(1)) ASSERT_TRUE(std::isfinite(lp) && lp <= 0) << lp;
    const EngineStats s = (*e)->stats();
    EXPECT_GT(s.context_shifts, 250);  // one block of 16 each time: (5020 - 128) / 16
    EXPECT_EQ(out.usage.at(1).dropped_tokens, s.context_dropped_tokens);
    EXPECT_EQ(out.usage.at(1).completion_tokens, 5000);
    EXPECT_LE(out.max_kv_used, 128 / 16 + 1);  // the window, plus one block while it shifts
  }
}

TEST(EngineContextShift, AShiftedRequestIsBatchInvariant) {
  auto m = load_or_die(shared_path("models/stories260K.gguf"));
  ASSERT_TRUE(m);
  // f32 KV: the engine's batch invariance holds bit for bit there (EngineBatch.*).
  auto alone = Engine::create(*m, nullptr, shift_config(KvDtype::kF32));
  auto batched = Engine::create(*m, nullptr, shift_config(KvDtype::kF32));
  ASSERT_TRUE(alone.ok() && batched.ok());
  const GenerateRequest target = seeded_request(11, 40, 400);
  const Outcome a = run(**alone, {target});
  GenerateRequest par = seeded_request(12, 30, 300);
  par.n = 2;
  par.sampling.temperature = 0.8f;
  const Outcome b = run(**batched, {seeded_request(13, 90, 200), target, par,
                                seeded_request(14, 5, 350)});
  const auto& x = b.tokens.at(2);
  const auto& y = a.tokens.at(1);
  size_t i = 0;
  while (i < x.size() && i < y.size() && x[i] == y[i]) ++i;
  EXPECT_EQ(i, y.size()) << "first difference at output " << i;
  EXPECT_EQ(x, y);  // the same tokens whatever shares its steps
  EXPECT_GT(b.usage.at(2).dropped_tokens, 0);
}

TEST(EngineContextShift, SpeculativeDecodingShiftsTheSameTokens) {
  auto m = load_or_die(shared_path("models/stories260K.gguf"));
  ASSERT_TRUE(m);
  // Greedy stories260K loops over a long generation: drafts are found and accepted while the
  // window shifts under them (drafts never pass the window).
  const std::vector<GenerateRequest> reqs = {seeded_request(21, 30, 600), seeded_request(22, 60, 500)};
  auto plain = Engine::create(*m, nullptr, shift_config(KvDtype::kF32));
  EngineConfig c = shift_config(KvDtype::kF32);
  c.spec_mode = SpecMode::kNgram;
  auto spec = Engine::create(*m, nullptr, c);
  ASSERT_TRUE(plain.ok() && spec.ok());
  const Outcome a = run(**plain, reqs);
  const Outcome b = run(**spec, reqs);
  EXPECT_EQ(b.tokens, a.tokens);
  const EngineStats s = (*spec)->stats();
  EXPECT_GT(s.context_shifts, 20);
  EXPECT_GT(s.spec_accepted_tokens, 0);
  // A draft model (the model itself): drafts until a request's first shift, then none.
  c.spec_mode = SpecMode::kDraft;
  c.draft_model = m.get();
  auto drafted = Engine::create(*m, nullptr, c);
  ASSERT_TRUE(drafted.ok()) << drafted.status().message();
  const Outcome d = run(**drafted, reqs);
  EXPECT_EQ(d.tokens, a.tokens);
  EXPECT_GT((*drafted)->stats().context_shifts, 20);
  EXPECT_GT((*drafted)->stats().spec_accepted_tokens, 0);
}

std::unique_ptr<LoadedModel> synth_model(const std::string& preset) {
  return testing::synth_model(preset, "shift");
}

GenerateRequest small_vocab_request(uint64_t seed, int32_t prompt_len, int32_t max_new) {
  GenerateRequest r = seeded_request(seed, prompt_len, max_new);
  for (size_t i = 1; i < r.prompt_token_ids.size(); ++i) r.prompt_token_ids[i] %= 300;
  r.logprobs = 0;
  return r;
}

// Gemma 2 / 3 (tiny shapes: local layers of window 16): the global layers shift as a dense model
// does, the local layers drop the same logical blocks (most were released behind their window
// already) and rotate their queries with their own RoPE base; every position stays below the
// 128-token context for 2000 generated tokens, the log-probabilities stay finite, and a shifted
// request's tokens do not depend on the batch (f32 KV).
TEST(EngineContextShift, SlidingWindowModelsShiftTheirGlobalLayers) {
  for (const char* preset : {"tiny-gemma3", "tiny-gemma2"}) {
    auto m = synth_model(preset);
    ASSERT_TRUE(m);
    auto e = Engine::create(*m, nullptr, shift_config(KvDtype::kF32));
    ASSERT_TRUE(e.ok()) << preset << ": " << e.status().message();
    const Outcome out = run(**e, {small_vocab_request(3, 20, 2000)});
    ASSERT_EQ(out.tokens.at(1).size(), 2000u) << preset;
    ASSERT_EQ(out.logprobs.at(1).size(), 2000u);
    for (float lp : out.logprobs.at(1)) ASSERT_TRUE(std::isfinite(lp) && lp <= 0) << preset;
    const EngineStats s = (*e)->stats();
    EXPECT_GT(s.context_shifts, 100) << preset;
    EXPECT_LT(s.max_position, 128) << preset << ": a position at or past the window";
    // Every group holds at most the window (+ one block while shifting); local groups less.
    const int32_t groups = static_cast<int32_t>((*e)->kv_spec().num_groups());
    EXPECT_GE(groups, 2) << preset;
    EXPECT_LE(out.max_kv_used, groups * (128 / 16 + 1)) << preset;

    auto alone = Engine::create(*m, nullptr, shift_config(KvDtype::kF32));
    auto batched = Engine::create(*m, nullptr, shift_config(KvDtype::kF32));
    ASSERT_TRUE(alone.ok() && batched.ok());
    const GenerateRequest target = small_vocab_request(11, 40, 300);
    const Outcome a = run(**alone, {target});
    const Outcome b = run(**batched, {small_vocab_request(13, 90, 200), target,
                                      small_vocab_request(14, 5, 250)});
    EXPECT_EQ(b.tokens.at(2), a.tokens.at(1)) << preset << ": batch-dependent after a shift";
    EXPECT_GT(b.usage.at(2).dropped_tokens, 0);

  }
}

// The query rotation of a shifted block uses the RoPE of the group's layers (tiny-gemma3's local
// layers have base 1e4, its global one 1e6). With every layer made local (window 16), a query
// after a shift sees only its last 16 tokens, all written at the same offset, so the shifted run
// computes the same function as a run that never shifts: the log-probabilities of the same
// forced text agree (a wrong base for the rotation would move them far apart).
TEST(EngineContextShift, LocalLayersRotateWithTheirOwnRope) {
  auto m = synth_model("tiny-gemma3");
  ASSERT_TRUE(m);
  std::fill(m->config.layer_local.begin(), m->config.layer_local.end(), 1);
  GenerateRequest r = small_vocab_request(21, 20, 400);
  std::mt19937 rng(5);
  for (int i = 0; i < 400; ++i) r.forced_tokens.push_back(static_cast<int32_t>(3 + rng() % 300));
  auto shifted = Engine::create(*m, nullptr, shift_config(KvDtype::kF32));
  EngineConfig c = testing::small_f32_engine_config(1, 8 << 20);
  c.max_model_len = 512;
  auto plain = Engine::create(*m, nullptr, c);
  ASSERT_TRUE(shifted.ok() && plain.ok());
  const Outcome a = run(**shifted, {r});
  const Outcome b = run(**plain, {r});
  EXPECT_GT((*shifted)->stats().context_shifts, 10);
  EXPECT_EQ((*plain)->stats().context_shifts, 0);
  ASSERT_EQ(a.logprobs.at(1).size(), 400u);
  ASSERT_EQ(b.logprobs.at(1).size(), 400u);
  double worst = 0;
  for (size_t i = 0; i < 400; ++i)
    worst = std::max(worst, std::abs(double{a.logprobs.at(1)[i]} - b.logprobs.at(1)[i]));
  EXPECT_LT(worst, 2e-3) << "the shifted run's log-probabilities differ from the plain run's";
}

TEST(EngineContextShift, RefusesWhatCannotShift) {
  auto m = load_or_die(shared_path("models/stories260K.gguf"));
  ASSERT_TRUE(m);
  EngineConfig c = shift_config(KvDtype::kF16, 32);  // 2 blocks: no room past the sink
  auto e = Engine::create(*m, nullptr, c);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("at least 48 tokens"), std::string::npos)
      << e.status().message();
  auto ok = Engine::create(*m, nullptr, shift_config(KvDtype::kF16));
  ASSERT_TRUE(ok.ok());
  const auto long_prompt = (*ok)->add_request(seeded_request(1, 128, 10));
  ASSERT_FALSE(long_prompt.ok());
  EXPECT_NE(long_prompt.status().message().find("does not fit the context"), std::string::npos);
  EXPECT_TRUE((*ok)->add_request(seeded_request(1, 100, 1000)).ok());  // output may go past
}

TEST(EngineContextShift, DropsWholeTurnsWhereTheRequestSaysTheyStart) {
  auto m = load_or_die(shared_path("models/stories260K.gguf"));
  ASSERT_TRUE(m);
  // 100 + 30 tokens in a 128-token window: one shift. Without turns (or with one inside the
  // fewest blocks) it drops block 1; with the next turn starting at 50 (block 3), blocks 1 and
  // 2: the turn keeps its header, block 3 a tail of the turn before.
  for (const auto& [starts, dropped] : std::vector<std::pair<std::vector<int32_t>, int32_t>>{
           {{}, 16}, {{20}, 16}, {{20, 50, 90}, 32}}) {
    auto e = Engine::create(*m, nullptr, shift_config(KvDtype::kF32));
    ASSERT_TRUE(e.ok());
    GenerateRequest r = seeded_request(5, 100, 30);
    r.turn_starts = starts;
    const Outcome out = run(**e, {r});
    EXPECT_EQ(out.usage.at(1).completion_tokens, 30);
    EXPECT_EQ(out.usage.at(1).dropped_tokens, dropped) << starts.size();
    EXPECT_EQ((*e)->stats().context_shifts, 1);
  }
  auto e = Engine::create(*m, nullptr, shift_config(KvDtype::kF32));
  GenerateRequest bad = seeded_request(5, 100, 30);
  bad.turn_starts = {40, 30};
  EXPECT_FALSE((*e)->add_request(bad).ok());
}

}  // namespace
}  // namespace hinge
