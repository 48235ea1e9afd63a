// KvArena sizing (issue 13, third trap): num_blocks x bytes_per_block, and bytes_per_block
// itself, are checked for int64 overflow before they are computed, with an error naming the
// sizes, instead of a signed multiply (undefined behaviour) checked afterwards.
#include "kv/kv_arena.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>

namespace hinge::kv {
namespace {

KvSpec llama3_8b() {
  return KvSpec{.n_layers = 32, .n_kv_heads = 8, .head_dim = 128, .k_dtype = KvDtype::kF16,
                .v_dtype = KvDtype::kF16, .block_size_tokens = 16};
}

TEST(KvArena, SmallArenaHasTheSpecGeometry) {
  auto a = KvArena::create(llama3_8b(), 3);
  ASSERT_TRUE(a.ok()) << a.status().message();
  EXPECT_EQ(a->bytes_per_block(), llama3_8b().bytes_per_block());
  EXPECT_EQ(a->bytes(), 3 * llama3_8b().bytes_per_block());
  EXPECT_EQ(a->num_blocks(), 3);
}

TEST(KvArena, BlockCountThatOverflowsInt64IsAnError) {
  const int64_t per_block = llama3_8b().bytes_per_block();  // 2 MiB
  const int64_t max = std::numeric_limits<int64_t>::max();
  for (const int64_t blocks : {max / per_block + 1, max / 2, max}) {
    auto a = KvArena::create(llama3_8b(), blocks);
    ASSERT_FALSE(a.ok()) << blocks;
    EXPECT_NE(a.status().message().find("overflow"), std::string::npos) << a.status().message();
  }
  // Just under the limit does not overflow: the mapping is refused instead (or, with
  // MAP_NORESERVE on a huge address space, it might succeed); either way no overflow error.
  auto under = KvArena::create(llama3_8b(), max / per_block);
  if (!under.ok()) {
    EXPECT_EQ(under.status().message().find("overflow"), std::string::npos);
  }
}

TEST(KvArena, BlockSizeThatOverflowsInt64IsAnError) {
  KvSpec s;
  s.n_layers = std::numeric_limits<int32_t>::max();
  s.n_kv_heads = std::numeric_limits<int32_t>::max();
  s.head_dim = 1 << 20;
  s.k_dtype = s.v_dtype = KvDtype::kF32;
  s.block_size_tokens = 1 << 20;
  auto a = KvArena::create(s, 1);
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.status().message().find("overflow"), std::string::npos) << a.status().message();
}

}  // namespace
}  // namespace hinge::kv
