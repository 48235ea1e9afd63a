// A failed step (the forward pass returns an error; issue 13, first trap): the requests that
// step scheduled finish with kError and free their KV, the others go on, and the engine keeps
// serving — the next request gets the same tokens as on a fresh engine. Once through Engine,
// once through EngineThread (the server's loop). Failures come from the engine's test hook
// fail_next_steps_for_testing.
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <random>
#include <thread>

#include "server/engine_thread.h"
#include "hinge/engine.h"
#include "model_test_util.h"

namespace hinge {
namespace {

using testing::load_or_die;
using testing::shared_path;

EngineConfig config() {
  EngineConfig c = testing::small_f32_engine_config();
  c.max_num_seqs = 16;
  return c;
}

GenerateRequest request(uint64_t seed, int32_t prompt_len, int32_t max_new, int32_t n = 1) {
  GenerateRequest r = testing::seeded_request(seed, prompt_len, max_new);
  r.n = n;
  r.sampling.temperature = n > 1 ? 1.0f : 0.0f;
  return r;
}

struct Result {
  std::vector<int32_t> tokens;
  FinishReason reason = FinishReason::kNone;
  int finals = 0;
};
using Results = std::map<std::pair<uint64_t, int32_t>, Result>;
std::pair<uint64_t, int32_t> key(RequestId id, int32_t index) { return {id.value, index}; }

void collect(const std::vector<RequestDelta>& deltas, Results* res) {
  for (const RequestDelta& d : deltas) {
    Result& r = (*res)[{d.id.value, d.index}];
    EXPECT_EQ(r.finals, 0) << "delta after the final one";
    r.tokens.insert(r.tokens.end(), d.token_ids.begin(), d.token_ids.end());
    if (d.finished()) {
      r.reason = d.finish_reason;
      ++r.finals;
    }
  }
}

void drain(Engine& e, Results* res) {
  std::vector<RequestDelta> deltas;
  for (int guard = 0; e.has_unfinished() && guard < 10000; ++guard) {
    const Status st = e.step(&deltas);
    EXPECT_TRUE(st.ok()) << st.message();
    collect(deltas, res);
  }
  EXPECT_FALSE(e.has_unfinished());
}

// The tokens of `r` on a fresh engine, alone.
std::vector<int32_t> fresh_tokens(const LoadedModel& m, const GenerateRequest& r) {
  auto e = std::move(Engine::create(m, nullptr, config())).value();
  const RequestId id = e->add_request(r).value();
  Results res;
  drain(*e, &res);
  return res[key(id, 0)].tokens;
}

TEST(EngineFailedStep, FinishesTheScheduledRequestsWithErrorAndKeepsServing) {
  auto m = load_or_die(shared_path("models/stories260K.gguf"));
  ASSERT_TRUE(m);
  auto e = std::move(Engine::create(*m, nullptr, config())).value();
  const GenerateRequest ra = request(1, 9, 20);
  const GenerateRequest rb = request(2, 63, 6);  // with a's decode token: the whole budget
  const GenerateRequest rc = request(3, 30, 7);  // still waiting in the failed step
  const RequestId a = e->add_request(ra).value();
  Results res;
  std::vector<RequestDelta> deltas;
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(e->step(&deltas).ok());
    collect(deltas, &res);
  }
  ASSERT_EQ(res[key(a, 0)].tokens.size(), 3u);
  const RequestId b = e->add_request(rb).value();
  const RequestId c = e->add_request(rc).value();

  e->fail_next_steps_for_testing(1);
  const Status st = e->step(&deltas);  // schedules a (decode) and b (prefill); c does not fit
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("forward"), std::string::npos) << st.message();
  collect(deltas, &res);
  ASSERT_EQ(deltas.size(), 2u);
  for (const RequestDelta& d : deltas) {
    EXPECT_TRUE(d.id == a || d.id == b) << d.id.value;
    EXPECT_EQ(d.finish_reason, FinishReason::kError);
    EXPECT_TRUE(d.token_ids.empty());
  }
  EXPECT_EQ(res[key(a, 0)].tokens.size(), 3u);
  EXPECT_STREQ(sched::finish_reason_name(FinishReason::kError), "error");
  EngineStats s = e->stats();
  EXPECT_EQ(s.running, 0);
  EXPECT_EQ(s.waiting, 1);  // c
  EXPECT_EQ(s.kv_blocks_used, 0);
  EXPECT_TRUE(e->has_unfinished());

  // c was not in the failed step: it runs to the end. A new request after the failure gets the
  // tokens a fresh engine gives it.
  // b's prompt again: the full blocks the failed step registered (blocks are cached when
  // scheduled) held no KV, so they must not be hits.
  const RequestId d = e->add_request(ra).value();
  const RequestId b2 = e->add_request(rb).value();
  drain(*e, &res);
  EXPECT_EQ(res[key(b2, 0)].reason, FinishReason::kLength);
  EXPECT_EQ(res[key(b2, 0)].tokens, fresh_tokens(*m, rb));
  EXPECT_EQ(res[key(c, 0)].reason, FinishReason::kLength);
  EXPECT_EQ(res[key(c, 0)].tokens, fresh_tokens(*m, rc));
  EXPECT_EQ(res[key(d, 0)].reason, FinishReason::kLength);
  EXPECT_EQ(res[key(d, 0)].tokens, fresh_tokens(*m, ra));
  for (const auto& [key, r] : res) EXPECT_EQ(r.finals, 1) << key.first << "/" << key.second;
  s = e->stats();
  EXPECT_EQ(s.kv_blocks_used, 0);
  EXPECT_FALSE(e->abort(a));  // finished
}

TEST(EngineFailedStep, FailedPrefillOfParallelSamplesFinishesEverySample) {
  auto m = load_or_die(shared_path("models/stories260K.gguf"));
  ASSERT_TRUE(m);
  auto e = std::move(Engine::create(*m, nullptr, config())).value();
  // Its prompt takes two steps: the second one, which would fork it, fails.
  const RequestId a = e->add_request(request(4, 100, 5, /*n=*/3)).value();
  std::vector<RequestDelta> deltas;
  ASSERT_TRUE(e->step(&deltas).ok());
  EXPECT_TRUE(deltas.empty());
  e->fail_next_steps_for_testing(2);  // the two next steps with work
  EXPECT_FALSE(e->step(&deltas).ok());
  Results res;
  collect(deltas, &res);
  ASSERT_EQ(res.size(), 3u);
  for (int32_t i = 0; i < 3; ++i) EXPECT_EQ((res[key(a, i)].reason), FinishReason::kError) << i;
  EXPECT_FALSE(e->has_unfinished());
  EXPECT_EQ(e->stats().kv_blocks_used, 0);

  // The second injected failure hits the next request; the one after it is served.
  const RequestId b = e->add_request(request(5, 12, 4)).value();
  EXPECT_FALSE(e->step(&deltas).ok());
  ASSERT_EQ(deltas.size(), 1u);
  EXPECT_EQ(deltas[0].id, b);
  EXPECT_EQ(deltas[0].finish_reason, FinishReason::kError);
  const GenerateRequest rc = request(6, 12, 4);
  const RequestId c = e->add_request(rc).value();
  res.clear();
  drain(*e, &res);
  EXPECT_EQ(res[key(c, 0)].tokens, fresh_tokens(*m, rc));
  EXPECT_EQ(e->stats().kv_blocks_used, 0);
}

struct Stream {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<int32_t> tokens;
  FinishReason reason = FinishReason::kNone;
  int finals = 0;
  EngineThread::Sink sink() {
    return [this](const RequestDelta& d) {
      std::lock_guard lock(mu);
      tokens.insert(tokens.end(), d.token_ids.begin(), d.token_ids.end());
      if (d.finished()) {
        reason = d.finish_reason;
        ++finals;
        cv.notify_all();
      }
    };
  }
  bool wait_final(double seconds = 20) {
    std::unique_lock lock(mu);
    return cv.wait_for(lock, std::chrono::duration<double>(seconds), [&] { return finals > 0; });
  }
};

TEST(EngineFailedStep, EngineThreadDeliversTheErrorAndServesTheNextRequest) {
  auto m = load_or_die(shared_path("models/stories260K.gguf"));
  ASSERT_TRUE(m);
  auto engine = std::move(Engine::create(*m, nullptr, config())).value();
  Engine* raw = engine.get();
  EngineThread et(std::move(engine));
  raw->fail_next_steps_for_testing(1);
  Stream a, b;
  ASSERT_TRUE(et.submit(request(7, 20, 50), a.sink()).ok());
  ASSERT_TRUE(a.wait_final());
  const GenerateRequest rb = request(8, 15, 9);
  ASSERT_TRUE(et.submit(rb, b.sink()).ok());
  ASSERT_TRUE(b.wait_final());
  {
    std::lock_guard lock(a.mu);
    EXPECT_EQ(a.reason, FinishReason::kError);
    EXPECT_TRUE(a.tokens.empty());
  }
  {
    std::lock_guard lock(b.mu);
    EXPECT_EQ(b.reason, FinishReason::kLength);
    EXPECT_EQ(b.tokens, fresh_tokens(*m, rb));
  }
  EXPECT_TRUE(et.wait_idle(10));
  EXPECT_EQ(et.num_active(), 0);
  et.stop();
  EXPECT_EQ(a.finals, 1);
  EXPECT_EQ(b.finals, 1);
}

}  // namespace
}  // namespace hinge
