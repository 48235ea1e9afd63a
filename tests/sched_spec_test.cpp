// Speculative decoding in the scheduler and the KV manager, with no model: draft tokens ride
// with a decode step, accepted ones advance the sequence, rejected ones give their slots back
// (KvCacheManager::trim_slots, no copy) and never enter the prefix cache. A fake model (the
// next token is a function of the sequence) and a fake KV memory (each physical slot holds the
// token written there) check, over random drafts, prefix sharing and preemption, that every
// request's output equals the one without speculation and that every position a step reads
// holds what was computed for it.
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <unordered_map>

#include "sched/scheduler.h"
#include "sched_test_util.h"

namespace hinge::sched {
namespace {

using namespace test;  // NOLINT(build/namespaces): the shared scheduler test helpers

// The fake model: the token after `seq`.
int32_t next_token(std::span<const int32_t> seq) {
  const uint32_t h = static_cast<uint32_t>(seq.back()) * 2654435761u + static_cast<uint32_t>(seq.size()) * 40503u;
  return static_cast<int32_t>(100 + (h >> 7) % 50);
}

std::vector<int32_t> reference(std::vector<int32_t> prompt, int32_t max_new) {
  std::vector<int32_t> out;
  for (int32_t i = 0; i < max_new; ++i) {
    const int32_t t = next_token(prompt);
    prompt.push_back(t);
    out.push_back(t);
  }
  return out;
}

void add(Scheduler& s, uint64_t id, std::vector<int32_t> prompt, int32_t max_new) {
  const Status st = s.add_request(
      RequestId(id), RequestParams{.prompt_token_ids = std::move(prompt),
                                   .max_new_tokens = max_new,
                                   .cache_scope = kv::CacheNamespace(7)});
  ASSERT_TRUE(st.ok()) << st.message();
}

// One step with the fake model and KV memory. Drafts come from draft(id, tokens) for each
// decoding request before the step. Fails the test when a position a step reads does not hold
// the token computed for it.
struct Sim {
  explicit Sim(SchedulerConfig c) : s(c), bs(c.block_size_tokens) {}
  Scheduler s;
  int32_t bs;
  std::unordered_map<int64_t, int32_t> kv;  // physical slot -> token whose KV it holds
  std::map<uint64_t, std::vector<int32_t>> outputs;
  int64_t drafted = 0, accepted = 0;

  template <class DraftFn>
  void step(DraftFn draft) {
    for (RequestId id : s.running()) {
      const Request* r = s.find(id);
      if (r->num_tokens() - r->num_computed_tokens() == 1) s.set_spec_tokens(id, draft(*r));
    }
    SchedulerOutput out = s.schedule();
    ASSERT_TRUE(s.check_invariants().ok()) << s.check_invariants().message();
    std::vector<SampledToken> sampled;
    for (const ScheduledRequest& r : out.scheduled) {
      const Request* req = s.find(r.id);
      const auto toks = req->token_ids();
      const auto table = out.block_table(r);
      // What the step's attention reads: every earlier position holds its own token.
      for (int32_t p = 0; p < r.first_position; ++p) {
        const int64_t slot = int64_t{table[static_cast<size_t>(p / bs)]} * bs + p % bs;
        ASSERT_EQ(kv[slot], toks[static_cast<size_t>(p)])
            << "request " << r.id.value << " position " << p;
      }
      const auto ids = out.token_ids(r);
      const auto slots = out.slot_mapping(r);
      for (size_t j = 0; j < ids.size(); ++j) kv[slots[j]] = ids[j];
      if (!r.samples) continue;
      std::vector<int32_t> seq(toks.begin(), toks.end());
      const auto drafts = ids.subspan(ids.size() - static_cast<size_t>(r.num_spec_tokens));
      drafted += r.num_spec_tokens;
      for (const int32_t d : drafts) {  // accept while the draft is what the model says
        if (d != next_token(seq)) break;
        sampled.push_back({r.id, d});
        seq.push_back(d);
        ++accepted;
      }
      sampled.push_back({r.id, next_token(seq)});
    }
    s.update(out, sampled);
    ASSERT_TRUE(s.check_invariants().ok()) << s.check_invariants().message();
    for (const Request& r : s.take_finished()) {
      const auto o = r.output_token_ids();
      outputs[r.id().value] = std::vector<int32_t>(o.begin(), o.end());
    }
  }
};

TEST(SchedSpec, AcceptedDraftsAdvanceRejectedOnesGiveTheirBlocksBack) {
  Sim sim(config(/*budget=*/64, 4, /*bs=*/4, /*blocks=*/32));
  const std::vector<int32_t> prompt = {1, 2, 3, 4, 5, 6};
  add(sim.s, 1, prompt, 20);
  const std::vector<int32_t> want = reference(prompt, 20);
  sim.step([](const Request&) { return std::vector<int32_t>{}; });  // prefill + first token
  ASSERT_EQ(sim.s.find(RequestId(1))->num_tokens(), 7);
  const int32_t free_before = sim.s.kv().pool().num_free_blocks();
  // 8 wrong drafts: 9 tokens computed, 1 kept; the blocks of the rejected ones go back.
  SchedulerOutput out;
  sim.s.set_spec_tokens(RequestId(1), std::vector<int32_t>(8, 7));
  out = sim.s.schedule();
  ASSERT_EQ(out.scheduled.size(), 1u);
  EXPECT_EQ(out.scheduled[0].num_new_tokens, 9);
  EXPECT_EQ(out.scheduled[0].num_spec_tokens, 8);
  EXPECT_TRUE(out.scheduled[0].samples);
  EXPECT_EQ(out.scheduled[0].num_blocks, 4);  // 6 + 1 + 8 = 15 slots
  std::vector<int32_t> seq = prompt;
  seq.push_back(want[0]);
  sim.s.update(out, std::vector<SampledToken>{{RequestId(1), next_token(seq)}});
  ASSERT_TRUE(sim.s.check_invariants().ok()) << sim.s.check_invariants().message();
  EXPECT_EQ(sim.s.kv().num_tokens(RequestId(1)), 7);
  EXPECT_EQ(sim.s.kv().block_table(RequestId(1)).num_blocks(), 2);
  EXPECT_EQ(sim.s.kv().pool().num_free_blocks(), free_before);
  EXPECT_EQ(sim.s.stats().num_spec_tokens, 8);
  EXPECT_EQ(sim.s.stats().num_spec_accepted, 0);
  // Right drafts: 3 accepted in one step, plus the token after them.
  seq.push_back(next_token(seq));
  std::vector<int32_t> right;
  std::vector<int32_t> s2 = seq;
  for (int i = 0; i < 3; ++i) {
    right.push_back(next_token(s2));
    s2.push_back(right.back());
  }
  sim.s.set_spec_tokens(RequestId(1), right);
  out = sim.s.schedule();
  std::vector<SampledToken> sampled;
  for (int32_t t : right) sampled.push_back({RequestId(1), t});
  sampled.push_back({RequestId(1), next_token(s2)});
  sim.s.update(out, sampled);
  ASSERT_TRUE(sim.s.check_invariants().ok()) << sim.s.check_invariants().message();
  const Request* r = sim.s.find(RequestId(1));
  EXPECT_EQ(r->num_tokens(), 12);
  EXPECT_EQ(r->num_computed_tokens(), 11);
  EXPECT_EQ(sim.s.stats().num_spec_accepted, 3);
  const auto o = r->output_token_ids();
  EXPECT_EQ(std::vector<int32_t>(o.begin(), o.end()), std::vector<int32_t>(want.begin(), want.begin() + 6));
}

TEST(SchedSpec, DraftsAreCappedByMaxTokensBudgetAndContext) {
  SchedulerConfig c = config(/*budget=*/32, 4, 4, 64);
  c.max_model_len = 14;
  Scheduler s(c);
  add(s, 1, {1, 2, 3, 4, 5}, 4);
  SchedulerOutput out = s.schedule();
  s.update(out, std::vector<SampledToken>{{RequestId(1), 9}});
  s.set_spec_tokens(RequestId(1), std::vector<int32_t>(10, 9));
  out = s.schedule();
  // max_new_tokens 4, one output so far: at most 2 drafts (2 accepted + 1 more = 4).
  EXPECT_EQ(out.scheduled[0].num_spec_tokens, 2);
  s.update(out, std::vector<SampledToken>{{RequestId(1), 9}});  // none accepted
  add(s, 2, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, 10);
  out = s.schedule();
  s.update(out, std::vector<SampledToken>{{RequestId(1), 9}, {RequestId(2), 9}});
  s.set_spec_tokens(RequestId(1), std::vector<int32_t>(10, 9));
  s.set_spec_tokens(RequestId(2), std::vector<int32_t>(10, 9));
  out = s.schedule();
  ASSERT_EQ(out.scheduled.size(), 2u);
  for (const ScheduledRequest& r : out.scheduled) {
    if (r.id == RequestId(1)) {
      EXPECT_EQ(r.num_spec_tokens, 0) << "its last token: no room left";
    } else {
      EXPECT_EQ(r.num_spec_tokens, 1) << "13 tokens of a 14-token context";
    }
  }
  std::vector<SampledToken> sampled;
  for (const ScheduledRequest& r : out.scheduled) sampled.push_back({r.id, 9});
  s.update(out, sampled);
  EXPECT_TRUE(s.check_invariants().ok()) << s.check_invariants().message();
  EXPECT_EQ(s.find(RequestId(1)), nullptr);  // finished at max_new_tokens
  // The budget: 6 tokens for a step leaves a lone decoding request 5 drafts.
  Scheduler b(config(/*budget=*/6, 4, 4, 64));
  add(b, 3, {1, 2}, 50);
  out = b.schedule();
  b.update(out, std::vector<SampledToken>{{RequestId(3), 9}});
  b.set_spec_tokens(RequestId(3), std::vector<int32_t>(20, 9));
  out = b.schedule();
  EXPECT_EQ(out.scheduled[0].num_spec_tokens, 5);
  EXPECT_EQ(out.num_scheduled_tokens, 6);
  b.update(out, std::vector<SampledToken>{{RequestId(3), 9}});
  EXPECT_TRUE(b.check_invariants().ok()) << b.check_invariants().message();
}

TEST(SchedSpec, RejectedDraftsNeverEnterThePrefixCache) {
  Sim sim(config(/*budget=*/64, 4, /*bs=*/4, /*blocks=*/32));
  add(sim.s, 1, {1, 2, 3}, 2);
  sim.step([](const Request&) { return std::vector<int32_t>{}; });
  // Drafts that fill block 0 and all of block 1 with wrong tokens, all rejected.
  sim.step([](const Request&) { return std::vector<int32_t>{77, 78, 79, 80, 81}; });
  ASSERT_EQ(sim.outputs.count(1), 1u);  // finished at max_new_tokens 2
  // A prompt made of the tokens the drafts wrote would hit them if they had been cached.
  const std::vector<int32_t> computed = {1, 2, 3, sim.outputs[1][0]};
  std::vector<int32_t> prompt = computed;
  for (int32_t t : {77, 78, 79, 80, 81}) prompt.push_back(t);
  const auto hit = sim.s.kv().get_computed_blocks(prompt, kv::CacheNamespace(7));
  EXPECT_EQ(hit.num_cached_tokens, 4) << "only the block of computed, accepted tokens";
}

TEST(SchedSpec, RandomDraftsPrefixSharingAndPreemptionKeepOutputsExact) {
  int64_t preemptions = 0, hits = 0;
  for (int seed = 1; seed <= 40; ++seed) {
    std::mt19937 rng(static_cast<uint32_t>(seed));
    // A small cache: preemption happens, prefixes are shared and evicted.
    Sim sim(config(/*budget=*/24, 6, /*bs=*/4, /*blocks=*/14));
    std::map<uint64_t, std::vector<int32_t>> want;
    uint64_t next_id = 1;
    const std::vector<int32_t> shared = {5, 6, 7, 8, 9, 10, 11, 12};
    auto draft = [&](const Request& r) {
      std::vector<int32_t> d;
      std::vector<int32_t> seq(r.token_ids().begin(), r.token_ids().end());
      const int k = static_cast<int>(rng() % 7);
      const int good = static_cast<int>(rng() % 8);  // right drafts before the first wrong one
      for (int i = 0; i < k; ++i) {
        const int32_t t = i < good ? next_token(seq) : static_cast<int32_t>(100 + rng() % 50);
        d.push_back(t);
        seq.push_back(t);
      }
      return d;
    };
    for (int step = 0; step < 400 && (next_id <= 20 || sim.s.has_unfinished()); ++step) {
      if (next_id <= 20 && rng() % 2 == 0) {
        std::vector<int32_t> prompt = rng() % 2 ? shared : std::vector<int32_t>{};
        for (int i = 0, n = 1 + static_cast<int>(rng() % 9); i < n; ++i)
          prompt.push_back(static_cast<int32_t>(rng() % 90));
        const int32_t max_new = 1 + static_cast<int32_t>(rng() % 24);
        want[next_id] = reference(prompt, max_new);
        add(sim.s, next_id++, prompt, max_new);
      }
      sim.step(draft);
      if (testing::Test::HasFatalFailure()) return;
    }
    ASSERT_FALSE(sim.s.has_unfinished()) << "seed " << seed;
    EXPECT_EQ(sim.outputs, want) << "seed " << seed;
    EXPECT_GT(sim.accepted, 0) << "seed " << seed;
    EXPECT_LT(sim.accepted, sim.drafted) << "seed " << seed;
    preemptions += sim.s.stats().num_preemptions;
    hits += sim.s.kv().stats().num_prefix_hit_tokens;
  }
  EXPECT_GT(preemptions, 20);  // the cases the test is for did happen
  EXPECT_GT(hits, 200);
}

}  // namespace
}  // namespace hinge::sched
