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
  const BlockHash root{9, 0}, h0{10, 0}, h1{11, 0};
  pool.cache_block(BlockId(0), h0, root, a);
  pool.cache_block(BlockId(1), h1, h0, b);
  pool.cache_block(BlockId(1), h1, h0, b);  // no-op
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

  // Lookup needs hash, parent hash and tokens to agree.
  EXPECT_EQ(pool.lookup(h0, root, a), BlockId(0));
  EXPECT_EQ(pool.lookup(h1, h0, b), BlockId(1));
  EXPECT_EQ(pool.lookup(h0, root, b), std::nullopt);
  EXPECT_EQ(pool.lookup(h0, BlockHash{8, 0}, a), std::nullopt);
  EXPECT_EQ(pool.lookup(BlockHash{12, 0}, root, a), std::nullopt);

  // A hit revives block 1 from the middle of the free list (O(1) unlink).
  pool.ref(BlockId(1));
  EXPECT_INVARIANTS(pool);
  EXPECT_EQ(pool.free_list(), ids({5, 0}));
  EXPECT_EQ(pool.ref_count(BlockId(1)), 1);
  EXPECT_EQ(pool.cached_hash(BlockId(1)), h1);
  EXPECT_EQ(pool.render_map(3), "c##\n##.\n");

  // Allocation takes 5 (no hash) then 0, evicting 0's hash.
  EXPECT_EQ(pool.allocate(2), ids({5, 0}));
  EXPECT_INVARIANTS(pool);
  c = pool.counters();
  EXPECT_EQ(c.num_evictions, 1);
  EXPECT_EQ(c.num_free_blocks, 0);
  EXPECT_EQ(c.num_cached_free_blocks, 0);
  EXPECT_EQ(pool.cached_hash(BlockId(0)), std::nullopt);
  EXPECT_EQ(pool.lookup(h0, root, a), std::nullopt);
  EXPECT_EQ(pool.generation(BlockId(0)), 2u);
  // Block 1 is still cached under its content identity: it does not depend on block 0.
  EXPECT_EQ(pool.lookup(h1, h0, b), BlockId(1));
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
  const BlockHash root{0, 0}, h{5, 0};
  pool.cache_block(BlockId(0), h, root, a);
  // Same content computed into block 1: both are cached (a duplicate, as vLLM keeps them).
  pool.cache_block(BlockId(1), h, root, a);
  EXPECT_EQ(pool.cached_hash(BlockId(1)), h);
  EXPECT_TRUE(pool.lookup(h, root, a));
  EXPECT_INVARIANTS(pool);
  // Block 0 evicted or uncached: its duplicate still serves the content.
  pool.uncache(BlockId(0));
  EXPECT_EQ(pool.lookup(h, root, a), BlockId(1));
  EXPECT_INVARIANTS(pool);
  // Same hash, other tokens (a collision): cached too, and told apart by the tokens.
  pool.cache_block(BlockId(0), h, root, b);
  EXPECT_EQ(pool.lookup(h, root, a), BlockId(1));
  EXPECT_EQ(pool.lookup(h, root, b), BlockId(0));
  EXPECT_INVARIANTS(pool);
  pool.uncache(BlockId(1));
  EXPECT_EQ(pool.lookup(h, root, a), std::nullopt);
  EXPECT_INVARIANTS(pool);

  pool.free(ids({0, 0}));
  EXPECT_EQ(pool.counters().num_shared_blocks, 0);
  pool.free(ids({1, 0}));  // 1 holds nothing cached: to the head, reused first
  EXPECT_EQ(pool.free_list(), ids({1, 2, 3, 0}));
  EXPECT_EQ(pool.render_map(), "c...\n");  // block 0 (content b) stays cached
  EXPECT_INVARIANTS(pool);
}

// The index under heavy collisions: every key in one probe cluster, erased in random order.
TEST(KvBlockHashIndex, CollidingKeysInsertFindEraseWithoutAllocating) {
  BlockHashIndex index(64);
  std::vector<std::pair<BlockHash, int32_t>> live;
  for (int32_t b = 0; b < 64; ++b) {
    const BlockHash k{static_cast<uint64_t>(b % 3) << 7, static_cast<uint64_t>(b % 5)};
    index.insert(k, b);
    live.push_back({k, b});
  }
  EXPECT_EQ(index.size(), 64u);
  uint64_t x = 12345;
  while (!live.empty()) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    const size_t i = static_cast<size_t>(x >> 33) % live.size();
    EXPECT_TRUE(index.erase(live[i].first, live[i].second));
    EXPECT_FALSE(index.erase(live[i].first, live[i].second));
    live.erase(live.begin() + static_cast<ptrdiff_t>(i));
    for (const auto& [k, b] : live) ASSERT_TRUE(index.contains(k, b)) << b;
    EXPECT_EQ(index.size(), live.size());
  }
}

TEST(KvBlockPoolDeathTest, MisuseAborts) {
  BlockPool pool(2, 4);
  EXPECT_DEATH(pool.allocate(3), "allocate\\(3\\) with 2 free blocks");
  EXPECT_DEATH(pool.free(ids({1})), "free of free block 1");
  EXPECT_DEATH(pool.ref(BlockId(2)), "block id 2 out of range");
}

}  // namespace
}  // namespace hinge::kv
