// Seeded randomized simulation of the scheduler against a fake model that keeps a real KV arena:
// every computed token id is written to its physical slot, and each sampled token is a hash of
// the request id and all its tokens as read back through its block table. So a wrong slot, a
// stale prefix hit, a lost copy-on-write or a bad recompute after preemption changes the output.
// Each request must end with exactly the tokens the same fake model gives it alone. Some requests
// have n > 1 parallel samples: the model then samples one token per sample id from the same
// logits (the hash of that id and the prompt); each sample must end as the fake model would
// generate for its id alone, through fork, copy-on-write and independent preemptions.
#include "sched/scheduler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <random>
#include <vector>

namespace hinge::sched {
namespace {

constexpr int32_t kVocab = 5000;
constexpr int32_t kEosModulo = 97;  // a sampled token % 97 == 0 is "EOS" (caller finishes)

int32_t fake_token(RequestId id, std::span<const int32_t> tokens) {
  uint64_t h = 0x9e3779b97f4a7c15ULL ^ (id.value * 0xbf58476d1ce4e5b9ULL);
  for (int32_t t : tokens) {
    h ^= static_cast<uint64_t>(t) + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
    h *= 0x94d049bb133111ebULL;
  }
  h ^= h >> 31;
  return static_cast<int32_t>(h % kVocab);
}

// The request alone: generate until max_new_tokens or EOS.
std::vector<int32_t> reference_output(RequestId id, std::vector<int32_t> tokens, int32_t max_new) {
  std::vector<int32_t> out;
  while (static_cast<int32_t>(out.size()) < max_new) {
    const int32_t t = fake_token(id, tokens);
    out.push_back(t);
    tokens.push_back(t);
    if (t % kEosModulo == 0) break;
  }
  return out;
}

struct SimConfig {
  SchedulerConfig sched;
  uint64_t seed = 1;
  int32_t num_requests = 300;
};

struct SimResult {
  int64_t num_preemptions = 0;
  int64_t num_prefix_hit_tokens = 0;
  int32_t num_aborted = 0;
  int32_t num_stopped = 0;
  int64_t num_steps = 0;
  int32_t num_forked_samples = 0;      // samples 1..n-1 that lived (n > 1 requests)
  int64_t num_sample_preemptions = 0;  // preemptions of samples 1..n-1 (after their fork)
  int64_t num_cow_copies = 0;
};

void simulate(const SimConfig& cfg, SimResult* result) {
  std::mt19937_64 rng(cfg.seed);
  auto uniform = [&](int32_t lo, int32_t hi) {
    return std::uniform_int_distribution<int32_t>(lo, hi)(rng);
  };
  const int32_t bs = cfg.sched.block_size_tokens;
  Scheduler s(cfg.sched);
  std::vector<int32_t> arena(static_cast<size_t>(cfg.sched.num_kv_blocks) * bs, -1);

  // Four shared prefix families so that prefix hits (and evictions) happen.
  std::vector<std::vector<int32_t>> families(4);
  for (auto& f : families)
    for (int32_t i = 0; i < 48; ++i) f.push_back(uniform(0, kVocab - 1));

  struct Expect {
    std::vector<int32_t> prompt;
    std::vector<int32_t> output;  // reference alone
    uint64_t parent = 0;          // the id it was added under
    int32_t sample_index = 0;
    std::vector<RequestId> sample_ids;  // of a request added with n > 1
  };
  std::map<uint64_t, Expect> expect;
  int32_t num_added = 0;
  uint64_t next_id = 1000;
  int64_t num_steps = 0;
  std::vector<Request> done;

  while (num_added < cfg.num_requests || s.has_unfinished()) {
    ASSERT_LT(num_steps, 200000) << "simulation does not terminate";
    // Arrivals.
    for (int32_t k = uniform(0, 2); k > 0 && num_added < cfg.num_requests; --k) {
      std::vector<int32_t> prompt;
      if (uniform(0, 1) == 0) {
        prompt = families[static_cast<size_t>(uniform(0, 3))];
        for (int32_t i = uniform(1, 60); i > 0; --i) prompt.push_back(uniform(0, kVocab - 1));
      } else {
        for (int32_t i = uniform(1, 100); i > 0; --i) prompt.push_back(uniform(0, kVocab - 1));
      }
      // One request in five has 2..4 parallel samples (shorter outputs: they must fit alone).
      const int32_t n = uniform(0, 4) == 0 ? uniform(2, 4) : 1;
      const int32_t max_new = n == 1 ? uniform(1, 40) : uniform(1, 16);
      const RequestId id(next_id++);
      std::vector<RequestId> sample_ids;
      for (int32_t k = 1; k < n; ++k) sample_ids.push_back(RequestId(next_id++));
      expect[id.value] =
          Expect{prompt, reference_output(id, prompt, max_new), id.value, 0, sample_ids};
      for (int32_t k = 1; k < n; ++k) {
        const RequestId sid = sample_ids[static_cast<size_t>(k - 1)];
        expect[sid.value] = Expect{prompt, reference_output(sid, prompt, max_new), id.value, k, {}};
      }
      const Status st = s.add_request(
          id,
          RequestParams{.prompt_token_ids = prompt,
                        .max_new_tokens = max_new,
                        .priority = uniform(0, 9) < 3 ? Priority::kBatch : Priority::kInteractive,
                        .cache_scope = kv::CacheNamespace(1 + id.value % 2),
                        .n = n,
                        .sample_ids = sample_ids});
      ASSERT_TRUE(st.ok()) << st.message();
      ++num_added;
    }
    // Rare aborts of a random live request.
    if (uniform(0, 99) < 2 && s.has_unfinished()) {
      std::vector<RequestId> live = s.running();
      live.insert(live.end(), s.waiting().begin(), s.waiting().end());
      ASSERT_TRUE(s.abort_request(live[static_cast<size_t>(uniform(0, int32_t(live.size()) - 1))]));
    }

    SchedulerOutput out = s.schedule();
    ++num_steps;
    for (RequestId id : out.preempted)
      if (expect.at(id.value).sample_index > 0) ++result->num_sample_preemptions;
    {
      const Status st = s.check_invariants();
      ASSERT_TRUE(st.ok()) << st.message();
    }
    ASSERT_LE(out.num_scheduled_tokens, cfg.sched.max_num_batched_tokens);
    ASSERT_LE(static_cast<int32_t>(out.scheduled.size()), cfg.sched.max_num_seqs);
    if (s.has_unfinished()) {
      ASSERT_FALSE(out.empty()) << "live requests but nothing scheduled";
    }
    // The fake forward pass: copies first, then write each new token to its slot.
    for (const kv::BlockCopy& c : out.block_copies)
      std::copy_n(arena.begin() + int64_t{c.src.value} * bs, bs,
                  arena.begin() + int64_t{c.dst.value} * bs);
    std::vector<SampledToken> sampled;
    std::vector<RequestId> stops;
    for (const ScheduledRequest& r : out.scheduled) {
      const auto slots = out.slot_mapping(r);
      const auto tokens = out.token_ids(r);
      const auto table = out.block_table(r);
      const auto sample_ids = out.sample_ids(r);
      ASSERT_EQ(slots.size(), tokens.size());
      for (size_t j = 0; j < tokens.size(); ++j) {
        const int32_t p = r.first_position + static_cast<int32_t>(j);
        ASSERT_EQ(slots[j],
                  int64_t{table[static_cast<size_t>(p / bs)]} * bs + p % bs);
        arena[static_cast<size_t>(slots[j])] = tokens[j];
      }
      if (!r.samples) continue;
      // Attention reads positions [0, end) through the block table.
      std::vector<int32_t> seen;
      for (int32_t p = 0; p < r.end_position(); ++p)
        seen.push_back(arena[static_cast<size_t>(
            int64_t{table[static_cast<size_t>(p / bs)]} * bs + p % bs)]);
      ASSERT_EQ(sample_ids.size(), static_cast<size_t>(r.num_samples - 1));
      for (int32_t k = 0; k < r.num_samples; ++k) {
        const RequestId id = k == 0 ? r.id : sample_ids[static_cast<size_t>(k - 1)];
        const int32_t t = fake_token(id, seen);
        sampled.push_back({id, t});
        if (t % kEosModulo == 0) stops.push_back(id);
      }
    }
    s.update(out, sampled);
    for (RequestId id : stops) s.finish_request(id, FinishReason::kStop);  // no-op if finished
    {
      const Status st = s.check_invariants();
      ASSERT_TRUE(st.ok()) << st.message();
    }
    for (Request& r : s.take_finished()) done.push_back(std::move(r));
  }

  // Every request added is done; so is every sample of a request that forked (produced a
  // token); the samples of a request aborted before its fork never existed.
  std::map<uint64_t, const Request*> by_id;
  for (const Request& r : done) ASSERT_TRUE(by_id.emplace(r.id().value, &r).second);
  for (const auto& [id, e] : expect) {
    if (e.sample_index != 0) continue;
    ASSERT_TRUE(by_id.contains(id)) << id;
    const Request& parent = *by_id.at(id);
    const bool forked = parent.num_output_tokens() > 0;
    if (!forked) {
      ASSERT_EQ(parent.finish_reason(), FinishReason::kAborted) << id;
    }
    for (RequestId sid : e.sample_ids) {
      ASSERT_EQ(by_id.contains(sid.value), forked) << sid.value;
      if (!forked) continue;
      ++result->num_forked_samples;
    }
  }
  for (const Request& r : done) {
    const Expect& e = expect.at(r.id().value);
    ASSERT_EQ(r.parent_id().value, e.parent);
    ASSERT_EQ(r.sample_index(), e.sample_index);
    ASSERT_TRUE(std::equal(e.prompt.begin(), e.prompt.end(), r.prompt_token_ids().begin(),
                           r.prompt_token_ids().end()));
    const std::vector<int32_t> got(r.output_token_ids().begin(), r.output_token_ids().end());
    if (r.finish_reason() == FinishReason::kAborted) {
      ++result->num_aborted;
      ASSERT_LE(got.size(), e.output.size());
      ASSERT_TRUE(std::equal(got.begin(), got.end(), e.output.begin())) << r.id().value;
      continue;
    }
    ASSERT_EQ(got, e.output) << "request " << r.id().value;
    if (r.finish_reason() == FinishReason::kStop) {
      ++result->num_stopped;
      ASSERT_EQ(got.back() % kEosModulo, 0);
    } else {
      ASSERT_EQ(r.finish_reason(), FinishReason::kLength);
      ASSERT_EQ(r.num_output_tokens(), r.max_new_tokens());
    }
  }
  EXPECT_EQ(s.kv().stats().num_requests, 0);
  EXPECT_EQ(s.kv().pool().num_free_blocks(), cfg.sched.num_kv_blocks);
  result->num_cow_copies = s.kv().stats().num_cow_copies;
  result->num_preemptions = s.stats().num_preemptions;
  result->num_prefix_hit_tokens = s.kv().stats().num_prefix_hit_tokens;
  result->num_steps = num_steps;
}

TEST(SchedSimulation, SmallPoolWithPrefixCache) {
  for (uint64_t seed : {1, 2, 3}) {
    SimConfig cfg{.sched = {.max_num_batched_tokens = 48,
                            .max_num_seqs = 12,
                            .block_size_tokens = 8,
                            .num_kv_blocks = 40,
                            .enable_prefix_cache = true},
                  .seed = seed};
    SimResult r;
    simulate(cfg, &r);
    if (HasFatalFailure()) return;
    EXPECT_GT(r.num_preemptions, 0) << "seed " << seed;
    EXPECT_GT(r.num_prefix_hit_tokens, 0) << "seed " << seed;
    EXPECT_GT(r.num_aborted, 0) << "seed " << seed;
    EXPECT_GT(r.num_stopped, 0) << "seed " << seed;
    EXPECT_GT(r.num_forked_samples, 0) << "seed " << seed;
    EXPECT_GT(r.num_sample_preemptions, 0) << "seed " << seed;
    EXPECT_GT(r.num_cow_copies, 0) << "seed " << seed;
  }
}

TEST(SchedSimulation, SmallPoolWithoutPrefixCache) {
  SimConfig cfg{.sched = {.max_num_batched_tokens = 64,
                          .max_num_seqs = 16,
                          .block_size_tokens = 16,
                          .num_kv_blocks = 20,
                          .enable_prefix_cache = false},
                .seed = 7};
  SimResult r;
  simulate(cfg, &r);
  if (HasFatalFailure()) return;
  EXPECT_GT(r.num_preemptions, 0);
  EXPECT_EQ(r.num_prefix_hit_tokens, 0);
  EXPECT_GT(r.num_forked_samples, 0);
  EXPECT_GT(r.num_sample_preemptions, 0);
  EXPECT_GT(r.num_cow_copies, 0);
}

}  // namespace
}  // namespace hinge::sched
