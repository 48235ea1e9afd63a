// Scheduler scenarios: exact step-by-step schedules ("id:first+num_new", '*' = samples),
// block tables, preemption victims, prefix hits; scheduler + KV invariants after every step.
#include "sched/scheduler.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "sched_test_util.h"

namespace hinge::sched {
namespace {

using namespace test;  // NOLINT(build/namespaces): the shared scheduler test helpers

constexpr int32_t kTokenBase = 1000;

// schedule(); check invariants; sample kTokenBase + position for each sampling entry; update();
// check invariants. Returns the output (the last one stays in *last when given).
inline std::string step(Scheduler& s, SchedulerOutput* last = nullptr) {
  SchedulerOutput out = s.schedule();
  EXPECT_TRUE(s.check_invariants().ok()) << s.check_invariants().message();
  std::vector<SampledToken> sampled;
  for (const ScheduledRequest& r : out.scheduled)
    if (r.samples) sampled.push_back({r.id, kTokenBase + r.end_position()});
  s.update(out, sampled);
  EXPECT_TRUE(s.check_invariants().ok()) << s.check_invariants().message();
  std::string d = describe(out);
  if (last != nullptr) *last = std::move(out);
  return d;
}

void add(Scheduler& s, uint64_t id, std::vector<int32_t> prompt, int32_t max_new,
         Priority priority = Priority::kInteractive) {
  const Status st = s.add_request(
      RequestId(id),
      RequestParams{.prompt_token_ids = std::move(prompt), .max_new_tokens = max_new,
                    .priority = priority, .cache_scope = kv::CacheNamespace(7)});
  ASSERT_TRUE(st.ok()) << st.message();
}

// The fake model's output for a request alone: kTokenBase + position of each new token.
std::vector<int32_t> expected_output(int32_t num_prompt, int32_t max_new) {
  return iota_tokens(kTokenBase + num_prompt, max_new);
}

TEST(SchedScheduler, SingleRequestChunkedPrefillThenDecode) {
  Scheduler s(config(/*budget=*/8, 4, /*bs=*/4, /*blocks=*/16));
  add(s, 1, iota_tokens(0, 20), 3);
  SchedulerOutput out;
  EXPECT_EQ(step(s, &out), "1:0+8");
  EXPECT_EQ(blocks_of(out.block_table(out.scheduled[0])), block_ids({0, 1}));
  EXPECT_EQ(vec(out.token_ids(out.scheduled[0])), iota_tokens(0, 8));
  EXPECT_EQ(vec(out.slot_mapping(out.scheduled[0])), (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(out.num_scheduled_tokens, 8);
  EXPECT_EQ(step(s, &out), "1:8+8");
  EXPECT_EQ(blocks_of(out.block_table(out.scheduled[0])), block_ids({0, 1, 2, 3}));
  EXPECT_EQ(step(s, &out), "1:16+4*");
  EXPECT_EQ(blocks_of(out.block_table(out.scheduled[0])), block_ids({0, 1, 2, 3, 4}));
  EXPECT_EQ(out.num_scheduled_tokens, 4);
  EXPECT_EQ(s.find(RequestId(1))->num_tokens(), 21);
  EXPECT_EQ(s.find(RequestId(1))->num_computed_tokens(), 20);
  EXPECT_EQ(step(s, &out), "1:20+1*");  // decode: the sampled token is computed next step
  EXPECT_EQ(vec(out.token_ids(out.scheduled[0])), std::vector<int32_t>{1020});
  EXPECT_EQ(blocks_of(out.block_table(out.scheduled[0])), block_ids({0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(vec(out.slot_mapping(out.scheduled[0])), std::vector<int64_t>{20});
  EXPECT_EQ(step(s, &out), "1:21+1*");
  EXPECT_FALSE(s.has_unfinished());
  EXPECT_EQ(s.kv().stats().num_requests, 0);
  EXPECT_EQ(s.kv().pool().num_free_blocks(), 16);
  EXPECT_EQ(step(s), "fin 1");
  EXPECT_EQ(step(s), "");

  std::vector<Request> done = s.take_finished();
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].finish_reason(), FinishReason::kLength);
  EXPECT_EQ(done[0].status(), RequestStatus::kFinished);
  EXPECT_EQ(vec(done[0].output_token_ids()), expected_output(20, 3));
  EXPECT_EQ(done[0].num_cached_tokens(), 0);
  EXPECT_TRUE(s.take_finished().empty());
  EXPECT_EQ(s.stats().num_steps, 7);
  EXPECT_EQ(s.stats().num_scheduled_tokens, 22);
  EXPECT_EQ(s.stats().num_preemptions, 0);
}

TEST(SchedScheduler, ContinuousBatchingJoinAndLeave) {
  Scheduler s(config(/*budget=*/16, 8, /*bs=*/4, /*blocks=*/32));
  add(s, 1, iota_tokens(0, 10), 3);
  EXPECT_EQ(step(s), "1:0+10*");
  add(s, 2, iota_tokens(100, 6), 2);
  EXPECT_EQ(step(s), "1:10+1* 2:0+6*");
  add(s, 3, iota_tokens(200, 20), 1);
  EXPECT_EQ(step(s), "1:11+1* 2:6+1* 3:0+14");  // 3 gets what is left of the budget
  EXPECT_EQ(s.running(), std::vector<RequestId>{RequestId(3)});
  add(s, 4, iota_tokens(300, 3), 2);
  EXPECT_EQ(step(s), "3:14+6* 4:0+3* fin 1 2");
  EXPECT_EQ(step(s), "4:3+1* fin 3");
  EXPECT_EQ(step(s), "fin 4");
  std::vector<Request> done = s.take_finished();
  ASSERT_EQ(done.size(), 4u);
  const int32_t prompts[] = {10, 6, 20, 3};
  const int32_t max_new[] = {3, 2, 1, 2};
  const uint64_t order[] = {1, 2, 3, 4};
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(done[i].id().value, order[i]);
    EXPECT_EQ(vec(done[i].output_token_ids()), expected_output(prompts[i], max_new[i]));
  }
}

TEST(SchedScheduler, MaxNumSeqsLimitsTheRunningBatch) {
  Scheduler s(config(/*budget=*/100, /*max_seqs=*/2, 4, 32));
  add(s, 1, iota_tokens(0, 4), 2);
  add(s, 2, iota_tokens(10, 4), 2);
  add(s, 3, iota_tokens(20, 4), 2);
  EXPECT_EQ(step(s), "1:0+4* 2:0+4*");
  EXPECT_EQ(s.waiting(), std::vector<RequestId>{RequestId(3)});
  EXPECT_EQ(s.find(RequestId(3))->status(), RequestStatus::kWaiting);
  EXPECT_EQ(step(s), "1:4+1* 2:4+1*");
  EXPECT_EQ(step(s), "3:0+4* fin 1 2");
  EXPECT_EQ(step(s), "3:4+1*");
  EXPECT_EQ(step(s), "fin 3");
}

TEST(SchedScheduler, WaitingQueueIsPriorityThenArrival) {
  Scheduler s(config(100, /*max_seqs=*/1, 4, 32));
  add(s, 1, iota_tokens(0, 4), 1, Priority::kBatch);
  add(s, 2, iota_tokens(10, 4), 1, Priority::kBatch);
  add(s, 3, iota_tokens(20, 4), 1, Priority::kInteractive);
  add(s, 4, iota_tokens(30, 4), 1, Priority::kInteractive);
  EXPECT_EQ(step(s), "3:0+4*");
  EXPECT_EQ(step(s), "4:0+4* fin 3");
  EXPECT_EQ(step(s), "1:0+4* fin 4");
  EXPECT_EQ(step(s), "2:0+4* fin 1");
  EXPECT_EQ(step(s), "fin 2");
}

TEST(SchedScheduler, PrefixHitComputesOnlyTheTail) {
  Scheduler s(config(/*budget=*/256, 8, /*bs=*/16, /*blocks=*/32));
  add(s, 1, iota_tokens(0, 100), 2);
  SchedulerOutput out;
  EXPECT_EQ(step(s, &out), "1:0+100*");
  EXPECT_EQ(blocks_of(out.block_table(out.scheduled[0])), block_ids({0, 1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(s.find(RequestId(1))->num_cached_tokens(), 0);
  add(s, 2, iota_tokens(0, 100), 2);  // same prompt, same namespace
  EXPECT_EQ(step(s, &out), "1:100+1* 2:96+4*");
  EXPECT_EQ(blocks_of(out.block_table(out.scheduled[1])), block_ids({0, 1, 2, 3, 4, 5, 7}));
  EXPECT_EQ(vec(out.token_ids(out.scheduled[1])), iota_tokens(96, 4));
  EXPECT_EQ(vec(out.slot_mapping(out.scheduled[1])), (std::vector<int64_t>{7 * 16, 7 * 16 + 1,
                                                                 7 * 16 + 2, 7 * 16 + 3}));
  EXPECT_EQ(out.num_scheduled_tokens, 5);
  EXPECT_EQ(s.kv().pool().ref_count(kv::BlockId(0)), 1);  // 1 finished and released its ref
  EXPECT_EQ(step(s), "2:100+1* fin 1");
  std::vector<Request> done = s.take_finished();
  ASSERT_EQ(done.size(), 2u);
  EXPECT_EQ(done[0].id(), RequestId(1));
  EXPECT_EQ(done[1].id(), RequestId(2));
  EXPECT_EQ(done[1].num_cached_tokens(), 96);
  EXPECT_EQ(vec(done[1].output_token_ids()), expected_output(100, 2));
  EXPECT_EQ(s.kv().stats().num_prefix_hit_tokens, 96);
}

TEST(SchedScheduler, PrefixHitSharesBlocksWhileBothRun) {
  Scheduler s(config(256, 8, 16, 32));
  add(s, 1, iota_tokens(0, 100), 4);
  EXPECT_EQ(step(s), "1:0+100*");
  add(s, 2, iota_tokens(0, 100), 4);
  EXPECT_EQ(step(s), "1:100+1* 2:96+4*");
  for (int32_t b = 0; b < 6; ++b) EXPECT_EQ(s.kv().pool().ref_count(kv::BlockId(b)), 2);
  EXPECT_EQ(s.kv().pool().ref_count(kv::BlockId(6)), 1);
  EXPECT_EQ(s.find(RequestId(2))->num_cached_tokens(), 96);
}

// Issue 13, trap 4: blocks are cached when scheduled, so a burst of one prompt admitted in one
// step computes its full blocks once (they used to be cached in update(), after the step).
TEST(SchedScheduler, IdenticalPromptsAdmittedTogetherComputeThePrefixOnce) {
  Scheduler s(config(/*budget=*/1024, 8, /*bs=*/16, /*blocks=*/64));
  for (uint64_t id = 1; id <= 8; ++id) add(s, id, iota_tokens(0, 100), 2);
  SchedulerOutput out;
  EXPECT_EQ(step(s, &out), "1:0+100* 2:96+4* 3:96+4* 4:96+4* 5:96+4* 6:96+4* 7:96+4* 8:96+4*");
  EXPECT_EQ(out.num_scheduled_tokens, 100 + 7 * 4);
  for (int32_t b = 0; b < 6; ++b) EXPECT_EQ(s.kv().pool().ref_count(kv::BlockId(b)), 8);
  for (uint64_t id = 2; id <= 8; ++id) EXPECT_EQ(s.find(RequestId(id))->num_cached_tokens(), 96);
}

TEST(SchedScheduler, PrefixCacheDisabledComputesEverything) {
  Scheduler s(config(256, 8, 16, 32, /*prefix_cache=*/false));
  add(s, 1, iota_tokens(0, 100), 2);
  EXPECT_EQ(step(s), "1:0+100*");
  add(s, 2, iota_tokens(0, 100), 1);
  EXPECT_EQ(step(s), "1:100+1* 2:0+100*");
  EXPECT_EQ(s.take_finished()[1].num_cached_tokens(), 0);
}

// Pool of 6 blocks of 4 tokens. Running order is (priority, arrival): 1, 3, then batch 2.
TEST(SchedScheduler, PreemptionVictimIsLowestPriorityThenLatestArrival) {
  Scheduler s(config(/*budget=*/64, 8, /*bs=*/4, /*blocks=*/6));
  add(s, 1, iota_tokens(0, 8), 6, Priority::kInteractive);
  add(s, 2, iota_tokens(100, 4), 6, Priority::kBatch);
  add(s, 3, iota_tokens(200, 4), 6, Priority::kInteractive);
  EXPECT_EQ(step(s), "1:0+8* 3:0+4* 2:0+4*");  // blocks 0-1, 2, 3; 4 and 5 free
  // 1 and 3 take blocks 4 and 5; 2 finds none and, being the lowest priority (batch), is the
  // victim although it arrived before 3.
  EXPECT_EQ(step(s), "1:8+1* 3:4+1* pre 2");
  EXPECT_EQ(s.find(RequestId(2))->status(), RequestStatus::kPreempted);
  EXPECT_EQ(s.find(RequestId(2))->num_computed_tokens(), 0);
  EXPECT_EQ(s.waiting(), std::vector<RequestId>{RequestId(2)});
  EXPECT_EQ(s.kv().pool().num_free_blocks(), 1);  // 2's cached block 3, revivable
  // 2 would need its cached block 3 plus one more: it does not fit, it waits.
  EXPECT_EQ(step(s), "1:9+1* 3:5+1*");
  EXPECT_EQ(step(s), "1:10+1* 3:6+1*");
  EXPECT_EQ(step(s), "1:11+1* 3:7+1*");
  // 1 needs a 4th block (evicting 2's cached block 3); 3 then finds none and, among equal
  // priorities, is the latest arrival: it preempts itself. 1 reaches max_new_tokens.
  EXPECT_EQ(step(s), "1:12+1* pre 3");
  EXPECT_EQ(s.find(RequestId(3))->num_tokens(), 9);  // 4 prompt + 5 output, recomputed
  // 3 (interactive) resumes first and hits its own 2 cached blocks; 2 lost its block to eviction.
  EXPECT_EQ(step(s), "3:8+1* 2:0+5* fin 1");
  EXPECT_EQ(step(s), "2:5+1* fin 3");
  EXPECT_EQ(step(s), "2:6+1*");
  EXPECT_EQ(step(s), "2:7+1*");
  EXPECT_EQ(step(s), "2:8+1*");
  EXPECT_FALSE(s.has_unfinished());
  EXPECT_EQ(step(s), "fin 2");
  EXPECT_EQ(s.stats().num_preemptions, 2);
  EXPECT_EQ(s.kv().pool().num_free_blocks(), 6);

  std::vector<Request> done = s.take_finished();
  ASSERT_EQ(done.size(), 3u);
  const uint64_t order[] = {1, 3, 2};
  const int32_t prompts[] = {8, 4, 4};
  const int32_t preemptions[] = {0, 1, 1};
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(done[i].id().value, order[i]);
    EXPECT_EQ(done[i].finish_reason(), FinishReason::kLength);
    EXPECT_EQ(done[i].num_preemptions(), preemptions[i]);
    EXPECT_EQ(done[i].num_tokens(), prompts[i] + 6);  // unchanged by preemption
    EXPECT_EQ(vec(done[i].output_token_ids()), expected_output(prompts[i], 6));
    EXPECT_EQ(done[i].num_cached_tokens(), 0);  // usage counts the first admission only
  }
}

TEST(SchedScheduler, AbortFreesBlocks) {
  Scheduler s(config(/*budget=*/8, 8, /*bs=*/4, /*blocks=*/16));
  add(s, 1, iota_tokens(0, 12), 4);
  add(s, 2, iota_tokens(50, 6), 4);
  add(s, 3, iota_tokens(90, 4), 4);
  EXPECT_EQ(step(s), "1:0+8");
  EXPECT_EQ(s.kv().pool().num_free_blocks(), 14);
  EXPECT_TRUE(s.abort_request(RequestId(1)));  // running, mid-prefill
  EXPECT_FALSE(s.abort_request(RequestId(1)));
  EXPECT_EQ(s.kv().pool().num_free_blocks(), 16);
  EXPECT_FALSE(s.kv().has_request(RequestId(1)));
  EXPECT_SCHED_INVARIANTS(s);
  EXPECT_TRUE(s.abort_request(RequestId(3)));  // still waiting
  EXPECT_EQ(step(s), "2:0+6* fin 1 3");
  // Aborted between schedule() and update(): update skips it and frees nothing twice.
  SchedulerOutput out = s.schedule();
  EXPECT_EQ(describe(out), "2:6+1*");
  EXPECT_TRUE(s.abort_request(RequestId(2)));
  s.update(out, std::vector<SampledToken>{{RequestId(2), 7}});
  EXPECT_SCHED_INVARIANTS(s);
  EXPECT_EQ(s.kv().pool().num_free_blocks(), 16);
  EXPECT_EQ(s.kv().stats().num_requests, 0);
  EXPECT_FALSE(s.has_unfinished());
  EXPECT_EQ(step(s), "fin 2");
  std::vector<Request> done = s.take_finished();
  ASSERT_EQ(done.size(), 3u);
  for (const Request& r : done) EXPECT_EQ(r.finish_reason(), FinishReason::kAborted);
  EXPECT_EQ(done[0].num_computed_tokens(), 8);
  EXPECT_EQ(vec(done[2].output_token_ids()), std::vector<int32_t>{kTokenBase + 6});
}

TEST(SchedScheduler, CallerFinishesOnStop) {
  Scheduler s(config(64, 8, 4, 16));
  add(s, 1, iota_tokens(0, 5), 10);
  EXPECT_EQ(step(s), "1:0+5*");
  EXPECT_EQ(step(s), "1:5+1*");
  EXPECT_TRUE(s.finish_request(RequestId(1), FinishReason::kStop));  // the caller saw EOS
  EXPECT_EQ(s.kv().pool().num_free_blocks(), 16);
  EXPECT_EQ(step(s), "fin 1");
  std::vector<Request> done = s.take_finished();
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].finish_reason(), FinishReason::kStop);
  EXPECT_EQ(vec(done[0].output_token_ids()), expected_output(5, 2));
}

// A failed step (the forward pass returned an error): abort_step finishes every request that
// step scheduled with kError, frees their blocks (a fork-pending request's sample ids too) and
// ends the step, so the next schedule() works; requests outside the step go on.
TEST(SchedScheduler, AbortStepFinishesTheScheduledRequestsWithError) {
  Scheduler s(config(/*budget=*/8, 8, /*bs=*/4, /*blocks=*/16));
  add(s, 1, iota_tokens(0, 5), 10);
  EXPECT_EQ(step(s), "1:0+5*");
  ASSERT_TRUE(s.add_request(RequestId(2), {.prompt_token_ids = iota_tokens(100, 7),
                                           .max_new_tokens = 3,
                                           .cache_scope = kv::CacheNamespace(7),
                                           .n = 2,
                                           .sample_ids = {RequestId(20)}})
                  .ok());
  add(s, 3, iota_tokens(200, 6), 3);  // the budget is spent by 1 and 2: not in the step
  SchedulerOutput out = s.schedule();
  EXPECT_EQ(describe(out), "1:5+1* 2:0+7*2");
  s.abort_step(out);
  EXPECT_SCHED_INVARIANTS(s);
  EXPECT_EQ(s.find(RequestId(1)), nullptr);
  EXPECT_EQ(s.find(RequestId(2)), nullptr);
  EXPECT_EQ(s.stats().num_running, 0);
  EXPECT_EQ(s.stats().num_waiting, 1);
  EXPECT_EQ(s.kv().pool().num_free_blocks(), 16);
  EXPECT_FALSE(s.abort_request(RequestId(1)));
  std::vector<Request> done = s.take_finished();
  ASSERT_EQ(done.size(), 2u);
  for (const Request& r : done) EXPECT_EQ(r.finish_reason(), FinishReason::kError);
  EXPECT_EQ(done[0].id(), RequestId(1));
  EXPECT_EQ(done[0].num_computed_tokens(), 5);  // the failed step's token was never computed
  EXPECT_EQ(vec(done[0].output_token_ids()), expected_output(5, 1));
  // The blocks the failed step registered at scheduling (2's first, full block) held no KV:
  // they are no prefix hit. Request 1's first block was computed before: it still is.
  auto hit = [&](std::vector<int32_t> prompt) {
    return s.kv().get_computed_blocks(prompt, kv::CacheNamespace(7)).num_cached_tokens;
  };
  EXPECT_EQ(hit(iota_tokens(100, 7)), 0);
  EXPECT_EQ(hit(iota_tokens(0, 6)), 4);
  // The sample id reserved by 2 is free again.
  add(s, 20, iota_tokens(300, 2), 1);
  EXPECT_EQ(step(s), "3:0+6* 20:0+2* fin 1 2");
  while (s.has_unfinished()) step(s);
  done = s.take_finished();
  ASSERT_EQ(done.size(), 2u);
  EXPECT_EQ(done[0].id(), RequestId(20));
  EXPECT_EQ(done[1].id(), RequestId(3));
  EXPECT_EQ(done[1].finish_reason(), FinishReason::kLength);
  EXPECT_EQ(vec(done[1].output_token_ids()), expected_output(6, 3));
  EXPECT_EQ(s.kv().pool().num_free_blocks(), 16);

  // A request aborted between schedule() and abort_step() is skipped (finished once).
  add(s, 4, iota_tokens(400, 3), 2);
  out = s.schedule();
  EXPECT_TRUE(s.abort_request(RequestId(4)));
  s.abort_step(out);
  EXPECT_SCHED_INVARIANTS(s);
  done = s.take_finished();
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].finish_reason(), FinishReason::kAborted);
  EXPECT_EQ(step(s), "fin 4");
}

TEST(SchedScheduler, AddRequestRejectsBadInput) {
  Scheduler s(config(64, 8, /*bs=*/4, /*blocks=*/4));
  EXPECT_TRUE(s.add_request(RequestId(1), {.prompt_token_ids = {1, 2}, .max_new_tokens = 4}).ok());
  const Status dup = s.add_request(RequestId(1), {.prompt_token_ids = {1}, .max_new_tokens = 1});
  EXPECT_EQ(dup.message(), "request 1 already exists");
  EXPECT_FALSE(s.add_request(RequestId(2), {.prompt_token_ids = {}, .max_new_tokens = 1}).ok());
  EXPECT_FALSE(s.add_request(RequestId(2), {.prompt_token_ids = {1}, .max_new_tokens = 0}).ok());
  EXPECT_FALSE(
      s.add_request(RequestId(2), {.prompt_token_ids = {1}, .max_new_tokens = 1, .n = 2}).ok());
  // 16 slots fit exactly (the last sampled token is never computed); 17 do not.
  EXPECT_TRUE(
      s.add_request(RequestId(3), {.prompt_token_ids = iota_tokens(0, 10), .max_new_tokens = 7})
          .ok());
  const Status big =
      s.add_request(RequestId(4), {.prompt_token_ids = iota_tokens(0, 10), .max_new_tokens = 8});
  EXPECT_EQ(big.message(),
            "request 4: prompt 10 + max_new_tokens 8 needs 5 KV blocks, the cache has 4");
  EXPECT_EQ(s.stats().num_waiting, 2);
}

// A sliding-window group counts by its window in the fits-alone check, and the request then
// runs to the end within the cache: a 200-token prompt in a 2-group cache of 60 blocks.
TEST(SchedScheduler, SlidingWindowGroupsCountByTheirWindow) {
  SchedulerConfig c = config(16, 8, /*bs=*/4, /*blocks=*/60);
  c.num_kv_groups = 2;
  Scheduler full(c);
  const Status refused =
      full.add_request(RequestId(1), {.prompt_token_ids = iota_tokens(0, 200), .max_new_tokens = 4});
  EXPECT_EQ(refused.message(),
            "request 1: prompt 200 + max_new_tokens 4 needs 102 KV blocks, the cache has 60");
  c.kv_group_windows = {0, 8};
  Scheduler windowed(c);
  ASSERT_TRUE(
      windowed.add_request(RequestId(1), {.prompt_token_ids = iota_tokens(0, 200), .max_new_tokens = 4})
          .ok());
  // 51 blocks in the full group, ceil((8 - 1 + 16) / 4) + 1 = 7 in the local one.
  int steps = 0;
  while (windowed.take_finished().empty() && steps < 100) {
    step(windowed);
    EXPECT_SCHED_INVARIANTS(windowed);
    ++steps;
  }
  EXPECT_LT(steps, 100);
}

TEST(SchedScheduler, ContextShiftDropsWholeBlocksAfterTheSinksAndRotatesTheRest) {
  SchedulerConfig c = config(64, 4, 4, 32);
  c.context_policy = ContextPolicy::kShift;
  c.max_model_len = 18;  // a window of 16 tokens (whole blocks)
  c.sink_tokens = 3;     // one sink block
  Scheduler s(c);
  add(s, 1, iota_tokens(1, 10), 20);
  EXPECT_EQ(step(s), "1:0+10*");
  for (int p = 10; p < 16; ++p) EXPECT_EQ(step(s), fmt::format("1:{}+1*", p));
  // 16 computed + 1 sampled > 16: block 1 (positions 4..7) goes; the rest moves down by 4.
  SchedulerOutput out;
  EXPECT_EQ(step(s, &out), "1:12+1*");
  const Request* r = s.find(RequestId(1));
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(vec(out.block_offsets(out.scheduled[0])), (std::vector<int32_t>{0, 4, 4, 0}));
  EXPECT_EQ(r->num_dropped_tokens(), 4);
  EXPECT_EQ(r->num_output_tokens(), 8);
  EXPECT_EQ(r->num_kept_prompt_tokens(), 6);  // prompt tokens 5..8 went
  const std::vector<int32_t> kept(r->token_ids().begin(), r->token_ids().begin() + 8);
  EXPECT_EQ(kept, (std::vector<int32_t>{1, 2, 3, 4, 9, 10, 1010, 1011}));
  EXPECT_EQ(s.kv().block_table(RequestId(1)).num_blocks(), 4);
  // It goes on to its 20 tokens, never holding more than the window.
  int steps = 0;
  while (s.has_unfinished()) {
    step(s, &out);
    ++steps;
    if (s.kv().has_request(RequestId(1))) {
      EXPECT_LE(s.kv().num_tokens(RequestId(1)), 16);
    }
  }
  EXPECT_EQ(steps, 12);
  const auto done = s.take_finished();
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].finish_reason(), FinishReason::kLength);
  EXPECT_EQ(done[0].num_output_tokens(), 20);
  EXPECT_EQ(s.stats().num_dropped_tokens, done[0].num_dropped_tokens());
  EXPECT_EQ(s.stats().num_context_shifts, done[0].num_shifts());
  EXPECT_EQ(s.kv().pool().num_free_blocks(), 32);
  // A prompt longer than the window, and sinks that leave no room, are refused.
  EXPECT_FALSE(s.add_request(RequestId(5), RequestParams{.prompt_token_ids = iota_tokens(1, 17),
                                                         .max_new_tokens = 4}).ok());
  EXPECT_FALSE(s.add_request(RequestId(6), RequestParams{.prompt_token_ids = iota_tokens(1, 12),
                                                         .max_new_tokens = 4,
                                                         .keep_tokens = 12}).ok());
}

TEST(SchedScheduler, ContextShiftDropsWholeTurnsWhenItKnowsWhereTheyStart) {
  SchedulerConfig c = config(64, 4, 4, 32);
  c.context_policy = ContextPolicy::kShift;
  c.max_model_len = 34;  // a window of 32 tokens: 8 blocks of 4
  c.sink_tokens = 3;     // one sink block
  Scheduler s(c);
  // Turns start at 5, 14 and 22; the last message ends at 26 (the reply's header follows).
  ASSERT_TRUE(s.add_request(RequestId(1),
                            RequestParams{.prompt_token_ids = iota_tokens(1, 28),
                                          .max_new_tokens = 40,
                                          .turn_starts = {5, 14, 22, 26}}).ok());
  const auto shifts_to = [&](int32_t shifts) {
    while (s.find(RequestId(1))->num_shifts() < shifts) step(s);
    return s.find(RequestId(1));
  };
  // Full at 32 + 1: one block would do, but the turn at 5 already lost its header with it; the
  // first turn start at or past block 2 is 14 (block 3): blocks 1 and 2 go, 14 keeps its header.
  const Request* r = shifts_to(1);
  EXPECT_EQ(r->num_dropped_tokens(), 8);
  EXPECT_EQ(std::vector<int32_t>(r->token_ids().begin(), r->token_ids().begin() + 8),
            (std::vector<int32_t>{1, 2, 3, 4, 13, 14, 15, 16}));
  EXPECT_EQ(vec(r->turn_starts()), (std::vector<int32_t>{6, 14, 18}));
  r = shifts_to(2);  // the turn now at 14: two blocks again
  EXPECT_EQ(r->num_dropped_tokens(), 16);
  EXPECT_EQ(vec(r->turn_starts()), (std::vector<int32_t>{6, 10}));
  r = shifts_to(3);  // 10 is in block 2: one block
  EXPECT_EQ(r->num_dropped_tokens(), 20);
  EXPECT_EQ(vec(r->turn_starts()), (std::vector<int32_t>{6}));
  r = shifts_to(4);  // no turn start left past the sinks' next block: the fewest blocks
  EXPECT_EQ(r->num_dropped_tokens(), 24);
  EXPECT_TRUE(r->turn_starts().empty());
  while (s.has_unfinished()) step(s);
  ASSERT_EQ(s.take_finished().size(), 1u);

  // A turn start so far that dropping up to it would leave less than a block: the fewest.
  ASSERT_TRUE(s.add_request(RequestId(2),
                            RequestParams{.prompt_token_ids = iota_tokens(1, 32),
                                          .max_new_tokens = 4, .turn_starts = {32}}).ok());
  while (s.find(RequestId(2))->num_shifts() < 1) step(s);
  EXPECT_EQ(s.find(RequestId(2))->num_dropped_tokens(), 4);
  EXPECT_EQ(vec(s.find(RequestId(2))->turn_starts()), (std::vector<int32_t>{28}));
  while (s.has_unfinished()) step(s);
  // Turn starts out of order or outside the prompt are refused.
  EXPECT_FALSE(s.add_request(RequestId(3), RequestParams{.prompt_token_ids = iota_tokens(1, 8),
                                                         .max_new_tokens = 4,
                                                         .turn_starts = {5, 5}}).ok());
  EXPECT_FALSE(s.add_request(RequestId(4), RequestParams{.prompt_token_ids = iota_tokens(1, 8),
                                                         .max_new_tokens = 4,
                                                         .turn_starts = {9}}).ok());
}

}  // namespace
}  // namespace hinge::sched
