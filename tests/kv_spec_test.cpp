// KvSpec sizing, dtype table, block hashing and block-table slot mapping.
#include "kv/kv_spec.h"

#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "kv/block_hash.h"
#include "kv/block_table.h"

namespace hinge::kv {
namespace {

KvSpec llama3_8b(KvDtype dtype) {
  return KvSpec{
      .n_layers = 32, .n_kv_heads = 8, .head_dim = 128, .k_dtype = dtype, .v_dtype = dtype, .block_size_tokens = 16};
}

TEST(KvSpec, SizesF16Llama3) {
  const KvSpec s = llama3_8b(KvDtype::kF16);
  ASSERT_TRUE(s.validate().ok());
  EXPECT_EQ(s.bytes_per_token(), 131072);  // 2 * 32 * 8 * 128 * 2
  EXPECT_EQ(s.bytes_per_block(), 2097152);
  EXPECT_EQ(s.num_blocks_for_tokens(0), 0);
  EXPECT_EQ(s.num_blocks_for_tokens(1), 1);
  EXPECT_EQ(s.num_blocks_for_tokens(16), 1);
  EXPECT_EQ(s.num_blocks_for_tokens(17), 2);
  EXPECT_EQ(s.num_blocks_for_tokens(100), 7);
  EXPECT_EQ(s.bytes_for_tokens(100), 7 * 2097152);
  EXPECT_EQ(s.num_blocks_in_budget(int64_t{1} << 30), 512);
  EXPECT_EQ(s.num_blocks_in_budget(2097151), 0);
  EXPECT_EQ(s.num_blocks_in_budget(2097152 * 3 + 5), 3);
  EXPECT_EQ(s.num_blocks_in_budget(-1), 0);
}

TEST(KvSpec, DtypeBytesIncludeScales) {
  EXPECT_EQ(kv_dtype_head_bytes(KvDtype::kF32, 128), 512);
  EXPECT_EQ(kv_dtype_head_bytes(KvDtype::kF16, 128), 256);
  EXPECT_EQ(kv_dtype_head_bytes(KvDtype::kBf16, 128), 256);
  EXPECT_EQ(kv_dtype_head_bytes(KvDtype::kFp8E4m3, 128), 128);
  EXPECT_EQ(kv_dtype_head_bytes(KvDtype::kFp8E5m2, 128), 128);
  EXPECT_EQ(kv_dtype_head_bytes(KvDtype::kInt8, 128), 130);
  EXPECT_EQ(kv_dtype_head_bytes(KvDtype::kInt4, 128), 66);
  EXPECT_EQ(kv_dtype_head_bytes(KvDtype::kInt4, 5), 5);  // 3 packed bytes + 2 scale bytes
  EXPECT_DOUBLE_EQ(kv_dtype_bytes_per_element(KvDtype::kInt8, 128), 1.015625);
  EXPECT_DOUBLE_EQ(kv_dtype_bytes_per_element(KvDtype::kInt4, 128), 0.515625);
  EXPECT_DOUBLE_EQ(kv_dtype_bytes_per_element(KvDtype::kBf16, 64), 2.0);
  EXPECT_EQ(llama3_8b(KvDtype::kInt8).bytes_per_token(), 66560);  // 2 * 32 * 8 * 130
  EXPECT_EQ(llama3_8b(KvDtype::kInt4).bytes_per_block(), 2 * 32 * 8 * 66 * 16);
}

TEST(KvSpec, DtypeNamesRoundTrip) {
  for (KvDtype d : {KvDtype::kF32, KvDtype::kF16, KvDtype::kBf16, KvDtype::kFp8E4m3,
                    KvDtype::kFp8E5m2, KvDtype::kInt8, KvDtype::kInt4}) {
    EXPECT_EQ(parse_kv_dtype(kv_dtype_name(d)), d);
  }
  EXPECT_EQ(kv_dtype_name(KvDtype::kFp8E4m3), "fp8_e4m3");
  EXPECT_EQ(parse_kv_dtype("q8_0"), std::nullopt);
}

TEST(KvSpec, ValidateNamesTheField) {
  KvSpec s = llama3_8b(KvDtype::kF16);
  s.n_layers = 0;
  EXPECT_EQ(s.validate().message(), "kv spec: n_layers must be positive, got 0");
  s = llama3_8b(KvDtype::kF16);
  s.block_size_tokens = -4;
  EXPECT_EQ(s.validate().message(), "kv spec: block_size_tokens must be positive, got -4");
}

TEST(KvBlockHash, ChainedAndNamespaced) {
  std::vector<int32_t> t(10);
  std::iota(t.begin(), t.end(), 100);
  const CacheNamespace ns(7);
  const auto h = hash_full_blocks(ns, t, 4);
  ASSERT_EQ(h.size(), 2u);  // only full blocks
  const BlockHash root = namespace_root_hash(ns);
  EXPECT_EQ(h[0], hash_block_tokens(root, std::span<const int32_t>(t).subspan(0, 4)));
  EXPECT_EQ(h[1], hash_block_tokens(h[0], std::span<const int32_t>(t).subspan(4, 4)));
  EXPECT_NE(h[0], h[1]);
  EXPECT_EQ(hash_full_blocks(ns, t, 4), h);  // deterministic
  // Another namespace changes every hash.
  const auto other = hash_full_blocks(CacheNamespace(8), t, 4);
  EXPECT_NE(other[0], h[0]);
  EXPECT_NE(other[1], h[1]);
  // A change in block 1 keeps H_0 and changes H_1; a change in block 0 changes both.
  auto t2 = t;
  t2[5] = 0;
  EXPECT_EQ(hash_full_blocks(ns, t2, 4)[0], h[0]);
  EXPECT_NE(hash_full_blocks(ns, t2, 4)[1], h[1]);
  t2 = t;
  t2[0] = 0;
  EXPECT_NE(hash_full_blocks(ns, t2, 4)[1], h[1]);
  const char a[] = "tenant-a/v1";
  const char b[] = "tenant-b/v1";
  EXPECT_EQ(CacheNamespace::from_string(a, 11), CacheNamespace::from_string(a, 11));
  EXPECT_NE(CacheNamespace::from_string(a, 11), CacheNamespace::from_string(b, 11));
}

TEST(KvBlockTable, SlotMapping) {
  BlockTable t;
  t.push_back(BlockId(7));
  t.push_back(BlockId(3));
  t.push_back(BlockId(12));
  EXPECT_EQ(t.num_blocks(), 3);
  EXPECT_EQ(t.slot(0, 16), 112);
  EXPECT_EQ(t.slot(15, 16), 127);
  EXPECT_EQ(t.slot(16, 16), 48);
  EXPECT_EQ(t.slot(17, 16), 49);
  EXPECT_EQ(t.slot(39, 16), 199);
  t.set(1, BlockId(0));
  EXPECT_EQ(t.slot(17, 16), 1);
  EXPECT_EQ(t.back(), BlockId(12));
}

}  // namespace
}  // namespace hinge::kv
