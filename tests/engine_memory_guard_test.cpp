// The memory budget held while running (kv/kv_memory_guard.h): the limit the budget leaves,
// RSS that follows use after a burst, a process that grows beside the engine (the KV cache
// gives way: evictions and preemption, no growth, outputs unchanged), and the context lowered
// to what the budget's arena holds.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "common/resident_memory.h"
#include "engine/memory_budget.h"
#include "kv/kv_memory_guard.h"
#include "model_test_util.h"

namespace hinge {
namespace {

using testing::load_or_die;
using testing::run_all;
using testing::seeded_request;
using testing::shared_path;

constexpr int64_t MiB = int64_t{1} << 20;

TEST(KvMemoryGuard, TheLimitIsWhatTheBudgetLeavesBesideTheRest) {
  const int64_t budget = 100 * MiB, margin = budget_margin_bytes(budget);
  EXPECT_EQ(margin, 2 * MiB);
  // The rest (RSS - KV) is 40 MiB: 58 MiB for KV, 58 blocks of 1 MiB, at most the total.
  EXPECT_EQ(budget_kv_limit_blocks(budget, 60 * MiB, 20 * MiB, MiB, 1000), 58);
  EXPECT_EQ(budget_kv_limit_blocks(budget, 60 * MiB, 20 * MiB, MiB, 30), 30);
  // The rest alone over the budget: nothing.
  EXPECT_EQ(budget_kv_limit_blocks(budget, 120 * MiB, 10 * MiB, MiB, 1000), 0);
  // Partial blocks round down.
  EXPECT_EQ(budget_kv_limit_blocks(budget, 40 * MiB, 0, 3 * MiB, 1000), 19);
}

// The engine's budget: what the test process holds now plus `extra` (ASan's shadow memory and
// the test binary's own state are part of RSS, so an absolute figure would not fit both).
EngineConfig budget_config(int64_t extra) {
  EngineConfig c = testing::small_f32_engine_config(1, 0);
  c.max_batched_tokens = 256;
  c.max_num_seqs = 16;
  c.memory_budget_bytes = process_resident_bytes() + extra;
  c.memory_budget_source = "test";
  return c;
}

TEST(EngineMemoryGuard, RssFollowsUseAfterABurst) {
  auto m = load_or_die(shared_path("models/stories260K.gguf"));
  ASSERT_TRUE(m);
  EngineConfig c = budget_config(96 * MiB);
  c.kv_low_watermark_bytes = 2 * MiB;
  auto made = Engine::create(*m, nullptr, c);
  ASSERT_TRUE(made.ok()) << made.status().message();
  Engine& e = **made;
  std::vector<GenerateRequest> reqs;
  for (int i = 0; i < 16; ++i) reqs.push_back(seeded_request(900 + i, 900, 32));
  int64_t kv_peak = 0;
  const auto first = run_all(e, reqs, [&] { kv_peak = std::max(kv_peak, e.stats().kv_resident_bytes); });
  const EngineStats s = e.stats();
  ASSERT_GT(kv_peak, 12 * MiB) << "the burst must fill megabytes of KV";
  // Idle: everything free beyond the watermark went back (page rounding aside).
  EXPECT_LE(s.kv_resident_bytes, c.kv_low_watermark_bytes + 2 * s.kv_bytes_per_block + MiB)
      << "KV resident after the burst; peak " << kv_peak;
  EXPECT_GT(s.kv_trimmed_bytes, kv_peak / 2);
  EXPECT_LE(s.rss_peak_bytes, c.memory_budget_bytes);
  // The same requests again give the same tokens (trimmed cache entries were dropped, not
  // served as zeros).
  EXPECT_EQ(run_all(e, reqs), first);
}

TEST(EngineMemoryGuard, AGrowingProcessShrinksTheCacheAndPreemptsInsteadOfGrowing) {
  auto m = load_or_die(shared_path("models/stories260K.gguf"));
  ASSERT_TRUE(m);
  std::vector<GenerateRequest> reqs;
  for (int i = 0; i < 12; ++i) reqs.push_back(seeded_request(500 + i, 700, 300));
  std::vector<std::vector<int32_t>> unbounded;
  {
    auto free_engine = Engine::create(*m, nullptr, testing::small_f32_engine_config(1, 64 * MiB));
    ASSERT_TRUE(free_engine.ok());
    unbounded = run_all(**free_engine, reqs);
  }
  EngineConfig c = budget_config(80 * MiB);
  auto made = Engine::create(*m, nullptr, c);
  ASSERT_TRUE(made.ok()) << made.status().message();
  Engine& e = **made;
  // Once the prompts are in, the process grows by 64 MiB beside the engine (touched, so
  // resident): the 15 MiB of KV the requests need no longer fit.
  std::vector<uint8_t> ballast;
  int steps = 0;
  int64_t worst_over = INT64_MIN;
  const auto out = run_all(e, reqs, [&] {
    if (++steps == 50) {
      ballast.resize(static_cast<size_t>(64 * MiB));
      std::memset(ballast.data(), 1, ballast.size());
    }
    if (e.stats().memory_budget_limited > 0)  // the guard has read the ballast
      worst_over = std::max(worst_over, process_resident_bytes() - c.memory_budget_bytes);
  });
  const EngineStats s = e.stats();
  EXPECT_EQ(out, unbounded) << "preemption recomputes; the tokens are the same";
  EXPECT_GT(s.memory_budget_limited, 0);
  EXPECT_LT(s.memory_budget_kv_limit_blocks, s.kv_blocks_total);
  EXPECT_GT(s.preemptions + s.kv.pool.num_evictions, 0);
  EXPECT_LE(worst_over, 0) << "RSS went over the budget after the process grew";
}

// The rest of the process alone grows past the budget: the limit falls to nothing, yet one
// request always goes on (the limit gives way by what it holds plus a step, counted) instead of
// being preempted and re-admitted forever; the others wait and then run one at a time.
TEST(EngineMemoryGuard, OneRequestGoesOnWhenTheBudgetLeavesNothing) {
  auto m = load_or_die(shared_path("models/stories260K.gguf"));
  ASSERT_TRUE(m);
  EngineConfig c = budget_config(40 * MiB);
  auto made = Engine::create(*m, nullptr, c);
  ASSERT_TRUE(made.ok()) << made.status().message();
  Engine& e = **made;
  std::vector<uint8_t> ballast(static_cast<size_t>(64 * MiB));
  std::memset(ballast.data(), 1, ballast.size());
  std::vector<GenerateRequest> reqs;
  for (int i = 0; i < 3; ++i) reqs.push_back(seeded_request(40 + i, 200, 300));
  int steps = 0;
  const auto out = run_all(e, reqs, [&] { ASSERT_LT(++steps, 20000) << "no progress"; });
  for (const auto& o : out) EXPECT_EQ(o.size(), 300u);
  const EngineStats s = e.stats();
  EXPECT_EQ(s.memory_budget_kv_limit_blocks, 0);
  EXPECT_GT(s.memory_budget_overshoots, 0);
}

TEST(EngineMemoryGuard, TheContextIsWhatTheBudgetsArenaHolds) {
  auto m = load_or_die(shared_path("models/stories260K.gguf"));
  ASSERT_TRUE(m);
  EngineConfig c = budget_config(200 * MiB);
  c.max_num_seqs = 1;
  c.max_model_len = 512;
  // The arena the budget gives, capped by --kv-memory at 8 blocks of 16 tokens.
  const int64_t block = 16 * 5 * 2 * 4 * 8 * 4;  // bs x layers x K,V x kv heads x head dim x f32
  c.kv_memory_bytes = 8 * block;
  auto made = Engine::create(*m, nullptr, c);
  ASSERT_TRUE(made.ok()) << made.status().message();
  Engine& e = **made;
  const int64_t tokens = e.stats().kv_blocks_total * 16;
  ASSERT_LT(tokens, 512);
  EXPECT_LE(e.max_model_len(), tokens + 1);  // the last token sampled is never computed
  EXPECT_GT(e.max_model_len(), tokens - 16);
  EXPECT_NE(e.memory_breakdown().find("context lowered from 512"), std::string::npos)
      << e.memory_breakdown();
  // A request that fills it finishes; one past it is refused with the context.
  GenerateRequest r = seeded_request(7, 10, e.max_model_len() - 10);
  const auto out = run_all(e, {r});
  EXPECT_EQ(static_cast<int32_t>(out[0].size()), e.max_model_len() - 10);
  r.max_new_tokens += 1;
  EXPECT_FALSE(e.add_request(r).ok());
}

}  // namespace
}  // namespace hinge
