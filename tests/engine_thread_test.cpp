// EngineThread: many threads submitting to one engine thread get the same tokens as the engine
// run directly; abort from another thread ends a stream; stop() finishes every open stream.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <random>
#include <thread>
#include <type_traits>

#include "server/engine_thread.h"
#include "model_test_util.h"

namespace hinge {
namespace {

using testing::load_or_die;
using testing::shared_path;

EngineConfig config() { return testing::small_f32_engine_config(); }

GenerateRequest request(int i, int32_t max_new) {
  GenerateRequest r;
  std::mt19937_64 rng(100 + i);
  r.prompt_token_ids = {1};
  for (int k = 0; k < 5 + 7 * i % 40; ++k) r.prompt_token_ids.push_back(3 + rng() % 500);
  r.max_new_tokens = max_new;
  r.sampling.temperature = 0;
  r.sampling.ignore_eos = true;
  return r;
}

// One request's deltas as the engine thread delivers them; tests wait on its condition
// variable (no sleep-polling).
struct Stream {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<int32_t> tokens;
  FinishReason reason = FinishReason::kNone;
  int finals = 0;

  void add(const RequestDelta& d) {
    {
      std::lock_guard lock(mu);
      tokens.insert(tokens.end(), d.token_ids.begin(), d.token_ids.end());
      if (d.finished()) {
        reason = d.finish_reason;
        ++finals;
      }
    }
    cv.notify_all();
  }
  // Until the final delta came (false after `timeout`).
  bool wait_final(std::chrono::seconds timeout = std::chrono::seconds(30)) {
    std::unique_lock lock(mu);
    return cv.wait_for(lock, timeout, [&] { return finals > 0; });
  }
  // Until a first token or the final delta came.
  bool wait_started(std::chrono::seconds timeout = std::chrono::seconds(30)) {
    std::unique_lock lock(mu);
    return cv.wait_for(lock, timeout, [&] { return !tokens.empty() || finals > 0; });
  }
};

TEST(EngineThread, ConcurrentSubmittersGetTheDirectEngineTokens) {
  auto m = load_or_die(shared_path("models/stories260K.gguf"));
  ASSERT_TRUE(m);
  constexpr int kRequests = 12;
  // Reference: each request alone through the contiguous path.
  std::vector<std::vector<int32_t>> expect;
  for (int i = 0; i < kRequests; ++i) {
    const auto r = request(i, 10 + i);
    expect.push_back(testing::greedy(*m, r.prompt_token_ids, r.max_new_tokens));
  }
  auto engine = Engine::create(*m, nullptr, config());
  ASSERT_TRUE(engine.ok());
  EngineThread et(std::move(engine).value());
  std::vector<Stream> streams(kRequests);
  std::vector<std::thread> clients;
  for (int i = 0; i < kRequests; ++i) {
    clients.emplace_back([&, i] {
      auto id = et.submit(request(i, 10 + i),
                          [&s = streams[i]](const RequestDelta& d) { s.add(d); });
      EXPECT_TRUE(id.ok());
    });
  }
  for (auto& t : clients) t.join();
  for (Stream& s : streams) ASSERT_TRUE(s.wait_final());
  // The final delta goes out just before the request leaves the active set and the step's
  // stats are published: wait for both.
  EXPECT_TRUE(et.wait_idle(10));
  EXPECT_EQ(et.num_active(), 0);
  for (int i = 0; i < kRequests; ++i) {
    std::lock_guard lock(streams[i].mu);
    EXPECT_EQ(streams[i].tokens, expect[i]) << "request " << i;
    EXPECT_EQ(streams[i].reason, FinishReason::kLength);
    EXPECT_EQ(streams[i].finals, 1);
  }
  const EngineStats s = et.stats().engine;
  EXPECT_EQ(s.running, 0);
  EXPECT_GT(s.steps, 0);
}

TEST(EngineThread, RejectsBadRequestsAbortsAndStops) {
  auto m = load_or_die(shared_path("models/stories260K.gguf"));
  ASSERT_TRUE(m);
  auto engine = Engine::create(*m, nullptr, config());
  ASSERT_TRUE(engine.ok());
  EngineThread et(std::move(engine).value());
  auto sink = [](const RequestDelta&) {};
  EXPECT_FALSE(et.submit(request(0, 0), sink).ok());  // max_new_tokens 0
  EXPECT_FALSE(et.submit(request(0, 4), nullptr).ok());

  Stream a, b;
  auto collect = [](Stream& s) {
    return [&s](const RequestDelta& d) { s.add(d); };
  };
  auto ida = et.submit(request(1, 1500), collect(a));
  ASSERT_TRUE(ida.ok());
  et.cancel(*ida);
  auto idb = et.submit(request(2, 1500), collect(b));
  ASSERT_TRUE(idb.ok());
  ASSERT_TRUE(a.wait_final());
  {
    std::lock_guard lock(a.mu);
    EXPECT_EQ(a.reason, FinishReason::kAborted);
    EXPECT_LT(a.tokens.size(), 1500u);
  }
  et.stop();  // b is still running: it gets a final aborted delta
  {
    std::lock_guard lock(b.mu);
    EXPECT_EQ(b.finals, 1);
    EXPECT_EQ(b.reason, FinishReason::kAborted);
  }
  EXPECT_FALSE(et.submit(request(3, 4), sink).ok());
  et.stop();  // idempotent
}

// Tickets (EngineThread) and request ids (the engine, carried by deltas) are two id spaces: a
// refused submit takes a ticket but no engine id, so after one they disagree. They are distinct
// types: a delta's id cannot be passed to cancel() (it used to be accepted and cancelled the
// request whose ticket had that value, here the other one).
static_assert(!std::is_convertible_v<RequestId, SubmitTicket>);
static_assert(!std::is_convertible_v<SubmitTicket, RequestId>);
static_assert(!std::is_invocable_v<decltype(&EngineThread::cancel), EngineThread&, RequestId>);
static_assert(std::is_invocable_v<decltype(&EngineThread::cancel), EngineThread&, SubmitTicket>);
static_assert(!std::is_invocable_v<decltype(&EngineThread::cancel_sample), EngineThread&,
                                   RequestId, int32_t>);

TEST(EngineThread, CancelAfterARefusedSubmitHitsTheRightRequest) {
  auto m = load_or_die(shared_path("models/stories260K.gguf"));
  ASSERT_TRUE(m);
  auto engine = Engine::create(*m, nullptr, config());
  ASSERT_TRUE(engine.ok());
  EngineThread et(std::move(engine).value());
  EXPECT_FALSE(et.submit(request(0, 0), [](const RequestDelta&) {}).ok());  // refused
  Stream a, b;
  std::atomic<uint64_t> b_id{0};
  auto collect = [](Stream& s, std::atomic<uint64_t>* id) {
    return [&s, id](const RequestDelta& d) {
      if (id) id->store(d.id.value);
      s.add(d);
    };
  };
  auto ta = et.submit(request(1, 1500), collect(a, nullptr));
  auto tb = et.submit(request(2, 1500), collect(b, &b_id));
  ASSERT_TRUE(ta.ok() && tb.ok());
  ASSERT_TRUE(b.wait_started());
  ASSERT_NE(b_id.load(), 0u);
  EXPECT_NE(b_id.load(), tb->value);  // the spaces differ: ticket 3, engine id 2
  et.cancel(*tb);
  ASSERT_TRUE(b.wait_final());
  {
    std::lock_guard lock(b.mu);
    EXPECT_EQ(b.reason, FinishReason::kAborted);
    EXPECT_LT(b.tokens.size(), 1500u);
  }
  {
    std::lock_guard lock(a.mu);
    EXPECT_EQ(a.finals, 0) << "cancelled the other request";
  }
  et.stop();
}

}  // namespace
}  // namespace hinge
