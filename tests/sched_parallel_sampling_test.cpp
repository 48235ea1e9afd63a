// Parallel sampling (n > 1) in the scheduler: the fork after the prompt, shared prompt blocks,
// copy-on-write of a shared partial block, independent preemption and finishing of samples,
// max_num_seqs accounting, aborts, validation; and the prefix query counters counting an
// admission once. Exact schedules ("id:first+num_new", '*' = samples, then the number of samples
// when it forks), scheduler + KV invariants after every step.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "sched/scheduler.h"
#include "sched_test_util.h"

namespace hinge::sched {
namespace {

using namespace test;  // NOLINT(build/namespaces): the shared scheduler test helpers

// The fake model: the token sampled for request (or sample) `id` after position p - 1 is
// id * 1000 + p, so every sample has its own tokens.
int32_t fake_token(RequestId id, int32_t end_position) {
  return static_cast<int32_t>(id.value) * 1000 + end_position;
}

std::vector<SampledToken> sample_all(const SchedulerOutput& out) {
  std::vector<SampledToken> sampled;
  for (const ScheduledRequest& r : out.scheduled) {
    if (!r.samples) continue;
    EXPECT_EQ(out.sample_ids(r).size(), static_cast<size_t>(r.num_samples - 1));
    sampled.push_back({r.id, fake_token(r.id, r.end_position())});
    for (RequestId sid : out.sample_ids(r)) sampled.push_back({sid, fake_token(sid, r.end_position())});
  }
  return sampled;
}

// schedule(), invariants, the fake model samples every sampling entry, update(), invariants.
std::string step(Scheduler& s, SchedulerOutput* last = nullptr) {
  SchedulerOutput out = s.schedule();
  EXPECT_TRUE(s.check_invariants().ok()) << s.check_invariants().message();
  s.update(out, sample_all(out));
  EXPECT_TRUE(s.check_invariants().ok()) << s.check_invariants().message();
  std::string d = describe(out);
  if (last != nullptr) *last = std::move(out);
  return d;
}

std::vector<RequestId> ids(std::initializer_list<uint64_t> v) {
  std::vector<RequestId> out;
  for (uint64_t x : v) out.push_back(RequestId(x));
  return out;
}

Status add(Scheduler& s, uint64_t id, std::vector<int32_t> prompt, int32_t max_new,
           std::vector<RequestId> sample_ids = {}) {
  const int32_t n = static_cast<int32_t>(sample_ids.size()) + 1;
  return s.add_request(RequestId(id), RequestParams{.prompt_token_ids = std::move(prompt),
                                                    .max_new_tokens = max_new,
                                                    .cache_scope = kv::CacheNamespace(7),
                                                    .n = n,
                                                    .sample_ids = std::move(sample_ids)});
}

// The fake model's output of `id` alone from position `first` on: fake_token(id, p) for each.
std::vector<int32_t> expected_output(uint64_t id, int32_t first, int32_t max_new) {
  std::vector<int32_t> out;
  for (int32_t p = first; p < first + max_new; ++p) out.push_back(fake_token(RequestId(id), p));
  return out;
}

std::vector<kv::BlockId> table(const Scheduler& s, uint64_t id) {
  const auto b = s.kv().block_table(RequestId(id)).blocks();
  return {b.begin(), b.end()};
}

TEST(SchedParallelSampling, FourSamplesOf512TokenPromptShareItsBlocks) {
  Scheduler s(config(/*budget=*/512, /*max_seqs=*/8, /*bs=*/16, /*blocks=*/64));
  ASSERT_TRUE(add(s, 1, iota_tokens(0, 512), 3, ids({11, 12, 13})).ok());
  SchedulerOutput out;
  EXPECT_EQ(step(s, &out), "1:0+512*4");
  EXPECT_EQ(vec(out.sample_ids(out.scheduled[0])), ids({11, 12, 13}));
  EXPECT_TRUE(out.block_copies.empty());
  EXPECT_EQ(s.running(), ids({1, 11, 12, 13}));
  // The 32 prompt blocks, once each, referenced by the 4 samples.
  kv::KvCacheStats st = s.kv().stats();
  EXPECT_EQ(st.pool.num_used_blocks, 32);
  EXPECT_EQ(st.pool.num_shared_blocks, 32);
  EXPECT_EQ(st.num_requests, 4);
  for (int32_t b = 0; b < 32; ++b) EXPECT_EQ(s.kv().pool().ref_count(kv::BlockId(b)), 4);
  for (uint64_t id : {1, 11, 12, 13}) {
    const Request* r = s.find(RequestId(id));
    ASSERT_NE(r, nullptr);
    EXPECT_EQ(r->status(), RequestStatus::kRunning);
    EXPECT_EQ(r->num_computed_tokens(), 512);
    EXPECT_EQ(r->num_cached_tokens(), 0);
    EXPECT_EQ(r->parent_id(), RequestId(1));
    EXPECT_EQ(r->sample_index(), id == 1 ? 0 : static_cast<int32_t>(id - 10));
    EXPECT_FALSE(r->fork_pending());
    EXPECT_EQ(vec(r->prompt_token_ids()), iota_tokens(0, 512));
    EXPECT_EQ(vec(r->output_token_ids()), std::vector<int32_t>{fake_token(RequestId(id), 512)});
    EXPECT_EQ(table(s, id), block_range(0, 32));
  }
  EXPECT_EQ(s.find(RequestId(1))->n(), 4);
  EXPECT_EQ(s.find(RequestId(11))->n(), 1);

  // First decode: the prompt ends on a block boundary, so no copy; each sample gets its block.
  EXPECT_EQ(step(s, &out), "1:512+1* 11:512+1* 12:512+1* 13:512+1*");
  EXPECT_TRUE(out.block_copies.empty());
  st = s.kv().stats();
  EXPECT_EQ(st.pool.num_used_blocks, 32 + 4);
  EXPECT_EQ(st.pool.num_shared_blocks, 32);
  for (size_t k = 0; k < 4; ++k) {
    const ScheduledRequest& r = out.scheduled[k];
    const int32_t own = 32 + static_cast<int32_t>(k);
    std::vector<kv::BlockId> expected_table = block_range(0, 32);
    expected_table.push_back(kv::BlockId(own));
    EXPECT_EQ(blocks_of(out.block_table(r)), expected_table);
    EXPECT_EQ(vec(out.slot_mapping(r)), std::vector<int64_t>{int64_t{own} * 16});
    EXPECT_EQ(vec(out.token_ids(r)), std::vector<int32_t>{fake_token(r.id, 512)});
  }
  EXPECT_EQ(step(s), "1:513+1* 11:513+1* 12:513+1* 13:513+1*");
  EXPECT_FALSE(s.has_unfinished());
  EXPECT_EQ(step(s), "fin 1 11 12 13");
  std::vector<Request> done = s.take_finished();
  ASSERT_EQ(done.size(), 4u);
  for (const Request& r : done) {
    EXPECT_EQ(r.finish_reason(), FinishReason::kLength);
    EXPECT_EQ(vec(r.output_token_ids()), expected_output(r.id().value, 512, 3));
  }
  st = s.kv().stats();
  EXPECT_EQ(st.pool.num_free_blocks, 64);
  EXPECT_EQ(st.pool.num_cached_free_blocks, 32);  // the prompt, once
  EXPECT_EQ(st.num_prefix_query_tokens, 512);
}

// Pool of 14 blocks of 16 tokens. Request 9 (32 tokens, first in order) grows by one token per
// step; request 1 is a 100-token prompt (6 full blocks + 4 tokens) with 3 samples: 1, 11, 12.
TEST(SchedParallelSampling, PartialPromptBlockCopyOnWriteAndPreemptedSample) {
  Scheduler s(config(/*budget=*/256, /*max_seqs=*/8, /*bs=*/16, /*blocks=*/14));
  ASSERT_TRUE(add(s, 9, iota_tokens(5000, 32), 40).ok());
  ASSERT_TRUE(add(s, 1, iota_tokens(0, 100), 20, ids({11, 12})).ok());
  SchedulerOutput out;
  EXPECT_EQ(step(s, &out), "9:0+32* 1:0+100*3");
  EXPECT_EQ(blocks_of(out.block_table(out.scheduled[1])), block_range(2, 7));
  for (uint64_t id : {1, 11, 12}) EXPECT_EQ(table(s, id), block_range(2, 7));
  for (int32_t b = 2; b <= 8; ++b) EXPECT_EQ(s.kv().pool().ref_count(kv::BlockId(b)), 3);
  EXPECT_EQ(s.kv().stats().pool.num_used_blocks, 9);

  // First decode: position 100 lands in the shared partial block 8. 9 opens block 9; the first
  // two writers in running order (1, 11) get copies (10, 11); the last (12) writes in place.
  EXPECT_EQ(step(s, &out), "9:32+1* 1:100+1* 11:100+1* 12:100+1*");
  EXPECT_EQ(out.block_copies, (std::vector<kv::BlockCopy>{{kv::BlockId(8), kv::BlockId(10)},
                                                          {kv::BlockId(8), kv::BlockId(11)}}));
  std::vector<kv::BlockId> prompt_table = block_range(2, 6);
  auto with = [&](int32_t last) {
    std::vector<kv::BlockId> t = prompt_table;
    t.push_back(kv::BlockId(last));
    return t;
  };
  EXPECT_EQ(blocks_of(out.block_table(out.scheduled[1])), with(10));
  EXPECT_EQ(blocks_of(out.block_table(out.scheduled[2])), with(11));
  EXPECT_EQ(blocks_of(out.block_table(out.scheduled[3])), with(8));
  EXPECT_EQ(vec(out.slot_mapping(out.scheduled[1])), std::vector<int64_t>{10 * 16 + 4});
  EXPECT_EQ(vec(out.slot_mapping(out.scheduled[3])), std::vector<int64_t>{8 * 16 + 4});
  EXPECT_EQ(s.kv().pool().ref_count(kv::BlockId(8)), 1);
  EXPECT_EQ(s.kv().stats().num_cow_copies, 2);
  EXPECT_EQ(s.kv().stats().pool.num_used_blocks, 12);

  // Steps 3..13: positions 101..111 fill the samples' last blocks; nothing new is needed.
  for (int32_t p = 101; p <= 111; ++p) {
    EXPECT_EQ(step(s, &out), fmt::format("9:{}+1* 1:{}+1* 11:{}+1* 12:{}+1*", p - 68, p, p, p));
    EXPECT_TRUE(out.block_copies.empty());
  }
  // Position 112 needs a new block per sample: 1 and 11 take the last two, 12 (the last in
  // (priority, arrival, sample index) order) is preempted.
  EXPECT_EQ(step(s, &out), "9:44+1* 1:112+1* 11:112+1* pre 12");
  const Request* r12 = s.find(RequestId(12));
  ASSERT_NE(r12, nullptr);
  EXPECT_EQ(r12->status(), RequestStatus::kPreempted);
  EXPECT_EQ(r12->num_tokens(), 113);  // 100 prompt + 13 outputs, kept
  EXPECT_EQ(r12->num_preemptions(), 1);
  EXPECT_EQ(s.waiting(), ids({12}));
  // 12's own full block 8 is now cached and free; the prompt blocks are still 1's and 11's.
  EXPECT_EQ(s.kv().pool().num_free_blocks(), 1);
  for (int32_t b = 2; b <= 7; ++b) EXPECT_EQ(s.kv().pool().ref_count(kv::BlockId(b)), 2);
  const int64_t queries_before = s.kv().stats().num_prefix_query_tokens;
  EXPECT_EQ(queries_before, 32 + 100);

  // 12 would hit 7 blocks (its own block 8 included, revived from the free list) and need one
  // more: 2 free blocks, only 1 there. It waits; at position 48, 9 evicts block 8.
  for (int32_t p = 113; p <= 118; ++p)
    EXPECT_EQ(step(s), fmt::format("9:{}+1* 1:{}+1* 11:{}+1*", p - 68, p, p));
  EXPECT_EQ(s.kv().stats().pool.num_evictions, 1);
  EXPECT_EQ(s.kv().stats().num_prefix_query_tokens, queries_before);  // failed lookups: none
  // 1 and 11 reached 20 tokens; 12 resumes: the 96 prompt tokens of the 6 shared blocks are
  // still cached, the partial prompt block and its 13 outputs are recomputed.
  EXPECT_EQ(step(s, &out), "9:51+1* 12:96+17* fin 1 11");
  EXPECT_EQ(out.token_ids(out.scheduled[1])[4], fake_token(RequestId(12), 100));
  EXPECT_EQ(s.kv().stats().num_prefix_query_tokens, queries_before + 113);
  EXPECT_EQ(s.kv().stats().num_prefix_hit_tokens, 96);
  const std::vector<kv::BlockId> table12 = table(s, 12);
  ASSERT_EQ(table12.size(), 8u);
  EXPECT_EQ(std::vector<kv::BlockId>(table12.begin(), table12.begin() + 6), prompt_table);
  for (int32_t p = 113; p <= 118; ++p)
    EXPECT_EQ(step(s), fmt::format("9:{}+1* 12:{}+1*", p - 61, p));
  EXPECT_EQ(step(s), "9:58+1* fin 12");
  std::vector<Request> done = s.take_finished();
  ASSERT_EQ(done.size(), 3u);
  EXPECT_EQ(done[0].id(), RequestId(1));
  EXPECT_EQ(done[1].id(), RequestId(11));
  EXPECT_EQ(done[2].id(), RequestId(12));
  for (const Request& r : done) {
    EXPECT_EQ(r.finish_reason(), FinishReason::kLength);
    EXPECT_EQ(vec(r.prompt_token_ids()), iota_tokens(0, 100));
    // Each sample has exactly its own tokens, preempted or not.
    EXPECT_EQ(vec(r.output_token_ids()), expected_output(r.id().value, 100, 20));
    EXPECT_EQ(r.num_cached_tokens(), 0);
  }
  EXPECT_EQ(done[2].num_preemptions(), 1);
  while (s.has_unfinished()) step(s);
  EXPECT_EQ(vec(s.take_finished()[0].output_token_ids()), expected_output(9, 32, 40));
  EXPECT_EQ(s.kv().pool().num_free_blocks(), 14);
}

// Pool of 4 blocks of 4 tokens, budget 5. Request 1 (10 tokens, 2 samples) is preempted by 9
// during its chunked prefill, before its fork: it recomputes and forks later.
TEST(SchedParallelSampling, PreemptedBeforeTheForkForksAfterRecompute) {
  Scheduler s(config(/*budget=*/5, /*max_seqs=*/4, /*bs=*/4, /*blocks=*/4));
  ASSERT_TRUE(add(s, 9, iota_tokens(500, 4), 6).ok());
  ASSERT_TRUE(add(s, 1, iota_tokens(0, 10), 2, ids({11})).ok());
  EXPECT_EQ(step(s), "9:0+4* 1:0+1");
  EXPECT_EQ(step(s), "9:4+1* 1:1+4");
  EXPECT_EQ(step(s), "9:5+1* pre 1");
  const Request* r1 = s.find(RequestId(1));
  ASSERT_NE(r1, nullptr);
  EXPECT_TRUE(r1->fork_pending());
  EXPECT_EQ(r1->status(), RequestStatus::kPreempted);
  EXPECT_EQ(s.find(RequestId(11)), nullptr);  // not live before the fork
  // 1 resumes from its cached first block with what is left of the budget, then is preempted
  // again; 9 evicts 1's second cached block at position 8. 1 waits until 9 is done.
  EXPECT_EQ(step(s), "9:6+1* 1:4+4");
  EXPECT_EQ(step(s), "9:7+1* pre 1");
  EXPECT_EQ(step(s), "9:8+1*");
  EXPECT_EQ(step(s), "1:4+5 fin 9");
  EXPECT_EQ(s.find(RequestId(1))->num_preemptions(), 2);
  SchedulerOutput out;
  EXPECT_EQ(step(s, &out), "1:9+1*2");
  EXPECT_EQ(vec(out.sample_ids(out.scheduled[0])), ids({11}));
  EXPECT_EQ(s.running(), ids({1, 11}));
  EXPECT_EQ(s.find(RequestId(11))->num_preemptions(), 2);  // a sample inherits the history
  // The prompt's last block (positions 8, 9) is shared: 1 copies it, 11 writes in place.
  const std::vector<kv::BlockId> shared = table(s, 1);
  EXPECT_EQ(table(s, 11), shared);
  EXPECT_EQ(step(s, &out), "1:10+1* 11:10+1*");  // both reach max_new_tokens
  ASSERT_EQ(out.block_copies.size(), 1u);
  EXPECT_EQ(out.block_copies[0].src, shared[2]);
  EXPECT_EQ(blocks_of(out.block_table(out.scheduled[1])), shared);
  EXPECT_EQ(blocks_of(out.block_table(out.scheduled[0])),
            (std::vector<kv::BlockId>{shared[0], shared[1], out.block_copies[0].dst}));
  EXPECT_EQ(step(s), "fin 1 11");
  std::vector<Request> done = s.take_finished();
  ASSERT_EQ(done.size(), 3u);
  EXPECT_EQ(vec(done[1].output_token_ids()), expected_output(1, 10, 2));
  EXPECT_EQ(vec(done[2].output_token_ids()), expected_output(11, 10, 2));
  EXPECT_EQ(done[1].num_preemptions(), 2);
  EXPECT_EQ(done[2].num_preemptions(), 2);
}

TEST(SchedParallelSampling, MaxNumSeqsCountsSamplesFromAdmission) {
  Scheduler s(config(/*budget=*/64, /*max_seqs=*/4, /*bs=*/4, /*blocks=*/32));
  ASSERT_TRUE(add(s, 1, iota_tokens(0, 4), 2, ids({11, 12})).ok());
  ASSERT_TRUE(add(s, 2, iota_tokens(100, 4), 2, ids({21})).ok());
  ASSERT_TRUE(add(s, 3, iota_tokens(200, 4), 2).ok());
  // 1 takes 3 seq slots; 2 needs 2 of the 1 left and blocks 3 behind it (no overtaking).
  EXPECT_EQ(step(s), "1:0+4*3");
  EXPECT_EQ(s.running(), ids({1, 11, 12}));
  EXPECT_EQ(step(s), "1:4+1* 11:4+1* 12:4+1*");
  EXPECT_EQ(step(s), "2:0+4*2 3:0+4* fin 1 11 12");
  EXPECT_EQ(step(s), "2:4+1* 21:4+1* 3:4+1*");
  EXPECT_EQ(step(s), "fin 2 21 3");
  EXPECT_FALSE(s.has_unfinished());
}

TEST(SchedParallelSampling, SampleFinishesAndIsAbortedOnItsOwn) {
  Scheduler s(config(64, 8, 4, 32));
  ASSERT_TRUE(add(s, 1, iota_tokens(0, 6), 5, ids({11, 12})).ok());
  EXPECT_EQ(step(s), "1:0+6*3");
  EXPECT_TRUE(s.finish_request(RequestId(11), FinishReason::kStop));  // its token was EOS
  EXPECT_EQ(step(s), "1:6+1* 12:6+1* fin 11");
  EXPECT_TRUE(s.abort_request(RequestId(1)));
  EXPECT_SCHED_INVARIANTS(s);
  EXPECT_EQ(step(s), "12:7+1* fin 1");
  EXPECT_EQ(s.kv().stats().num_requests, 1);
  EXPECT_EQ(step(s), "12:8+1*");
  EXPECT_EQ(step(s), "12:9+1*");
  EXPECT_EQ(step(s), "fin 12");
  std::vector<Request> done = s.take_finished();
  ASSERT_EQ(done.size(), 3u);
  EXPECT_EQ(done[0].finish_reason(), FinishReason::kStop);
  EXPECT_EQ(vec(done[0].output_token_ids()), expected_output(11, 6, 1));
  EXPECT_EQ(done[1].finish_reason(), FinishReason::kAborted);
  EXPECT_EQ(vec(done[1].output_token_ids()), expected_output(1, 6, 2));
  EXPECT_EQ(done[2].finish_reason(), FinishReason::kLength);
  EXPECT_EQ(vec(done[2].output_token_ids()), expected_output(12, 6, 5));
  EXPECT_EQ(s.kv().pool().num_free_blocks(), 32);
}

TEST(SchedParallelSampling, AbortBeforeTheForkAbortsTheWholeRequest) {
  Scheduler s(config(/*budget=*/4, 8, /*bs=*/4, /*blocks=*/32));
  ASSERT_TRUE(add(s, 1, iota_tokens(0, 6), 3, ids({11, 12})).ok());
  EXPECT_EQ(step(s), "1:0+4");
  EXPECT_FALSE(s.abort_request(RequestId(11)));  // not live yet
  EXPECT_TRUE(s.abort_request(RequestId(1)));
  EXPECT_SCHED_INVARIANTS(s);
  EXPECT_FALSE(s.has_unfinished());
  // The sample ids are free again.
  ASSERT_TRUE(add(s, 11, iota_tokens(0, 6), 1).ok());
  EXPECT_EQ(step(s), "11:4+2* fin 1");  // its first block hit the aborted prefill's cache
  EXPECT_EQ(step(s), "fin 11");
  std::vector<Request> done = s.take_finished();
  ASSERT_EQ(done.size(), 2u);
  EXPECT_EQ(done[0].finish_reason(), FinishReason::kAborted);
  EXPECT_EQ(done[0].num_output_tokens(), 0);

  // Aborted between schedule() and update() of the forking step: its n tokens are skipped.
  ASSERT_TRUE(add(s, 2, iota_tokens(100, 3), 3, ids({21, 22})).ok());
  SchedulerOutput out = s.schedule();
  EXPECT_EQ(describe(out), "2:0+3*3");
  EXPECT_TRUE(s.abort_request(RequestId(2)));
  s.update(out, sample_all(out));
  EXPECT_SCHED_INVARIANTS(s);
  EXPECT_EQ(s.find(RequestId(21)), nullptr);
  EXPECT_FALSE(s.has_unfinished());
  EXPECT_EQ(s.kv().pool().num_free_blocks(), 32);
}

TEST(SchedParallelSampling, OneNewTokenFinishesEverySampleAtTheFork) {
  Scheduler s(config(64, 8, 4, /*blocks=*/2));
  // 6 tokens = 2 blocks; nothing is written after the fork, so no copy is ever needed.
  ASSERT_TRUE(add(s, 1, iota_tokens(0, 6), 1, ids({11, 12, 13})).ok());
  EXPECT_EQ(step(s), "1:0+6*4");
  EXPECT_FALSE(s.has_unfinished());
  EXPECT_EQ(step(s), "fin 1 11 12 13");
  std::vector<Request> done = s.take_finished();
  ASSERT_EQ(done.size(), 4u);
  for (const Request& r : done)
    EXPECT_EQ(vec(r.output_token_ids()), expected_output(r.id().value, 6, 1));
  EXPECT_EQ(s.kv().pool().num_free_blocks(), 2);
}

TEST(SchedParallelSampling, AddRequestValidatesSamples) {
  Scheduler s(config(64, /*max_seqs=*/4, /*bs=*/4, /*blocks=*/4));
  EXPECT_EQ(add(s, 1, {1}, 1, ids({2, 3, 4, 5})).message(),
            "request 1: n = 5 parallel samples, must be in [1, max_num_seqs 4]");
  EXPECT_EQ(s.add_request(RequestId(1), {.prompt_token_ids = {1}, .n = 0}).message(),
            "request 1: n = 0 parallel samples, must be in [1, max_num_seqs 4]");
  EXPECT_EQ(s.add_request(RequestId(1), {.prompt_token_ids = {1}, .n = 3}).message(),
            "request 1: n = 3 needs 2 sample ids, got 0");
  EXPECT_EQ(add(s, 1, {1}, 1, ids({2, 2})).message(), "request 1: sample id 2 repeated");
  EXPECT_EQ(add(s, 1, {1}, 1, ids({1})).message(), "request 1: sample id 1 repeated");
  // 6 + 3 tokens: 1 shared full prompt block, then 1 block per sample (the copy of the partial
  // prompt block, which also holds the outputs).
  ASSERT_TRUE(add(s, 1, iota_tokens(0, 6), 3, ids({11, 12})).ok());
  EXPECT_EQ(add(s, 2, iota_tokens(0, 6), 3, ids({21, 22, 23})).message(),
            "request 2: prompt 6 + max_new_tokens 3 for 4 samples needs 5 KV blocks, the cache "
            "has 4");
  EXPECT_TRUE(add(s, 2, iota_tokens(0, 6), 1, ids({21, 22, 23})).ok());  // no copies: 2 blocks
  EXPECT_EQ(add(s, 11, {1}, 1).message(),
            "request 11: id reserved for a parallel sample of another request");
  EXPECT_EQ(add(s, 3, {1}, 1, ids({12})).message(), "request 3: sample id 12 already in use");
  EXPECT_EQ(add(s, 3, {1}, 1, ids({2})).message(), "request 3: sample id 2 already in use");
  EXPECT_EQ(s.stats().num_waiting, 2);
  EXPECT_SCHED_INVARIANTS(s);
}

// Task: a waiting request looked up every step while it does not fit counts its prompt once.
TEST(SchedParallelSampling, PrefixQueryCountedOnceAtAdmission) {
  Scheduler s(config(/*budget=*/64, 8, /*bs=*/4, /*blocks=*/4));
  ASSERT_TRUE(add(s, 1, iota_tokens(0, 8), 5).ok());  // 12 slots at most: 3 blocks
  EXPECT_EQ(step(s), "1:0+8*");
  // 2 shares 1's first block: a 4-token hit each time it is looked up; it needs 2 more blocks.
  std::vector<int32_t> prompt2 = iota_tokens(0, 4);
  for (int32_t t : iota_tokens(900, 5)) prompt2.push_back(t);
  ASSERT_TRUE(add(s, 2, prompt2, 2).ok());
  for (int32_t p = 8; p <= 11; ++p) {
    EXPECT_EQ(step(s), fmt::format("1:{}+1*", p));
    EXPECT_EQ(s.kv().stats().num_prefix_query_tokens, 8);
    EXPECT_EQ(s.kv().stats().num_prefix_hit_tokens, 0);
  }
  EXPECT_EQ(step(s), "2:4+5* fin 1");
  EXPECT_EQ(s.kv().stats().num_prefix_query_tokens, 8 + 9);
  EXPECT_EQ(s.kv().stats().num_prefix_hit_tokens, 4);
  ASSERT_NE(s.find(RequestId(2)), nullptr);
  EXPECT_EQ(s.find(RequestId(2))->num_cached_tokens(), 4);
}

}  // namespace
}  // namespace hinge::sched
