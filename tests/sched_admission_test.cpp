// AdmissionController: worst-case sizing, exact admit/wait decisions against reservations,
// the interactive reserve, the bounded queue, per-user caps, timeouts and Retry-After.
#include "sched/admission.h"
#include "sched/kv_demand.h"

#include <gtest/gtest.h>

#include <random>

namespace hinge::sched {
namespace {

using V = AdmissionVerdict;

AdmissionConfig config(int32_t blocks) {
  AdmissionConfig c;
  c.num_blocks = blocks;
  c.block_size_tokens = 16;
  c.headroom_fraction = 0.1;             // 10 of 100
  c.interactive_reserve_fraction = 0.2;  // 20 of 100
  c.max_request_share = 0.5;
  c.max_queue = 4;
  c.queue_timeout_s = 30;
  return c;
}

AdmissionTicket ticket(uint64_t id, int32_t blocks, Priority p = Priority::kInteractive,
                       std::string user = {}) {
  return AdmissionTicket{id, std::move(user), p, blocks};
}

// offer() against a pool with `free` unreferenced blocks and no prefix hits.
V offer(AdmissionController& a, const AdmissionTicket& t, double now = 0, int32_t free = 100) {
  return a.offer(t, now, free, {}).verdict;
}

TEST(SchedAdmission, WorstCaseBlocksSharesFullPromptBlocks) {
  // 100 prompt + 29 new: the last token is never computed, 128 slots = 8 blocks.
  EXPECT_EQ(AdmissionController::worst_case_blocks(100, 29, 1, 16, 1), 8);
  EXPECT_EQ(AdmissionController::worst_case_blocks(100, 30, 1, 16, 1), 9);
  // n = 4 of 512 prompt + 16 new: 32 shared + 4 x 1.
  EXPECT_EQ(AdmissionController::worst_case_blocks(512, 16, 4, 16, 1), 36);
  // 100 prompt (6 full blocks + 4 tokens), n = 2, 12 new: 6 + 2 x 1.
  EXPECT_EQ(AdmissionController::worst_case_blocks(100, 12, 2, 16, 1), 8);
  EXPECT_EQ(AdmissionController::worst_case_blocks(1, 1, 1, 16, 1), 1);
  // max_tokens 1 with n = 4: nothing is written after the fork, the prompt's blocks only.
  EXPECT_EQ(AdmissionController::worst_case_blocks(100, 1, 4, 16, 1), 7);
}

// The inverse the server uses for a default max_tokens: the largest that fits, exactly.
TEST(SchedKvDemand, MaxNewTokensWithinIsTheExactInverse) {
  for (int32_t n : {1, 2, 5})
    for (int64_t prompt : {1, 15, 16, 17, 100, 511})
      for (int64_t limit : {1, 7, 8, 9, 40, 200}) {
        const int64_t m = max_new_tokens_within(limit, prompt, n, 16, 1, 100000);
        if (m == 0) {
          EXPECT_GT(worst_case_kv_blocks(prompt, 1, n, 16, 1), limit);
          continue;
        }
        EXPECT_LE(worst_case_kv_blocks(prompt, m, n, 16, 1), limit);
        if (m < 100000) {
          EXPECT_GT(worst_case_kv_blocks(prompt, m + 1, n, 16, 1), limit);
        }
      }
  EXPECT_EQ(max_new_tokens_within(1000, 10, 1, 16, 1, 50), 50);  // capped by the limit given
}

TEST(SchedAdmission, AdmitsUntilReservationsFillThePoolLessHeadroom) {
  AdmissionController a(config(100));
  // 90 blocks usable: three of 30 start at once, the fourth waits.
  EXPECT_EQ(offer(a, ticket(1, 30)), V::kAdmitted);
  EXPECT_EQ(offer(a, ticket(2, 30)), V::kAdmitted);
  EXPECT_EQ(offer(a, ticket(3, 30)), V::kAdmitted);
  EXPECT_EQ(offer(a, ticket(4, 30)), V::kQueued);
  EXPECT_EQ(a.admit_next(0, 100, {}), std::nullopt);
  EXPECT_EQ(a.stats(0).reserved_blocks, 90);
  EXPECT_TRUE(a.check_invariants());
  a.release(2, 1);
  EXPECT_EQ(a.admit_next(1, 100, {}), 4u);
  EXPECT_EQ(a.stats(1).admitted, 3);
  EXPECT_EQ(a.stats(1).admitted_total, 4);
  EXPECT_TRUE(a.check_invariants());
}

TEST(SchedAdmission, PoolFreeBlocksAlsoBound) {
  AdmissionController a(config(100));
  EXPECT_EQ(offer(a, ticket(1, 10)), V::kAdmitted);
  // Reservations allow it, but the pool has only 15 unreferenced blocks (10 headroom).
  EXPECT_EQ(offer(a, ticket(2, 10), 0, 15), V::kQueued);
  EXPECT_EQ(a.admit_next(0, 15, {}), std::nullopt);
  EXPECT_EQ(a.admit_next(0, 20, {}), 2u);
}

TEST(SchedAdmission, PrefixHitsLowerTheReservation) {
  AdmissionController a(config(100));
  auto hits = [](uint64_t id) { return id == 1 ? 0 : 32; };  // later ones hit 32 blocks
  for (uint64_t i = 1; i <= 4; ++i)
    EXPECT_EQ(a.offer(ticket(i, 40), 0, 100, hits).verdict, V::kAdmitted) << i;  // 40, 8, 8, 8
  EXPECT_EQ(a.stats(0).reserved_blocks, 64);
  const AdmissionOffer o = a.offer(ticket(5, 40), 0, 100, {});  // no hit: 64 + 40 > 90
  EXPECT_EQ(o.verdict, V::kQueued);
}

TEST(SchedAdmission, BatchCannotTakeTheInteractiveReserve) {
  AdmissionController a(config(100));
  EXPECT_EQ(offer(a, ticket(1, 40)), V::kAdmitted);
  // Batch limit: 100 - 10 - 20 = 70 reserved at most; 40 + 35 = 75 waits.
  EXPECT_EQ(offer(a, ticket(2, 35, Priority::kBatch)), V::kQueued);
  // An interactive one of the same size fits (limit 90) and starts at once.
  EXPECT_EQ(offer(a, ticket(3, 35)), V::kAdmitted);
  EXPECT_EQ(a.admit_next(0, 100, {}), std::nullopt);
  a.release(1, 1);
  EXPECT_EQ(a.admit_next(1, 100, {}), 2u);  // 35 + 35 = 70
}

TEST(SchedAdmission, NoOvertakingWithinAClassAndInteractiveFirst) {
  AdmissionController a(config(100));
  EXPECT_EQ(offer(a, ticket(1, 50)), V::kAdmitted);
  EXPECT_EQ(offer(a, ticket(2, 45)), V::kQueued);  // 95 > 90
  // The small batch request would fit but must not overtake the waiting interactive one.
  EXPECT_EQ(offer(a, ticket(3, 5, Priority::kBatch)), V::kQueued);
  // Nor may a small interactive one overtake it (FIFO within the class).
  EXPECT_EQ(offer(a, ticket(4, 5)), V::kQueued);
  EXPECT_EQ(a.admit_next(0, 100, {}), std::nullopt);
  a.release(1, 1);
  EXPECT_EQ(a.admit_next(1, 100, {}), 2u);
  EXPECT_EQ(a.admit_next(1, 100, {}), 4u);  // interactive before batch
  EXPECT_EQ(a.admit_next(1, 100, {}), 3u);
  EXPECT_TRUE(a.check_invariants());
}

TEST(SchedAdmission, TooLargeQueueFullAndUserLimit) {
  AdmissionConfig c = config(100);
  c.max_concurrent_per_user = 2;
  AdmissionController a(c);
  const AdmissionOffer big = a.offer(ticket(1, 51), 0, 100, {});
  EXPECT_EQ(big.verdict, V::kTooLarge);
  EXPECT_NE(big.message.find("50 blocks"), std::string::npos) << big.message;
  EXPECT_EQ(offer(a, ticket(2, 45, Priority::kInteractive, "alice")), V::kAdmitted);
  EXPECT_EQ(offer(a, ticket(3, 45, Priority::kInteractive, "alice")), V::kAdmitted);
  const AdmissionOffer third = a.offer(ticket(4, 1, Priority::kInteractive, "alice"), 0, 100, {});
  EXPECT_EQ(third.verdict, V::kUserLimit);
  EXPECT_GE(third.retry_after_s, 1);
  for (uint64_t i = 5; i <= 8; ++i) EXPECT_EQ(offer(a, ticket(i, 1)), V::kQueued);  // 90 reserved
  const AdmissionOffer full = a.offer(ticket(9, 1), 0, 100, {});  // 4 queued = max_queue
  EXPECT_EQ(full.verdict, V::kQueueFull);
  EXPECT_GE(full.retry_after_s, 1);
  const AdmissionStats s = a.stats(0);
  EXPECT_EQ(s.rejected_too_large, 1);
  EXPECT_EQ(s.rejected_user_limit, 1);
  EXPECT_EQ(s.rejected_queue_full, 1);
  EXPECT_EQ(s.offered_total, 9);
  // Alice's slot frees when one of hers finishes.
  a.release(2, 1);
  EXPECT_EQ(a.admit_next(1, 100, {}), 5u);  // the queue moves: room for one more waiting
  EXPECT_EQ(offer(a, ticket(10, 1, Priority::kInteractive, "alice")), V::kQueued);
  EXPECT_TRUE(a.check_invariants());
}

TEST(SchedAdmission, MaxQueueZeroMeansStartNowOrBeRefused) {
  AdmissionConfig c = config(100);
  c.max_queue = 0;
  AdmissionController a(c);
  EXPECT_EQ(offer(a, ticket(1, 50)), V::kAdmitted);
  EXPECT_EQ(offer(a, ticket(2, 40)), V::kAdmitted);
  EXPECT_EQ(offer(a, ticket(3, 1)), V::kQueueFull);
  EXPECT_TRUE(a.check_invariants());
}

TEST(SchedAdmission, RetryAfterFollowsTheDrainRate) {
  AdmissionController a(config(100));
  EXPECT_EQ(a.retry_after_queue_full(0), 5);  // nothing measured
  // 10 requests finish 0.5 s apart: 2 per second.
  for (uint64_t i = 1; i <= 10; ++i) ASSERT_EQ(offer(a, ticket(i, 1)), V::kAdmitted);
  for (uint64_t i = 1; i <= 10; ++i) a.release(i, 0.5 * static_cast<double>(i));
  ASSERT_EQ(offer(a, ticket(11, 45), 5), V::kAdmitted);
  ASSERT_EQ(offer(a, ticket(12, 45), 5), V::kAdmitted);
  for (uint64_t i = 13; i <= 16; ++i) ASSERT_EQ(offer(a, ticket(i, 45), 5), V::kQueued);
  // 9 intervals over 4.5 s = 2 per second; 4 waiting -> 2 s.
  EXPECT_EQ(a.retry_after_queue_full(5), 2);
  // Idle since: 9 over 9 s = 1 per second -> 4 s.
  EXPECT_EQ(a.retry_after_queue_full(9.5), 4);
  EXPECT_NEAR(a.stats(5).drain_rate_per_s, 2.0, 1e-9);
  // Service times grew from 0.5 s to 5 s: the user-limit estimate is their running mean.
  EXPECT_GE(a.retry_after_user_limit(), 1);
  EXPECT_LE(a.retry_after_user_limit(), 5);
}

TEST(SchedAdmission, ExpireAndCancel) {
  AdmissionController a(config(100));
  EXPECT_EQ(offer(a, ticket(1, 50), 0), V::kAdmitted);
  EXPECT_EQ(offer(a, ticket(2, 45), 1), V::kQueued);
  EXPECT_EQ(offer(a, ticket(3, 45, Priority::kBatch), 20), V::kQueued);
  EXPECT_TRUE(a.expire(30).empty());
  EXPECT_EQ(a.expire(31.5), std::vector<uint64_t>{2});
  EXPECT_EQ(a.stats(31.5).rejected_timed_out, 1);
  EXPECT_TRUE(a.cancel(3));
  EXPECT_TRUE(a.cancel(1));  // admitted: reservation returned
  EXPECT_FALSE(a.cancel(1));
  EXPECT_EQ(a.stats(32).reserved_blocks, 0);
  EXPECT_EQ(a.stats(32).cancelled_total, 1);
  EXPECT_TRUE(a.check_invariants());
}

TEST(SchedAdmission, IdlePoolAdmitsAnyRequestThatPassedTheSizeLimit) {
  AdmissionConfig c = config(100);
  c.interactive_reserve_fraction = 0.6;  // batch could never reach 50 blocks otherwise
  AdmissionController a(c);
  EXPECT_EQ(offer(a, ticket(1, 50, Priority::kBatch)), V::kAdmitted);
  EXPECT_EQ(offer(a, ticket(2, 5, Priority::kBatch)), V::kQueued);
}

TEST(SchedAdmission, RandomOperationsKeepInvariants) {
  AdmissionConfig c = config(200);
  c.max_queue = 16;
  c.max_concurrent_per_user = 3;
  AdmissionController a(c);
  std::mt19937 rng(7);
  std::vector<uint64_t> admitted, queued;
  uint64_t next = 1;
  double now = 0;
  for (int op = 0; op < 5000; ++op) {
    now += 0.01;
    const int32_t free = 200 - a.stats(now).reserved_blocks;
    switch (rng() % 4) {
      case 0: {
        const uint64_t id = next++;
        const V v = offer(a, ticket(id, 1 + static_cast<int32_t>(rng() % 120),
                                    rng() % 2 ? Priority::kBatch : Priority::kInteractive,
                                    "u" + std::to_string(rng() % 5)),
                          now, free);
        if (v == V::kQueued) queued.push_back(id);
        if (v == V::kAdmitted) admitted.push_back(id);
        break;
      }
      case 1:
        if (auto id = a.admit_next(now, free, {})) {
          admitted.push_back(*id);
          std::erase(queued, *id);
        }
        break;
      case 2:
        if (!admitted.empty()) {
          const size_t i = rng() % admitted.size();
          a.release(admitted[i], now);
          admitted.erase(admitted.begin() + static_cast<long>(i));
        }
        break;
      case 3:
        if (!queued.empty() && rng() % 3 == 0) {
          const size_t i = rng() % queued.size();
          EXPECT_TRUE(a.cancel(queued[i]));
          queued.erase(queued.begin() + static_cast<long>(i));
        }
        break;
    }
    ASSERT_TRUE(a.check_invariants()) << "op " << op;
    // Beyond the headroom only by one idle-pool admission of at most the request limit.
    ASSERT_LE(a.stats(now).reserved_blocks, 200 - c.headroom_blocks());
  }
}

}  // namespace
}  // namespace hinge::sched
