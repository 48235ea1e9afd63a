// The engine with its layers in several KV groups (EngineConfig::kv_groups): every group holds
// its own blocks for every position, attention of a layer reads its group's tables, the prefix
// cache hits only what every group holds. Every group is full attention, so the outputs must be
// those of one group, bit for bit, through prefix hits, parallel samples (copy-on-write) and
// preemption, and the blocks used must be the groups' count times one group's.
#include <gtest/gtest.h>

#include <map>
#include <vector>

#include "hinge/engine.h"
#include "model_test_util.h"

namespace hinge {
namespace {

using testing::load_or_die;
using testing::shared_path;

struct Outcome {
  std::map<std::pair<uint64_t, int32_t>, std::vector<int32_t>> tokens;
  std::vector<int32_t> cached;  // usage.cached_tokens per request, in submission order
  EngineStats stats;
};

// 10 requests: pairs sharing a 40-token prefix (the second hits it), one with 3 samples at
// temperature 1 whose prompt ends inside a block (copy-on-write), mixed lengths.
std::vector<GenerateRequest> workload() {
  std::vector<GenerateRequest> reqs;
  for (int i = 0; i < 10; ++i) {
    GenerateRequest r = testing::seeded_request(100 + i / 2, 40, 12 + 3 * i);
    if (i % 2 == 1) {
      const GenerateRequest tail = testing::seeded_request(500 + i, 1 + 7 * i, 1);
      r.prompt_token_ids.insert(r.prompt_token_ids.end(), tail.prompt_token_ids.begin() + 1,
                                tail.prompt_token_ids.end());
    }
    if (i == 4) {
      r.n = 3;
      r.sampling.temperature = 1.0f;
      r.sampling.top_p = 0.9f;
    }
    reqs.push_back(std::move(r));
  }
  return reqs;
}

Outcome run(const LoadedModel& m, EngineConfig c, const std::vector<GenerateRequest>& reqs,
        bool one_by_one) {
  Outcome out;
  auto made = Engine::create(m, nullptr, c);
  EXPECT_TRUE(made.ok()) << made.status().message();
  if (!made.ok()) return out;
  Engine& e = **made;
  std::vector<RequestId> ids;
  std::map<uint64_t, int32_t> cached;
  std::vector<RequestDelta> deltas;
  auto drain = [&] {
    while (e.has_unfinished()) {
      EXPECT_TRUE(e.step(&deltas).ok());
      for (const RequestDelta& d : deltas) {
        auto& t = out.tokens[{d.id.value, d.index}];
        t.insert(t.end(), d.token_ids.begin(), d.token_ids.end());
        if (d.index == 0) cached[d.id.value] = d.usage.cached_tokens;
      }
    }
  };
  for (const GenerateRequest& r : reqs) {
    ids.push_back(e.add_request(r).value());
    if (one_by_one) drain();
  }
  drain();
  for (RequestId id : ids) out.cached.push_back(cached[id.value]);
  out.stats = e.stats();
  return out;
}

EngineConfig config(int32_t groups, KvDtype dtype = KvDtype::kF32) {
  EngineConfig c = testing::small_f32_engine_config(2, 16 << 20);
  c.k_dtype = c.v_dtype = dtype;
  c.kv_groups = groups;
  return c;
}

TEST(EngineKvGroups, OutputsEqualOneGroupsWithPrefixHitsAndSamples) {
  auto m = load_or_die(shared_path("models/stories260K.gguf"));  // 5 layers
  ASSERT_TRUE(m);
  const auto reqs = workload();
  for (KvDtype dt : {KvDtype::kF32, KvDtype::kInt8}) {
    const Outcome one = run(*m, config(1, dt), reqs, true);
    ASSERT_EQ(one.tokens.size(), 12u);  // 9 requests + 3 samples
    // Requests sharing a prefix hit it (2 blocks of 16 of the 40 tokens).
    EXPECT_EQ(one.cached[1], 32);
    EXPECT_EQ(one.cached[0], 0);
    for (int32_t groups : {2, 3, 5}) {
      const Outcome g = run(*m, config(groups, dt), reqs, true);
      EXPECT_EQ(g.tokens, one.tokens) << groups << " groups, " << kv::kv_dtype_name(dt);
      EXPECT_EQ(g.cached, one.cached) << groups << " groups";
      EXPECT_EQ(g.stats.prompt_tokens_computed, one.stats.prompt_tokens_computed);
      // Each group holds one block per block of one group's layout.
      EXPECT_EQ(g.stats.kv_blocks_peak, groups * one.stats.kv_blocks_peak) << groups;
      EXPECT_EQ(g.stats.kv.num_cow_copies, groups * one.stats.kv.num_cow_copies) << groups;
      EXPECT_NE(g.stats.kv_fingerprint, one.stats.kv_fingerprint);  // another block layout
    }
  }
}

TEST(EngineKvGroups, AllAtOnceWithPreemptionEqualsOneByOne) {
  auto m = load_or_die(shared_path("models/stories260K.gguf"));
  ASSERT_TRUE(m);
  const auto reqs = workload();
  const Outcome alone = run(*m, config(1), reqs, true);
  // Two groups on a cache of 2 x 12 blocks: the largest request needs 2 x 7, so requests are
  // preempted, recomputed, and re-hit their prefixes.
  EngineConfig tight = config(2);
  tight.kv_memory_bytes = 24 * alone.stats.kv_bytes_per_block * 3 / 5;  // 24 blocks of 3 layers
  const Outcome g = run(*m, tight, reqs, false);
  EXPECT_EQ(g.stats.kv_blocks_total, 24);
  EXPECT_GT(g.stats.preemptions, 0);
  EXPECT_EQ(g.tokens, alone.tokens);
}

TEST(EngineKvGroups, MoreGroupsThanLayersIsAnError) {
  auto m = load_or_die(shared_path("models/stories260K.gguf"));
  ASSERT_TRUE(m);
  auto e = Engine::create(*m, nullptr, config(6));
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().message(), "--kv-groups 6 exceeds the model's 5 layers");
  EXPECT_FALSE(Engine::create(*m, nullptr, config(0)).ok());
}

}  // namespace
}  // namespace hinge
