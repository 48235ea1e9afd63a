// Admission isolation: a tenant's admit / refuse decision and its Retry-After for a request are
// the same whether or not another tenant has the same prompt cached. A real engine
// (stories260K) and a real AdmissionController, with the cached-blocks callback EngineThread
// passes (Engine::cached_prefix_blocks under the request's own scope). Paired: the tenant that
// did cache the prompt gets the discount (some of the sweep's decisions change), so the test
// can fail.
#include <gtest/gtest.h>

#include <random>

#include "hinge/engine.h"
#include "model_test_util.h"
#include "sched/admission.h"

namespace hinge {
namespace {

using testing::load_or_die;
using testing::shared_path;

const kv::CacheScope kA(kv::CacheNamespace::from_string("tenant-a/v1"), 1);
const kv::CacheScope kB(kv::CacheNamespace::from_string("tenant-b/v1"), 2);

std::vector<int32_t> random_prompt(uint64_t seed, int32_t len, int32_t n_vocab) {
  std::mt19937_64 rng(seed);
  std::vector<int32_t> p{1};
  std::uniform_int_distribution<int32_t> pick(3, n_vocab - 1);
  while (static_cast<int32_t>(p.size()) < len) p.push_back(pick(rng));
  return p;
}

void run(Engine& e, std::vector<int32_t> prompt, const kv::CacheScope& scope) {
  GenerateRequest r;
  r.prompt_token_ids = std::move(prompt);
  r.max_new_tokens = 2;
  r.sampling.temperature = 0;
  r.cache_scope = scope;
  ASSERT_TRUE(e.add_request(r).ok());
  std::vector<RequestDelta> deltas;
  while (e.has_unfinished()) ASSERT_TRUE(e.step(&deltas).ok());
}

struct Decision {
  sched::AdmissionVerdict verdict;
  int32_t retry_after_s;
  bool operator==(const Decision&) const = default;
};

// The decisions for `scope`'s request of `prompt` with each max_tokens of the sweep, in a pool
// where a reservation of `held` blocks is taken (a running request). `a_cached`: tenant A ran
// `prompt` first (else a different prompt of the same length: the same load).
std::vector<Decision> sweep(const LoadedModel& m, const std::vector<int32_t>& prompt,
                            bool a_cached, const kv::CacheScope& scope,
                            const std::vector<int32_t>& max_tokens, int32_t held,
                            int32_t max_queue) {
  EngineConfig c = testing::small_f32_engine_config(1, 4 << 20);
  auto e = std::move(Engine::create(m, nullptr, c)).value();
  run(*e, a_cached ? prompt : random_prompt(99, static_cast<int32_t>(prompt.size()), m.config.n_vocab), kA);
  sched::AdmissionConfig ac;
  ac.num_blocks = e->stats().kv_blocks_total;
  ac.block_size_tokens = e->config().block_size;
  ac.headroom_fraction = 0;
  ac.interactive_reserve_fraction = 0;
  ac.max_queue = max_queue;  // 0: start now or be refused (503 + Retry-After); else queue
  sched::AdmissionController adm(ac);
  const auto free_blocks = [&] {
    const EngineStats s = e->stats();
    return s.kv_blocks_total - s.kv_blocks_used;
  };
  sched::AdmissionTicket hold{1, "", sched::Priority::kInteractive, held};
  EXPECT_EQ(adm.offer(hold, 0, free_blocks(), {}).verdict, sched::AdmissionVerdict::kAdmitted);
  std::vector<Decision> out;
  uint64_t id = 10;
  for (int32_t mt : max_tokens) {
    sched::AdmissionTicket t{++id, "tenant", sched::Priority::kInteractive,
                             sched::AdmissionController::worst_case_blocks(
                                 static_cast<int64_t>(prompt.size()), mt, 1, ac.block_size_tokens, 1)};
    const sched::AdmissionOffer o = adm.offer(t, 1, free_blocks(), [&](uint64_t) {
      return e->cached_prefix_blocks(prompt, scope);
    });
    out.push_back({o.verdict, o.retry_after_s});
    if (o.verdict == sched::AdmissionVerdict::kAdmitted) adm.release(t.id, 1);
    if (o.verdict == sched::AdmissionVerdict::kQueued) adm.cancel(t.id);
  }
  return out;
}

TEST(EngineTenantAdmission, DecisionsAndRetryAfterIgnoreAnotherTenantsCache) {
  auto m = load_or_die(shared_path("models/stories260K.gguf"));
  ASSERT_TRUE(m);
  const auto prompt = random_prompt(7, 200, static_cast<int32_t>(m->config.n_vocab));  // 12 full blocks
  EngineConfig c = testing::small_f32_engine_config(1, 4 << 20);
  const int32_t total = std::move(Engine::create(*m, nullptr, c)).value()->stats().kv_blocks_total;
  const int32_t bs = c.block_size;
  // Leave room for the prompt plus ~4 blocks: the sweep crosses the line at which the 12
  // cached blocks decide.
  const int32_t room = (200 + bs - 1) / bs + 4;
  const int32_t held = total - room;
  ASSERT_GT(held, 0);
  std::vector<int32_t> mts;
  for (int32_t k = 0; k <= 20; ++k) mts.push_back(1 + k * bs);

  // With no queue (admit or 503 + Retry-After) and with one (admit or queue).
  for (int32_t max_queue : {0, 4}) {
    SCOPED_TRACE(::testing::Message() << "max_queue " << max_queue);
    const auto b_with = sweep(*m, prompt, true, kB, mts, held, max_queue);
    const auto b_without = sweep(*m, prompt, false, kB, mts, held, max_queue);
    ASSERT_EQ(b_with.size(), mts.size());
    for (size_t i = 0; i < mts.size(); ++i) {
      EXPECT_EQ(b_with[i], b_without[i]) << "max_tokens " << mts[i];
    }
    // The pair: tenant A, whose prompt is cached, is admitted where B is not.
    const auto a_with = sweep(*m, prompt, true, kA, mts, held, max_queue);
    const auto not_admitted = max_queue == 0 ? sched::AdmissionVerdict::kQueueFull
                                             : sched::AdmissionVerdict::kQueued;
    int a_only = 0, refused = 0;
    for (size_t i = 0; i < mts.size(); ++i) {
      refused += b_with[i].verdict == not_admitted;
      if (a_with[i].verdict == sched::AdmissionVerdict::kAdmitted &&
          b_with[i].verdict != sched::AdmissionVerdict::kAdmitted)
        ++a_only;
    }
    EXPECT_GT(refused, 0);
    EXPECT_GT(a_only, 0);
  }
}

}  // namespace
}  // namespace hinge
