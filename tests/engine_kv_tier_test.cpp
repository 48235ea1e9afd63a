// An engine with the encrypted disk tier (engine/kv_tiering.h, tier/disk_tier.h) on a real
// model: a finished request's blocks are written; after the RAM cache is reset a request
// continuing that prefix reads them back and counts them as cached, with logprobs
// bit-identical to an engine that computes everything (f32, f16, int8 KV); a restarted engine
// with the same secret hits from disk; a tampered file is a miss (the block is recomputed, the
// output unchanged); sliding-window models and a disabled prefix cache refuse a tier.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "hinge/engine.h"
#include "model_test_util.h"
#include "test_util.h"
#include "tier/disk_tier.h"

namespace hinge {
namespace {

using testing::load_or_die;
using testing::seeded_request;
using testing::shared_path;

using testing::Outcome;
Outcome generate(Engine& e, GenerateRequest r) { return testing::generate_outcome(e, std::move(r)); }

const auto config = &testing::small_kv_engine_config;

std::unique_ptr<tier::DiskTier> disk_for(Engine& e, const std::string& dir) {
  std::array<uint8_t, 32> secret{};
  secret.fill(0x42);
  tier::BlockFormat f;
  f.fingerprint = e.stats().kv_fingerprint;
  f.block_size = e.config().block_size;
  f.num_groups = e.kv_spec().num_groups();
  f.bytes_per_block = e.kv_tier_block_bytes();
  auto t = tier::DiskTier::open({.dir = dir, .capacity_bytes = 64 << 20},
                                std::make_shared<const tier::BlockSealer>(secret, f));
  EXPECT_TRUE(t.ok()) << t.status().message();
  EXPECT_TRUE(e.attach_kv_tier(t->get()).ok());
  return std::move(t).value();
}

class KvTierEngine : public ::testing::TestWithParam<KvDtype> {};

TEST_P(KvTierEngine, RestoredBlocksHitAndContinueBitIdentically) {
  auto m = load_or_die(shared_path("models/stories260K.gguf"));
  const std::string dir = testing::temp_dir() + "/kv";
  // An 81-token prompt (80 computed as prefill: 5 full blocks), then the same prompt and one
  // more token. The reference, an engine without a tier, computes the second from scratch: the
  // prefill computes each token's K and V as the first request did, so restored blocks must
  // give the very same logprobs.
  GenerateRequest first = seeded_request(7, 81, 1);
  GenerateRequest next = seeded_request(8, 1, 24);
  next.prompt_token_ids = first.prompt_token_ids;
  next.prompt_token_ids.push_back(42);
  auto ref = Engine::create(*m, nullptr, config(GetParam())).value();
  const Outcome want = generate(*ref, next);
  EXPECT_EQ(want.usage.cached_tokens, 0);

  auto a = Engine::create(*m, nullptr, config(GetParam())).value();
  auto disk = disk_for(*a, dir);
  generate(*a, first);
  a->flush_kv_tier();
  EXPECT_EQ(disk->counters().puts, 5);  // (81 - 1) / 16 full blocks computed
  a->reset_prefix_cache();              // evicted from RAM: only the disk has them
  const Outcome got = generate(*a, next);
  EXPECT_EQ(got.usage.cached_tokens, 80);
  EXPECT_EQ(a->stats().kv_tier_restored_blocks, 5);
  EXPECT_EQ(got.tokens, want.tokens);
  EXPECT_EQ(got.logprobs, want.logprobs);  // the same bytes: bit-identical
  a.reset();
  disk.reset();

  // A restarted engine with the same secret hits from disk.
  auto b = Engine::create(*m, nullptr, config(GetParam())).value();
  auto disk_b = disk_for(*b, dir);
  EXPECT_GE(disk_b->counters().entries, 5);
  const Outcome again = generate(*b, next);
  EXPECT_EQ(again.usage.cached_tokens, 80);
  EXPECT_EQ(again.logprobs, want.logprobs);
  b.reset();  // the engine first: its tier worker may still be writing to the store
}

INSTANTIATE_TEST_SUITE_P(Dtypes, KvTierEngine,
                         ::testing::Values(KvDtype::kF32, KvDtype::kF16, KvDtype::kInt8));

TEST(KvTierEngineErrors, TamperedFileIsRecomputedAndBadSetupsRefused) {
  auto m = load_or_die(shared_path("models/stories260K.gguf"));
  const std::string dir = testing::temp_dir() + "/kv";
  auto a = Engine::create(*m, nullptr, config(KvDtype::kF16)).value();
  auto disk = disk_for(*a, dir);
  GenerateRequest r = seeded_request(3, 70, 10);
  const Outcome want = generate(*a, r);
  a->flush_kv_tier();
  ASSERT_EQ(disk->counters().puts, 4);  // 79 tokens computed
  // Flip a byte of every file: each is refused when read, and removed.
  for (const auto& f : std::filesystem::directory_iterator(dir)) {
    std::fstream io(f.path(), std::ios::in | std::ios::out | std::ios::binary);
    io.seekp(-3, std::ios::end);
    io.put('\x7f');
  }
  a->reset_prefix_cache();
  const Outcome got = generate(*a, r);
  EXPECT_EQ(got.usage.cached_tokens, 0);
  EXPECT_EQ(got.tokens, want.tokens);
  EXPECT_EQ(disk->counters().rejected, 1);  // the chain stops at its first refused block
  EXPECT_EQ(a->stats().kv_tier_restored_blocks, 0);

  EngineConfig off = config(KvDtype::kF16);
  off.enable_prefix_cache = false;
  auto c = Engine::create(*m, nullptr, off).value();
  EXPECT_FALSE(c->attach_kv_tier(disk.get()).ok());
  a.reset();  // the engine first: its tier worker may still be writing to the store
}

}  // namespace
}  // namespace hinge
