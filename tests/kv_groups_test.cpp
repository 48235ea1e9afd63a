// KV groups (kv/kv_spec.h): the spec's partition of the layers, what a block and a token cost
// with groups, and where each layer's KV lies in a block of its group.
#include <gtest/gtest.h>

#include <vector>

#include "kv/kv_arena.h"
#include "kv/kv_spec.h"

namespace hinge::kv {
namespace {

KvSpec spec(int32_t n_layers, std::vector<KvGroup> groups = {}) {
  return KvSpec{.n_layers = n_layers, .n_kv_heads = 2, .head_dim = 8, .k_dtype = KvDtype::kF32,
                .v_dtype = KvDtype::kF16, .block_size_tokens = 4, .groups = std::move(groups)};
}

TEST(KvGroups, SplitLayersIntoConsecutiveRanges) {
  EXPECT_TRUE(KvSpec::split_layers(5, 1).empty());
  const auto g = KvSpec::split_layers(5, 2);
  ASSERT_EQ(g.size(), 2u);
  EXPECT_EQ(g[0].layers, (std::vector<int32_t>{0, 1, 2}));
  EXPECT_EQ(g[1].layers, (std::vector<int32_t>{3, 4}));
  const auto five = KvSpec::split_layers(5, 5);
  ASSERT_EQ(five.size(), 5u);
  for (int32_t i = 0; i < 5; ++i) EXPECT_EQ(five[static_cast<size_t>(i)].layers, std::vector<int32_t>{i});
}

TEST(KvGroups, OneGroupCostsWhatTheLayersCost) {
  const KvSpec one = spec(5);
  ASSERT_TRUE(one.validate().ok());
  EXPECT_EQ(one.num_groups(), 1);
  EXPECT_EQ(one.layers_per_block(), 5);
  const int64_t layer_token = 2 * (8 * 4 + 8 * 2);  // heads x (f32 K + f16 V)
  EXPECT_EQ(one.bytes_per_layer_token(), layer_token);
  EXPECT_EQ(one.bytes_per_token(), 5 * layer_token);
  EXPECT_EQ(one.bytes_per_block(), 4 * 5 * layer_token);
  EXPECT_EQ(one.num_blocks_for_tokens(9), 3);
  for (int32_t l = 0; l < 5; ++l) {
    EXPECT_EQ(one.group_of_layer(l), 0);
    EXPECT_EQ(one.index_in_group(l), l);
  }
}

TEST(KvGroups, UnequalGroupsPadTheirBlocksToTheLargest) {
  const KvSpec s = spec(5, KvSpec::split_layers(5, 2));  // {0, 1, 2}, {3, 4}
  ASSERT_TRUE(s.validate().ok()) << s.validate().message();
  EXPECT_EQ(s.num_groups(), 2);
  EXPECT_EQ(s.layers_per_block(), 3);
  const int64_t layer_token = s.bytes_per_layer_token();
  EXPECT_EQ(s.bytes_per_block(), 4 * 3 * layer_token);
  EXPECT_EQ(s.bytes_per_token(), 2 * 3 * layer_token);  // a 6th layer's room is unused
  EXPECT_EQ(s.num_blocks_for_tokens(9), 6);               // 3 blocks in each group
  EXPECT_EQ(s.bytes_for_tokens(9), 6 * s.bytes_per_block());
  EXPECT_EQ(s.group_of_layer(2), 0);
  EXPECT_EQ(s.group_of_layer(3), 1);
  EXPECT_EQ(s.index_in_group(3), 0);
  EXPECT_EQ(s.index_in_group(4), 1);
  EXPECT_EQ(s.num_blocks_in_budget(10 * s.bytes_per_block() + 1), 10);
}

TEST(KvGroups, ValidateNamesWhatIsWrong) {
  auto error = [](const KvSpec& s) { return s.validate().message(); };
  EXPECT_NE(error(spec(3, {{{0, 1}}})).find("layer 2 is in no KV group"), std::string::npos);
  EXPECT_NE(error(spec(3, {{{0, 1}}, {{1, 2}}})).find("layer 1 is in KV groups 0 and 1"),
            std::string::npos);
  EXPECT_NE(error(spec(3, {{{0, 1, 2}}, {}})).find("KV group 1 has no layers"), std::string::npos);
  EXPECT_NE(error(spec(3, {{{0, 1, 3}}})).find("outside [0, 3)"), std::string::npos);
  EXPECT_NE(error(spec(3, {{{1, 0, 2}}})).find("out of order"), std::string::npos);
  EXPECT_TRUE(spec(3, {{{0, 2}}, {{1}}}).validate().ok());  // not consecutive: fine
  // The arena refuses such a spec with the same message.
  auto a = KvArena::create(spec(3, {{{0, 1}}}), 4);
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.status().message().find("layer 2 is in no KV group"), std::string::npos);
}

TEST(KvGroups, ArenaPlacesEachLayerAtItsIndexInItsGroup) {
  const KvSpec s = spec(5, {{{0, 2, 4}}, {{1, 3}}});
  auto a = KvArena::create(s, 6);
  ASSERT_TRUE(a.ok()) << a.status().message();
  EXPECT_EQ(a->bytes_per_block(), s.bytes_per_block());
  EXPECT_EQ(a->bytes(), 6 * s.bytes_per_block());
  const int64_t lb = a->layer_bytes();
  EXPECT_EQ(lb, 4 * s.bytes_per_layer_token());
  const int32_t want_group[] = {0, 1, 0, 1, 0};
  const int64_t want_index[] = {0, 0, 1, 1, 2};
  for (int32_t l = 0; l < 5; ++l) {
    EXPECT_EQ(a->group_of_layer(l), want_group[l]) << l;
    EXPECT_EQ(a->k_offset(l), want_index[l] * lb) << l;
    EXPECT_EQ(a->v_offset(l), want_index[l] * lb + 4 * 2 * a->k_row_bytes()) << l;
  }
}

}  // namespace
}  // namespace hinge::kv
