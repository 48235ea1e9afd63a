// Memory pressure on a real engine: withheld KV pages really leave RSS, outputs are unchanged
// after the limit is lifted, and the engine thread sheds load by level (503 while critical,
// capped max_tokens while elevated) without losing a running request.
#include <gtest/gtest.h>

#include <condition_variable>
#include <mutex>

#include "server/engine_thread.h"
#include "common/resident_memory.h"
#include "engine/memory_budget.h"
#include "model_test_util.h"

namespace hinge {
namespace {

using pressure::PressureLevel;
using testing::load_or_die;
using testing::run_all;
using testing::seeded_request;
using testing::shared_path;

TEST(EnginePressure, WithheldKvPagesLeaveRssAndOutputsStayTheSame) {
  auto m = load_or_die(shared_path("models/stories260K.gguf"));
  ASSERT_TRUE(m);
  EngineConfig c = testing::small_f32_engine_config(1, 64 << 20);
  c.max_batched_tokens = 256;
  auto made = Engine::create(*m, nullptr, c);
  ASSERT_TRUE(made.ok()) << made.status().message();
  Engine& e = **made;
  std::vector<GenerateRequest> reqs;
  for (int i = 0; i < 24; ++i) reqs.push_back(seeded_request(700 + i, 400, 24));
  const auto first = run_all(e, reqs);  // touches ~24 x 424 tokens of KV pages, then caches them
  const EngineStats before = e.stats();
  const int64_t touched = int64_t{before.kv_blocks_peak} * before.kv_bytes_per_block;
  ASSERT_GT(touched, 8 << 20) << "the test needs megabytes of KV to measure";
  EXPECT_GT(before.kv.pool.num_cached_free_blocks, 0);

  const int64_t rss0 = process_resident_bytes();
  const int64_t shrunk = e.shrink_kv_cache();  // evicts the cache, returns every free page
  e.set_kv_block_limit(0);
  const int64_t rss1 = process_resident_bytes();
  const EngineStats s = e.stats();
  EXPECT_EQ(s.kv.pool.num_cached_free_blocks, 0);
  EXPECT_EQ(s.kv_blocks_withheld, s.kv_blocks_total);
  EXPECT_EQ(s.kv_blocks_limit, 0);
  EXPECT_EQ(s.kv_blocks_used, 0);
  EXPECT_GT(shrunk, touched / 2);
  EXPECT_LT(rss1, rss0 - touched / 2) << "RSS " << rss0 << " -> " << rss1 << ", KV touched "
                                      << touched;
  EXPECT_GE(s.kv_bytes_released, touched / 2);

  // Lifted: the same requests give the same tokens (the released pages are written again).
  e.set_kv_block_limit(s.kv_blocks_total);
  EXPECT_EQ(e.stats().kv_blocks_withheld, 0);
  EXPECT_EQ(run_all(e, reqs), first);
}

TEST(EnginePressure, ALimitBelowUsageWaitsForBlocksToBeFreed) {
  auto m = load_or_die(shared_path("models/stories260K.gguf"));
  ASSERT_TRUE(m);
  auto made = Engine::create(*m, nullptr, testing::small_f32_engine_config(1, 4 << 20));
  ASSERT_TRUE(made.ok());
  Engine& e = **made;
  ASSERT_TRUE(e.add_request(seeded_request(1, 100, 40)).ok());
  std::vector<RequestDelta> deltas;
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(e.step(&deltas).ok());
  const int32_t used = e.stats().kv_blocks_used;
  ASSERT_GT(used, 0);
  e.set_kv_block_limit(0);  // only the free blocks go now
  EXPECT_EQ(e.stats().kv_blocks_withheld, e.stats().kv_blocks_total - used);
  EXPECT_EQ(e.stats().kv_blocks_used, used);
  // The request cannot grow past its last block: it is preempted, not lost...
  e.set_kv_block_limit(used + 2);
  while (e.has_unfinished()) ASSERT_TRUE(e.step(&deltas).ok());
  // ...and once it finished its blocks are withheld too, down to the limit.
  EXPECT_EQ(e.stats().kv_blocks_used, 0);
  EXPECT_EQ(e.stats().kv_blocks_withheld, e.stats().kv_blocks_total - used - 2);
}

struct Result {
  std::mutex mu;
  std::condition_variable cv;
  std::optional<SubmitResult> result;
  std::vector<int32_t> tokens;
  FinishReason reason = FinishReason::kNone;
  bool wait_final() {
    std::unique_lock lock(mu);
    return cv.wait_for(lock, std::chrono::seconds(60), [&] {
      return (result && !result->accepted()) || reason != FinishReason::kNone;
    });
  }
  bool wait_tokens(size_t n) {
    std::unique_lock lock(mu);
    return cv.wait_for(lock, std::chrono::seconds(60), [&] { return tokens.size() >= n; });
  }
};

SubmitTicket submit(EngineThread& et, GenerateRequest r, Result* out) {
  return et.enqueue(
      std::move(r), {},
      [out](const SubmitResult& s) {
        std::lock_guard lock(out->mu);
        out->result = s;
        out->cv.notify_all();
      },
      [out](const RequestDelta& d) {
        std::lock_guard lock(out->mu);
        out->tokens.insert(out->tokens.end(), d.token_ids.begin(), d.token_ids.end());
        if (d.finished()) out->reason = d.finish_reason;
        out->cv.notify_all();
      });
}

TEST(EnginePressure, EngineThreadPausesAdmissionWhileCriticalAndCapsWhileElevated) {
  auto m = load_or_die(shared_path("models/stories260K.gguf"));
  ASSERT_TRUE(m);
  auto made = Engine::create(*m, nullptr, testing::small_f32_engine_config(1, 16 << 20));
  ASSERT_TRUE(made.ok());
  PressurePolicyConfig pp;
  pp.max_tokens = 20;
  EngineThread et(std::move(made).value(), sched::AdmissionConfig{}, pp);

  Result running;
  submit(et, seeded_request(5, 30, 600), &running);
  ASSERT_TRUE(running.wait_tokens(5));
  et.set_pressure(PressureLevel::kCritical, "test: injected");
  Result refused;
  submit(et, seeded_request(6, 30, 50), &refused);
  ASSERT_TRUE(refused.wait_final());
  EXPECT_EQ(refused.result->kind, SubmitResult::Kind::kPressure);
  EXPECT_GT(refused.result->retry_after_s, 0);
  // The running request is not touched: it completes all 600 tokens.
  ASSERT_TRUE(running.wait_final());
  EXPECT_EQ(running.reason, FinishReason::kLength);
  EXPECT_EQ(running.tokens.size(), 600u);
  EXPECT_TRUE(et.wait_idle(30));
  EngineThreadStats s = et.stats();
  EXPECT_EQ(s.pressure.level, PressureLevel::kCritical);
  EXPECT_EQ(s.pressure.rejected, 1);
  EXPECT_EQ(s.pressure.transitions[2], 1);
  EXPECT_EQ(s.engine.kv_blocks_withheld, s.engine.kv_blocks_total);  // nothing running now

  et.set_pressure(PressureLevel::kElevated, "test: injected");
  Result capped;
  submit(et, seeded_request(7, 30, 200), &capped);
  ASSERT_TRUE(capped.wait_final());
  EXPECT_TRUE(capped.result->accepted());
  EXPECT_EQ(capped.tokens.size(), 20u);  // max_tokens lowered to 20
  EXPECT_EQ(capped.reason, FinishReason::kLength);
  EXPECT_TRUE(et.wait_idle(30));
  s = et.stats();
  EXPECT_EQ(s.pressure.capped, 1);
  EXPECT_EQ(s.engine.kv_blocks_limit, s.engine.kv_blocks_total / 2);
  EXPECT_EQ(s.engine.max_num_seqs_now, 32);

  et.set_pressure(PressureLevel::kNormal, "");
  Result normal;
  submit(et, seeded_request(8, 30, 200), &normal);
  ASSERT_TRUE(normal.wait_final());
  EXPECT_EQ(normal.tokens.size(), 200u);
  EXPECT_TRUE(et.wait_idle(30));
  s = et.stats();
  EXPECT_EQ(s.engine.kv_blocks_withheld, 0);
  EXPECT_EQ(s.engine.kv_blocks_limit, s.engine.kv_blocks_total);
  EXPECT_EQ(s.pressure.transitions[0], 1);
  et.stop();
}

}  // namespace
}  // namespace hinge
