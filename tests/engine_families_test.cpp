// The engine on every model family (issue 15, acceptance 3 and 4): what llama passes in
// engine_test.cpp — 16 concurrent requests equal each run alone and the contiguous reference
// path, a repeated prompt hits the prefix cache with identical outputs, a tight KV budget
// preempts and still gives identical outputs — on `hinge synth --preset tiny-<family>` files
// (f32). The sliding-window families (gemma2/3: window 16) run prompts and generations many
// windows long, so the masked attention runs over chunked prefill, decode, prefix hits and
// recomputation after preemption.
#include <gtest/gtest.h>

#include <map>
#include <random>

#include "common/thread_pool.h"
#include "hinge/engine.h"
#include "model/synth.h"
#include "model_test_util.h"

namespace hinge {
namespace {

const char* const kPresets[] = {"tiny-llama",  "tiny-qwen2",   "tiny-qwen3",
                                "tiny-gemma2", "tiny-gemma3",  "tiny-phi3",
                                "tiny-granite", "tiny-olmo2",  "tiny-mistral3"};

std::unique_ptr<LoadedModel> synth_model(const std::string& preset) {
  return testing::synth_model(preset, "engine");
}

using Results = std::map<uint64_t, std::vector<int32_t>>;

Results drain(Engine& e, int64_t* preemptions = nullptr) {
  Results res;
  std::vector<RequestDelta> deltas;
  for (int guard = 0; e.has_unfinished() && guard < 100000; ++guard) {
    EXPECT_TRUE(e.step(&deltas).ok());
    for (const RequestDelta& d : deltas)
      res[d.id.value].insert(res[d.id.value].end(), d.token_ids.begin(), d.token_ids.end());
  }
  EXPECT_FALSE(e.has_unfinished());
  if (preemptions) *preemptions = e.stats().preemptions;
  return res;
}

GenerateRequest request(std::vector<int32_t> prompt, int32_t max_new) {
  GenerateRequest r;
  r.prompt_token_ids = std::move(prompt);
  r.max_new_tokens = max_new;
  r.sampling.temperature = 0;
  r.sampling.ignore_eos = true;
  return r;
}

std::vector<GenerateRequest> requests(int32_t n_vocab) {
  std::mt19937_64 rng(5);
  std::uniform_int_distribution<int32_t> pick(3, n_vocab - 1);
  std::vector<GenerateRequest> out;
  for (int i = 0; i < 16; ++i) {
    std::vector<int32_t> p{1};
    while (static_cast<int>(p.size()) < 1 + 11 * i % 90) p.push_back(pick(rng));
    out.push_back(request(std::move(p), 8 + (i * 7) % 33));
  }
  return out;
}

std::unique_ptr<Engine> engine(const LoadedModel& m, int64_t kv_bytes = 64 << 20,
                               SpecMode spec = SpecMode::kNone,
                               const LoadedModel* draft = nullptr) {
  EngineConfig c = testing::small_f32_engine_config(1, kv_bytes);  // ctest runs 2 at once on 2 cores
  c.max_num_seqs = 32;
  c.spec_mode = spec;
  c.draft_model = draft;
  auto e = Engine::create(m, nullptr, c);
  EXPECT_TRUE(e.ok()) << e.status().message();
  return e.ok() ? std::move(e).value() : nullptr;
}

class EngineFamilies : public ::testing::TestWithParam<const char*> {};

TEST_P(EngineFamilies, ConcurrentEqualAloneAndTheReferencePath) {
  auto m = synth_model(GetParam());
  ASSERT_TRUE(m);
  const auto reqs = requests(static_cast<int32_t>(m->config.n_vocab));
  std::vector<std::vector<int32_t>> alone;
  for (const auto& r : reqs) {
    auto e = engine(*m);
    ASSERT_TRUE(e);
    ASSERT_TRUE(e->add_request(r).ok());
    auto res = drain(*e);
    ASSERT_EQ(res.size(), 1u);
    alone.push_back(res.begin()->second);
    ASSERT_EQ(static_cast<int32_t>(alone.back().size()), r.max_new_tokens);
    EXPECT_EQ(alone.back(), testing::greedy(*m, r.prompt_token_ids, r.max_new_tokens));
  }
  auto e = engine(*m);
  ASSERT_TRUE(e);
  std::vector<RequestId> ids;
  for (const auto& r : reqs) ids.push_back(e->add_request(r).value());
  auto res = drain(*e);
  for (size_t i = 0; i < reqs.size(); ++i) EXPECT_EQ(res.at(ids[i].value), alone[i]) << "request " << i;
}

TEST_P(EngineFamilies, PrefixHitsAndPreemptionKeepOutputs) {
  auto m = synth_model(GetParam());
  ASSERT_TRUE(m);
  const auto reqs = requests(static_cast<int32_t>(m->config.n_vocab));
  // A 90-token prompt twice: the second computes only its last partial block.
  auto e = engine(*m);
  ASSERT_TRUE(e);
  const GenerateRequest& long_req = reqs[15];
  const auto first = e->add_request(long_req).value();
  auto r1 = drain(*e);
  const int64_t computed = e->stats().prompt_tokens_computed;
  const auto second = e->add_request(long_req).value();
  auto r2 = drain(*e);
  EXPECT_EQ(r2.at(second.value), r1.at(first.value));
  EXPECT_LT(e->stats().prompt_tokens_computed - computed, 16);
  // All 16 under a KV budget too small for them at once: preemptions, same outputs.
  Results want;
  {
    auto big = engine(*m);
    std::vector<RequestId> ids;
    for (const auto& r : reqs) ids.push_back(big->add_request(r).value());
    auto res = drain(*big);
    for (size_t i = 0; i < ids.size(); ++i) want[i] = res.at(ids[i].value);
  }
  const int64_t per_token = m->config.kv_bytes_per_token(4);
  auto tight = engine(*m, per_token * 16 * 24);
  ASSERT_TRUE(tight);
  std::vector<RequestId> ids;
  for (const auto& r : reqs) ids.push_back(tight->add_request(r).value());
  int64_t preemptions = 0;
  auto res = drain(*tight, &preemptions);
  EXPECT_GT(preemptions, 0);
  for (size_t i = 0; i < ids.size(); ++i) EXPECT_EQ(res.at(ids[i].value), want[i]) << "request " << i;
}

// Speculative decoding (prompt lookup): prompts that repeat a phrase, generations long enough
// to repeat themselves (random weights loop), in a batch and under a KV budget that preempts:
// the same tokens as without drafts, with drafts verified (sliding-window groups included).
TEST_P(EngineFamilies, SpeculativeDecodingKeepsOutputs) {
  auto m = synth_model(GetParam());
  ASSERT_TRUE(m);
  std::mt19937_64 rng(9);
  std::uniform_int_distribution<int32_t> pick(3, static_cast<int32_t>(m->config.n_vocab) - 1);
  std::vector<GenerateRequest> reqs;
  for (int i = 0; i < 8; ++i) {
    std::vector<int32_t> phrase;
    for (int j = 0; j < 5 + i; ++j) phrase.push_back(pick(rng));
    std::vector<int32_t> p{1};
    for (int rep = 0; rep < 3; ++rep) p.insert(p.end(), phrase.begin(), phrase.end());
    reqs.push_back(request(std::move(p), 40));
  }
  auto run = [&](int64_t kv_bytes, SpecMode spec, EngineStats* stats) {
    auto e = engine(*m, kv_bytes, spec);
    std::vector<RequestId> ids;
    for (const auto& r : reqs) ids.push_back(e->add_request(r).value());
    auto res = drain(*e);
    *stats = e->stats();
    std::vector<std::vector<int32_t>> out;
    for (RequestId id : ids) out.push_back(res.at(id.value));
    return out;
  };
  EngineStats plain, spec, tight;
  const auto want = run(64 << 20, SpecMode::kNone, &plain);
  EXPECT_EQ(run(64 << 20, SpecMode::kNgram, &spec), want);
  EXPECT_GT(spec.spec_verifications, 0);
  const int64_t per_token = m->config.kv_bytes_per_token(4);
  EXPECT_EQ(run(per_token * 16 * 12, SpecMode::kNgram, &tight), want);
  EXPECT_GT(tight.preemptions, 0);
  EXPECT_GT(tight.spec_verifications, 0);
}

// Speculative decoding with a draft model: the model drafting for itself (drafts accepted) and
// another seed's weights of the same shape (drafts rejected, their KV rolled back in both
// caches), in a batch and under a KV budget that preempts: the same tokens as without drafts.
TEST_P(EngineFamilies, DraftModelSpeculationKeepsOutputs) {
  auto m = synth_model(GetParam());
  ASSERT_TRUE(m);
  const std::string other_path = testing::temp_dir() + "/" + GetParam() + ".seed12.gguf";
  {
    ThreadPool pool(2);
    ASSERT_TRUE(write_synth_model(*find_synth_preset(GetParam()), GgmlType::F32, 12, other_path,
                                  pool).ok());
  }
  auto other = testing::load_or_die(other_path);
  ASSERT_TRUE(other);
  const auto reqs = requests(static_cast<int32_t>(m->config.n_vocab));
  auto run = [&](int64_t kv_bytes, const LoadedModel* draft, EngineStats* stats) {
    auto e = engine(*m, kv_bytes, draft ? SpecMode::kDraft : SpecMode::kNone, draft);
    std::vector<RequestId> ids;
    for (const auto& r : reqs) ids.push_back(e->add_request(r).value());
    auto res = drain(*e);
    *stats = e->stats();
    std::vector<std::vector<int32_t>> out;
    for (RequestId id : ids) out.push_back(res.at(id.value));
    return out;
  };
  EngineStats plain, self, foreign, tight;
  const auto want = run(64 << 20, nullptr, &plain);
  EXPECT_EQ(run(64 << 20, m.get(), &self), want);
  EXPECT_GT(self.spec_accepted_tokens, self.spec_draft_tokens / 2);
  EXPECT_EQ(run(64 << 20, other.get(), &foreign), want);
  EXPECT_GT(foreign.spec_verifications, 0);
  EXPECT_LT(foreign.spec_accepted_tokens, foreign.spec_draft_tokens);
  const int64_t per_token = m->config.kv_bytes_per_token(4);
  EXPECT_EQ(run(per_token * 16 * 12, m.get(), &tight), want);
  EXPECT_GT(tight.preemptions, 0);
  EXPECT_GT(tight.spec_verifications, 0);
}

// Sliding-window families: the engine gives local layers groups of their own and releases
// their blocks behind the window. One long request (prompt and generation many windows long)
// holds, after every step, no more than the full-attention groups' blocks plus
// ceil((window - 1) / block) + 1 blocks per local group, and its tokens equal the reference
// path's, which keeps every position.
TEST(EngineWindows, LocalGroupsHoldTheirWindowAndOutputsEqualTheReference) {
  for (const char* preset : {"tiny-gemma2", "tiny-gemma3"}) {
    auto m = synth_model(preset);
    ASSERT_TRUE(m);
    auto e = engine(*m);
    ASSERT_TRUE(e);
    const kv::KvSpec& spec = e->kv_spec();
    int32_t local_groups = 0;
    for (const kv::KvGroup& g : spec.groups) local_groups += g.window > 0;
    EXPECT_GT(local_groups, 0) << preset;
    const GenerateRequest r = requests(static_cast<int32_t>(m->config.n_vocab))[15];  // 90 tokens
    GenerateRequest req = r;
    req.max_new_tokens = 120;
    ASSERT_TRUE(e->add_request(req).ok());
    const int32_t bs = spec.block_size_tokens;
    std::vector<int32_t> got;
    std::vector<RequestDelta> deltas;
    int32_t max_used = 0;
    while (e->has_unfinished()) {
      ASSERT_TRUE(e->step(&deltas).ok());
      for (const RequestDelta& d : deltas) got.insert(got.end(), d.token_ids.begin(), d.token_ids.end());
      const int64_t n = static_cast<int64_t>(req.prompt_token_ids.size() + got.size());
      int64_t bound = 0;
      for (const kv::KvGroup& g : spec.groups) {
        const int64_t all = (n + bs - 1) / bs;
        bound += g.window == 0 ? all : std::min<int64_t>(all, (g.window - 1 + bs - 1) / bs + 1);
      }
      if (e->has_unfinished()) {
        EXPECT_LE(e->stats().kv_blocks_used, bound) << preset << " at " << n << " tokens";
      }
      max_used = std::max(max_used, e->stats().kv_blocks_used);
    }
    EXPECT_GT(e->stats().kv.num_window_released_blocks, 0) << preset;
    EXPECT_EQ(got, testing::greedy(*m, req.prompt_token_ids, req.max_new_tokens)) << preset;
    RecordProperty(std::string(preset) + "_max_blocks_used", std::to_string(max_used));
  }
}

INSTANTIATE_TEST_SUITE_P(Families, EngineFamilies, ::testing::ValuesIn(kPresets),
                         testing::param_name);

}  // namespace
}  // namespace hinge
