// Engine::export_prefix_kv / import_prefix_kv / wipe_kv_cache on a real model: a prefix's KV
// blocks carried into a fresh engine are prefix-cache hits there and continue exactly as in the
// engine that computed them (f32, f16, int8 and fp8 KV); bad byte counts are refused; a wipe
// leaves nothing cached.
#include <gtest/gtest.h>

#include "hinge/engine.h"
#include "model_test_util.h"

namespace hinge {
namespace {

using testing::load_or_die;
using testing::seeded_request;
using testing::shared_path;

using testing::Outcome;
Outcome generate(Engine& e, GenerateRequest r) { return testing::generate_outcome(e, std::move(r)); }

const auto config = &testing::small_kv_engine_config;

class KvTransfer : public ::testing::TestWithParam<KvDtype> {};

TEST_P(KvTransfer, ImportedBlocksHitAndContinueExactly) {
  auto m = load_or_die(shared_path("models/stories260K.gguf"));
  auto a = Engine::create(*m, nullptr, config(GetParam())).value();
  GenerateRequest first = seeded_request(7, 61, 20);
  const Outcome r1 = generate(*a, first);
  std::vector<int32_t> history = first.prompt_token_ids;
  history.insert(history.end(), r1.tokens.begin(), r1.tokens.end());  // 81 tokens, 80 computed

  std::vector<uint8_t> bytes;
  auto n = a->export_prefix_kv(history, CacheScope{}, &bytes);
  ASSERT_TRUE(n.ok()) << n.status().message();
  EXPECT_EQ(*n, 5);  // (81 - 1) / 16 full blocks computed
  EXPECT_EQ(static_cast<int64_t>(bytes.size()), *n * a->stats().kv_bytes_per_block);

  auto b = Engine::create(*m, nullptr, config(GetParam())).value();
  ASSERT_EQ(b->stats().kv_fingerprint, a->stats().kv_fingerprint);
  EXPECT_EQ(b->cached_prefix_blocks(history, CacheScope{}), 0);
  auto in = b->import_prefix_kv(history, CacheScope{}, bytes);
  ASSERT_TRUE(in.ok()) << in.status().message();
  EXPECT_EQ(*in, 5);
  EXPECT_EQ(b->cached_prefix_blocks(history, CacheScope{}), 5);
  // Importing again finds them cached and writes nothing.
  EXPECT_EQ(b->import_prefix_kv(history, CacheScope{}, bytes).value(), 5);
  EXPECT_EQ(b->stats().kv_blocks_used, 0);  // nothing held: cached and free

  GenerateRequest next = seeded_request(8, 1, 24);
  next.prompt_token_ids = history;
  next.prompt_token_ids.push_back(42);
  const Outcome on_a = generate(*a, next);
  const Outcome on_b = generate(*b, next);
  EXPECT_EQ(on_b.usage.cached_tokens, 80);
  EXPECT_EQ(on_a.usage.cached_tokens, 80);
  EXPECT_EQ(on_b.tokens, on_a.tokens);
  EXPECT_EQ(on_b.logprobs, on_a.logprobs);  // the same bytes: bit-identical

  // Another namespace does not see them.
  EXPECT_EQ(b->cached_prefix_blocks(history, CacheScope(CacheNamespace(99))), 0);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, KvTransfer,
                         ::testing::Values(KvDtype::kF32, KvDtype::kF16, KvDtype::kInt8,
                                           KvDtype::kFp8E4m3, KvDtype::kInt4));

TEST(KvTransferErrors, BadByteCountsAreRefusedAndWipeEmptiesTheCache) {
  auto m = load_or_die(shared_path("models/stories260K.gguf"));
  auto e = Engine::create(*m, nullptr, config(KvDtype::kF16)).value();
  GenerateRequest r = seeded_request(3, 40, 9);
  generate(*e, r);
  std::vector<uint8_t> bytes;
  ASSERT_EQ(e->export_prefix_kv(r.prompt_token_ids, CacheScope{}, &bytes).value(), 2);
  const int64_t per = e->stats().kv_bytes_per_block;
  auto odd = e->import_prefix_kv(r.prompt_token_ids, CacheScope{},
                                 std::span<const uint8_t>(bytes.data(), bytes.size() - 1));
  EXPECT_FALSE(odd.ok());
  EXPECT_NE(odd.status().message().find("whole number"), std::string::npos);
  std::vector<int32_t> short_prompt(r.prompt_token_ids.begin(), r.prompt_token_ids.begin() + 20);
  auto too_many = e->import_prefix_kv(short_prompt, CacheScope{}, bytes);
  EXPECT_FALSE(too_many.ok());
  EXPECT_NE(too_many.status().message().find("2 blocks for 20 tokens"), std::string::npos);
  EXPECT_EQ(e->import_prefix_kv(short_prompt, CacheScope{},
                                std::span<const uint8_t>(bytes.data(), static_cast<size_t>(per)))
                .value(), 1);

  EXPECT_EQ(e->cached_prefix_blocks(r.prompt_token_ids, CacheScope{}), 2);
  const int64_t zeroed = e->wipe_kv_cache();
  EXPECT_EQ(zeroed, int64_t{e->stats().kv_blocks_total} * per);
  EXPECT_EQ(e->cached_prefix_blocks(r.prompt_token_ids, CacheScope{}), 0);
  std::vector<uint8_t> after;
  EXPECT_EQ(e->export_prefix_kv(r.prompt_token_ids, CacheScope{}, &after).value(), 0);
  // The engine still works after a wipe.
  EXPECT_EQ(generate(*e, r).tokens.size(), 9u);
}

}  // namespace
}  // namespace hinge
