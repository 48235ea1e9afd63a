// BlockPool: allocation order, ref counts, LRU free list, cached-hash revival and eviction.
#include <gtest/gtest.h>

#include <vector>

#include "kv/block_pool.h"

namespace hinge::kv {
namespace {

std::vector<BlockId> ids(std::initializer_list<int32_t> v) {
  std::vector<BlockId> out;
  for (int32_t x : v) out.push_back(BlockId(x));
  return out;
}

#define EXPECT_INVARIANTS(pool)             \
  do {                                      \
    Status _st = (pool).check_invariants(); \
    EXPECT_TRUE(_st.ok()) << _st.message(); \
  } while (0)

TEST(KvBlockPool, AllocateFreeLruAndRevive) {
  BlockPool pool(6, 4);
  EXPECT_INVARIANTS(pool);
  EXPECT_EQ(pool.free_list(), ids({0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(pool.render_map(), "......\n");

  EXPECT_EQ(pool.allocate(2), ids({0, 1}));
  EXPECT_EQ(pool.allocate(3), ids({2, 3, 4}));
  EXPECT_INVARIANTS(pool);
  EXPECT_EQ(pool.free_list(), ids({5}));
  EXPECT_TRUE(pool.can_allocate(1));
  EXPECT_FALSE(pool.can_allocate(2));
  EXPECT_EQ(pool.generation(BlockId(0)), 1u);

  const std::vector<int32_t> a = {1, 2, 3, 4}, b = {5, 6, 7, 8};
  const BlockParent root{-1, 9};
  EXPECT_EQ(pool.cache_block(BlockId(0), BlockHash{10}, root, a), BlockId(0));
  const BlockParent p0 = pool.as_parent(BlockId(0));
  EXPECT_EQ(p0, (BlockParent{0, 1}));
  EXPECT_EQ(pool.cache_block(BlockId(1), BlockHash{11}, p0, b), BlockId(1));
  EXPECT_EQ(pool.cache_block(BlockId(1), BlockHash{11}, p0, b), BlockId(1));  // no-op
  EXPECT_INVARIANTS(pool);

  // A request's blocks are freed last-to-first: the tail lands before the head in the LRU.
  pool.free(ids({1, 0}));
  EXPECT_INVARIANTS(pool);
  EXPECT_EQ(pool.free_list(), ids({5, 1, 0}));
  EXPECT_EQ(pool.render_map(), "cc###.\n");
  BlockPoolCounters c = pool.counters();
  EXPECT_EQ(c.num_free_blocks, 3);
  EXPECT_EQ(c.num_used_blocks, 3);
  EXPECT_EQ(c.num_cached_free_blocks, 2);
  EXPECT_EQ(c.num_evictions, 0);

  // Lookup needs hash, parent and tokens to agree.
  EXPECT_EQ(pool.lookup(BlockHash{10}, root, a), BlockId(0));
  EXPECT_EQ(pool.lookup(BlockHash{11}, p0, b), BlockId(1));
  EXPECT_EQ(pool.lookup(BlockHash{10}, root, b), std::nullopt);
  EXPECT_EQ(pool.lookup(BlockHash{10}, BlockParent{-1, 8}, a), std::nullopt);
  EXPECT_EQ(pool.lookup(BlockHash{12}, root, a), std::nullopt);

  // A hit revives block 1 from the middle of the free list (O(1) unlink).
  pool.ref(BlockId(1));
  EXPECT_INVARIANTS(pool);
  EXPECT_EQ(pool.free_list(), ids({5, 0}));
  EXPECT_EQ(pool.ref_count(BlockId(1)), 1);
  EXPECT_EQ(pool.cached_hash(BlockId(1)), BlockHash{11});
  EXPECT_EQ(pool.render_map(3), "c##\n##.\n");

  // Allocation takes 5 (no hash) then 0, evicting 0's hash.
  EXPECT_EQ(pool.allocate(2), ids({5, 0}));
  EXPECT_INVARIANTS(pool);
  c = pool.counters();
  EXPECT_EQ(c.num_evictions, 1);
  EXPECT_EQ(c.num_free_blocks, 0);
  EXPECT_EQ(c.num_cached_free_blocks, 0);
  EXPECT_EQ(pool.cached_hash(BlockId(0)), std::nullopt);
  EXPECT_EQ(pool.lookup(BlockHash{10}, root, a), std::nullopt);
  EXPECT_EQ(pool.generation(BlockId(0)), 2u);
  // Block 1 is still cached, but its parent incarnation (0, gen 1) is gone: unreachable.
  EXPECT_EQ(pool.lookup(BlockHash{11}, pool.as_parent(BlockId(0)), b), std::nullopt);
}

TEST(KvBlockPool, SharedCountsAndDuplicates) {
  BlockPool pool(4, 2);
  EXPECT_EQ(pool.allocate(2), ids({0, 1}));
  pool.ref(BlockId(0));
  pool.ref(BlockId(0));
  EXPECT_EQ(pool.ref_count(BlockId(0)), 3);
  EXPECT_EQ(pool.counters().num_shared_blocks, 1);
  EXPECT_EQ(pool.render_map(), "S#..\n");
  EXPECT_INVARIANTS(pool);

  const std::vector<int32_t> a = {1, 2}, b = {3, 4};
  const BlockParent root{-1, 0};
  EXPECT_EQ(pool.cache_block(BlockId(0), BlockHash{5}, root, a), BlockId(0));
  // Same content computed into block 1: the cache keeps block 0 and says so.
  EXPECT_EQ(pool.cache_block(BlockId(1), BlockHash{5}, root, a), BlockId(0));
  // Same hash, other tokens: a collision, rejected.
  EXPECT_EQ(pool.cache_block(BlockId(1), BlockHash{5}, root, b), std::nullopt);
  EXPECT_EQ(pool.cached_hash(BlockId(1)), std::nullopt);
  EXPECT_INVARIANTS(pool);

  pool.free(ids({0, 0}));
  EXPECT_EQ(pool.counters().num_shared_blocks, 0);
  pool.free(ids({1, 0}));
  EXPECT_EQ(pool.free_list(), ids({2, 3, 1, 0}));
  EXPECT_EQ(pool.render_map(), "c...\n");
  EXPECT_INVARIANTS(pool);
}

TEST(KvBlockPoolDeathTest, MisuseAborts) {
  BlockPool pool(2, 4);
  EXPECT_DEATH(pool.allocate(3), "allocate\\(3\\) with 2 free blocks");
  EXPECT_DEATH(pool.free(ids({1})), "free of free block 1");
  EXPECT_DEATH(pool.ref(BlockId(2)), "block id 2 out of range");
}

}  // namespace
}  // namespace hinge::kv
