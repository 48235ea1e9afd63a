// KvCacheManager scenarios: exact block ids, ref counts and eviction order after each step.
#include "kv/kv_cache_manager.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <numeric>
#include <vector>

namespace hinge::kv {
namespace {

std::vector<BlockId> vec(std::span<const BlockId> s) { return {s.begin(), s.end()}; }
std::vector<BlockCopy> vec(std::span<const BlockCopy> s) { return {s.begin(), s.end()}; }

std::vector<BlockId> ids(std::initializer_list<int32_t> v) {
  std::vector<BlockId> out;
  for (int32_t x : v) out.push_back(BlockId(x));
  return out;
}
std::vector<BlockId> id_range(int32_t first, int32_t n) {
  std::vector<BlockId> out;
  for (int32_t i = 0; i < n; ++i) out.push_back(BlockId(first + i));
  return out;
}
std::vector<BlockId> table(const KvCacheManager& m, uint64_t id) {
  const auto b = m.block_table(RequestId(id)).blocks();
  return {b.begin(), b.end()};
}
std::vector<int32_t> tokens(int32_t first, int32_t n) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  std::iota(t.begin(), t.end(), first);
  return t;
}
std::vector<int32_t> concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

#define EXPECT_INVARIANTS(m)                \
  do {                                      \
    Status _st = (m).check_invariants();    \
    ASSERT_TRUE(_st.ok()) << _st.message(); \
  } while (0)

constexpr CacheNamespace kNs{1};

// Adds request `id`, adopts its prefix hit and reserves the rest of the prompt; the prompt is
// then "computed" and its full blocks cached. Returns the number of cached (hit) tokens.
int32_t admit(KvCacheManager& m, uint64_t id, const std::vector<int32_t>& prompt,
              CacheNamespace ns = kNs) {
  m.add_request(RequestId(id), ns);
  const ComputedBlocks hit = m.get_computed_blocks(prompt, ns);
  const int32_t n = static_cast<int32_t>(prompt.size());
  auto alloc = m.allocate_slots(RequestId(id), n - hit.num_cached_tokens, &hit);
  EXPECT_TRUE(alloc.has_value());
  m.cache_full_blocks(RequestId(id), prompt, n);
  return hit.num_cached_tokens;
}

TEST(KvCacheManager, AllocateShareFreeRevive) {
  KvCacheManager m({.num_blocks = 8, .block_size_tokens = 4});
  const auto pa = tokens(100, 10);
  m.add_request(RequestId(1), kNs);
  const ComputedBlocks none = m.get_computed_blocks(pa, kNs);
  EXPECT_TRUE(none.blocks.empty());
  EXPECT_EQ(none.num_cached_tokens, 0);
  auto a = m.allocate_slots(RequestId(1), 10, &none);
  ASSERT_TRUE(a);
  EXPECT_EQ(vec(a->new_blocks), ids({0, 1, 2}));
  EXPECT_TRUE(a->copies.empty());
  EXPECT_EQ(m.num_tokens(RequestId(1)), 10);
  EXPECT_EQ(m.slot(RequestId(1), 5), 5);
  EXPECT_EQ(m.slot(RequestId(1), 9), 9);
  m.cache_full_blocks(RequestId(1), pa, 10);
  EXPECT_INVARIANTS(m);
  EXPECT_TRUE(m.pool().cached_hash(BlockId(0)));
  EXPECT_TRUE(m.pool().cached_hash(BlockId(1)));
  EXPECT_FALSE(m.pool().cached_hash(BlockId(2)));  // partial: never hashed

  // B shares A's two full blocks.
  const auto pb = concat(tokens(100, 8), {200, 201, 202});
  m.add_request(RequestId(2), kNs);
  const ComputedBlocks hit = m.get_computed_blocks(pb, kNs);
  EXPECT_EQ(hit.blocks, ids({0, 1}));
  EXPECT_EQ(hit.num_cached_tokens, 8);
  auto b = m.allocate_slots(RequestId(2), 3, &hit);
  ASSERT_TRUE(b);
  EXPECT_EQ(vec(b->new_blocks), ids({3}));
  EXPECT_EQ(table(m, 2), ids({0, 1, 3}));
  EXPECT_EQ(m.num_tokens(RequestId(2)), 11);
  EXPECT_EQ(m.pool().ref_count(BlockId(0)), 2);
  EXPECT_EQ(m.pool().ref_count(BlockId(1)), 2);
  EXPECT_EQ(m.pool().ref_count(BlockId(3)), 1);
  EXPECT_EQ(m.pool().render_map(), "SS##....\n");
  EXPECT_INVARIANTS(m);
  KvCacheStats s = m.stats();
  EXPECT_EQ(s.num_prefix_query_tokens, 21);
  EXPECT_EQ(s.num_prefix_hit_tokens, 8);
  EXPECT_EQ(s.pool.num_shared_blocks, 2);

  m.free(RequestId(1));  // releases 2 (partial, uncached: to the head), 1 and 0 drop to ref 1
  EXPECT_INVARIANTS(m);
  EXPECT_EQ(m.pool().free_list(), ids({2, 4, 5, 6, 7}));
  EXPECT_EQ(m.pool().render_map(), "##.#....\n");
  m.free(RequestId(2));  // 3 (partial: the head), then 1, 0 to the tail in that order
  EXPECT_INVARIANTS(m);
  EXPECT_EQ(m.pool().free_list(), ids({3, 2, 4, 5, 6, 7, 1, 0}));
  EXPECT_EQ(m.pool().render_map(), "cc......\n");
  EXPECT_EQ(m.stats().pool.num_cached_free_blocks, 2);

  // C (A's prompt again) revives 0 and 1 from the free list, then allocates from the head.
  m.add_request(RequestId(3), kNs);
  const ComputedBlocks hit2 = m.get_computed_blocks(pa, kNs);
  EXPECT_EQ(hit2.blocks, ids({0, 1}));
  auto c = m.allocate_slots(RequestId(3), 2, &hit2);
  ASSERT_TRUE(c);
  EXPECT_EQ(vec(c->new_blocks), ids({3}));
  EXPECT_EQ(table(m, 3), ids({0, 1, 3}));
  EXPECT_EQ(m.pool().free_list(), ids({2, 4, 5, 6, 7}));
  EXPECT_EQ(m.stats().pool.num_evictions, 0);
  EXPECT_INVARIANTS(m);
}

TEST(KvCacheManager, EvictionIsLruTailFirst) {
  KvCacheManager m({.num_blocks = 6, .block_size_tokens = 4});
  const auto pa = tokens(0, 13);
  EXPECT_EQ(admit(m, 1, pa), 0);
  EXPECT_EQ(table(m, 1), ids({0, 1, 2, 3}));
  m.free(RequestId(1));
  EXPECT_INVARIANTS(m);
  // 3 (partial, uncached) to the head; the cached 2, 1, 0 to the tail, last block first.
  EXPECT_EQ(m.pool().free_list(), ids({3, 4, 5, 2, 1, 0}));
  EXPECT_EQ(m.pool().render_map(), "ccc...\n");

  EXPECT_EQ(admit(m, 2, tokens(500, 12)), 0);  // takes 3, 4, 5: nothing cached to evict
  EXPECT_EQ(table(m, 2), ids({3, 4, 5}));
  EXPECT_EQ(m.stats().pool.num_evictions, 0);
  EXPECT_EQ(admit(m, 3, tokens(600, 2)), 0);  // takes 2: evicts A's last full block first
  EXPECT_EQ(table(m, 3), ids({2}));
  EXPECT_EQ(m.stats().pool.num_evictions, 1);
  EXPECT_INVARIANTS(m);
  EXPECT_EQ(m.get_computed_blocks(pa, kNs).blocks, ids({0, 1}));
  EXPECT_EQ(admit(m, 4, tokens(700, 3)), 0);  // takes 1
  EXPECT_EQ(m.stats().pool.num_evictions, 2);
  EXPECT_EQ(m.get_computed_blocks(pa, kNs).blocks, ids({0}));
  // 3 + 6 tokens = 3 blocks: 2 more, only block 0 is free.
  EXPECT_FALSE(m.allocate_slots(RequestId(4), 6).has_value());
  EXPECT_EQ(m.num_tokens(RequestId(4)), 3);
  EXPECT_EQ(m.get_computed_blocks(pa, kNs).num_cached_tokens, 4);  // nothing changed
  EXPECT_INVARIANTS(m);
}

TEST(KvCacheManager, Same100TokenPrefixHits96) {
  KvCacheManager m({.num_blocks = 64, .block_size_tokens = 16});
  const auto p = tokens(1000, 100);
  EXPECT_EQ(admit(m, 1, p), 0);
  EXPECT_EQ(table(m, 1), id_range(0, 7));
  m.add_request(RequestId(2), kNs);
  const ComputedBlocks hit = m.get_computed_blocks(p, kNs);
  EXPECT_EQ(hit.num_cached_tokens, 96);
  EXPECT_EQ(hit.blocks, id_range(0, 6));
  auto b = m.allocate_slots(RequestId(2), 4, &hit);
  ASSERT_TRUE(b);
  EXPECT_EQ(vec(b->new_blocks), ids({7}));
  EXPECT_EQ(table(m, 2), ids({0, 1, 2, 3, 4, 5, 7}));
  for (int32_t i = 0; i < 6; ++i) EXPECT_EQ(m.pool().ref_count(BlockId(i)), 2);
  EXPECT_EQ(m.pool().ref_count(BlockId(6)), 1);
  EXPECT_INVARIANTS(m);
  // A prompt of exactly 6 full blocks keeps its last block to compute: 80 tokens.
  EXPECT_EQ(m.get_computed_blocks(tokens(1000, 96), kNs).num_cached_tokens, 80);
  EXPECT_EQ(m.get_computed_blocks(tokens(1000, 97), kNs).num_cached_tokens, 96);
  EXPECT_EQ(m.get_computed_blocks(tokens(1000, 1), kNs).num_cached_tokens, 0);
}

TEST(KvCacheManager, MultiTurnReusesPreviousTurn) {
  KvCacheManager m({.num_blocks = 64, .block_size_tokens = 16});
  auto seq = tokens(0, 40);
  EXPECT_EQ(admit(m, 1, seq), 0);
  EXPECT_EQ(table(m, 1), ids({0, 1, 2}));
  // Decode a 10-token answer one token at a time.
  for (int32_t k = 0; k < 10; ++k) {
    seq.push_back(5000 + k);
    auto a = m.allocate_slots(RequestId(1), 1);
    ASSERT_TRUE(a);
    EXPECT_EQ(vec(a->new_blocks), k == 8 ? ids({3}) : ids({}));  // position 48 opens block 3
    m.cache_full_blocks(RequestId(1), seq, static_cast<int32_t>(seq.size()));
    EXPECT_INVARIANTS(m);
  }
  EXPECT_EQ(table(m, 1), ids({0, 1, 2, 3}));
  EXPECT_TRUE(m.pool().cached_hash(BlockId(2)));  // filled during decode
  m.free(RequestId(1));
  // Turn 2 = turn 1 prompt + answer + a new 20-token message.
  const auto turn2 = concat(seq, tokens(9000, 20));
  EXPECT_EQ(admit(m, 2, turn2), 48);
  // Block 3 (partial, uncached) went back to the head of the free list: reused first.
  EXPECT_EQ(table(m, 2), ids({0, 1, 2, 3, 4}));
  EXPECT_INVARIANTS(m);
}

TEST(KvCacheManager, EditedHistoryReusesBlocksBeforeTheEdit) {
  KvCacheManager m({.num_blocks = 16, .block_size_tokens = 4});
  auto p = tokens(0, 20);
  EXPECT_EQ(admit(m, 1, p), 0);
  p[13] = 777;  // inside block 3
  const ComputedBlocks hit = m.get_computed_blocks(p, kNs);
  EXPECT_EQ(hit.blocks, ids({0, 1, 2}));
  EXPECT_EQ(hit.num_cached_tokens, 12);
}

TEST(KvCacheManager, OtherNamespaceSharesNothing) {
  KvCacheManager m({.num_blocks = 16, .block_size_tokens = 4});
  const auto p = tokens(0, 20);
  EXPECT_EQ(admit(m, 1, p), 0);
  EXPECT_EQ(m.get_computed_blocks(p, CacheNamespace(2)).num_cached_tokens, 0);
  EXPECT_EQ(admit(m, 2, p, CacheNamespace(2)), 0);
  EXPECT_EQ(table(m, 2), id_range(5, 5));
  EXPECT_EQ(admit(m, 3, p, kNs), 16);
  EXPECT_INVARIANTS(m);
}

TEST(KvCacheManager, NoPrefixCacheMode) {
  KvCacheManager m({.num_blocks = 16, .block_size_tokens = 4, .enable_prefix_cache = false});
  const auto p = tokens(0, 20);
  EXPECT_EQ(admit(m, 1, p), 0);
  EXPECT_FALSE(m.pool().cached_hash(BlockId(0)));
  m.free(RequestId(1));  // nothing cached: all back to the head, reused first
  EXPECT_EQ(admit(m, 2, p), 0);
  EXPECT_EQ(table(m, 2), id_range(0, 5));
  EXPECT_EQ(m.stats().num_prefix_query_tokens, 40);
  EXPECT_EQ(m.stats().num_prefix_hit_tokens, 0);
  EXPECT_EQ(m.stats().pool.num_cached_free_blocks, 0);
  EXPECT_INVARIANTS(m);
}

// Every block at a given depth has the same hash whatever its tokens: H_i = H_{i-1} + 1.
BlockHash colliding_hash(BlockHash parent, std::span<const int32_t>) {
  return BlockHash{parent.lo + 1, parent.hi};
}

TEST(KvCacheManager, ForcedHashCollisionIsToldApartByTheTokens) {
  KvCacheManager m({.num_blocks = 16, .block_size_tokens = 4}, &colliding_hash);
  const auto x = tokens(0, 12);
  const auto y = tokens(100, 12);
  EXPECT_EQ(admit(m, 1, x), 0);
  // Same hashes as x, other tokens: no hit; y's blocks are cached under the same hashes.
  EXPECT_EQ(admit(m, 2, y), 0);
  EXPECT_EQ(table(m, 2), ids({3, 4, 5}));
  EXPECT_TRUE(m.pool().cached_hash(BlockId(3)));
  // x's first block, then other tokens: block 1's hash and parent match, its tokens do not.
  const auto z = concat(tokens(0, 4), tokens(204, 9));
  EXPECT_EQ(m.get_computed_blocks(z, kNs).blocks, ids({0}));
  // (What this hash cannot tell apart: x's block 0 followed by y's block 1 would match y's
  // block 1, cached under a parent hash equal to x's. The chain hash is the prefix's identity;
  // BLAKE2b-128 makes such a collision infeasible to find, see block_hash.h.)
  EXPECT_EQ(m.get_computed_blocks(concat(x, {1}), kNs).blocks, ids({0, 1, 2}));
  EXPECT_EQ(m.get_computed_blocks(concat(y, {1}), kNs).blocks, ids({3, 4, 5}));
  EXPECT_INVARIANTS(m);

  // Freed and revived, each still hits its own blocks.
  m.free(RequestId(2));
  m.free(RequestId(1));
  EXPECT_EQ(admit(m, 3, concat(y, {1})), 12);
  EXPECT_EQ(table(m, 3), ids({3, 4, 5, 6}));
  EXPECT_EQ(admit(m, 4, concat(x, {1})), 12);
  EXPECT_EQ(table(m, 4), ids({0, 1, 2, 7}));
  EXPECT_INVARIANTS(m);
}

TEST(KvCacheManager, DuplicatesComputedConcurrentlyAreBothCached) {
  KvCacheManager m({.num_blocks = 16, .block_size_tokens = 4});
  const auto p = tokens(0, 12);
  for (uint64_t id : {1, 2}) {  // both miss: neither has cached anything yet
    m.add_request(RequestId(id), kNs);
    const ComputedBlocks none = m.get_computed_blocks(p, kNs);
    EXPECT_EQ(none.num_cached_tokens, 0);
    ASSERT_TRUE(m.allocate_slots(RequestId(id), 12, &none));
  }
  EXPECT_EQ(table(m, 1), ids({0, 1, 2}));
  EXPECT_EQ(table(m, 2), ids({3, 4, 5}));
  m.cache_full_blocks(RequestId(1), p, 8);   // A has computed 2 blocks
  m.cache_full_blocks(RequestId(2), p, 12);  // B all 3: its first two duplicate A's
  m.cache_full_blocks(RequestId(1), p, 12);  // A's third duplicates B's
  EXPECT_INVARIANTS(m);
  for (int32_t b = 0; b < 6; ++b) EXPECT_TRUE(m.pool().cached_hash(BlockId(b))) << b;
  EXPECT_EQ(m.get_computed_blocks(concat(p, {1}), kNs).num_cached_tokens, 12);
  // A leaves and its copies are evicted: B's copies serve the whole prefix.
  m.free(RequestId(1));
  m.add_request(RequestId(3), kNs);
  ASSERT_TRUE(m.allocate_slots(RequestId(3), 4 * 13));  // takes every free block
  EXPECT_EQ(m.stats().pool.num_evictions, 3);
  EXPECT_EQ(m.get_computed_blocks(concat(p, {1}), kNs).blocks, ids({3, 4, 5}));
  EXPECT_INVARIANTS(m);
}

// Issue 13, trap 3: with identity by physical parent, a descendant cached under a copy that was
// evicted squatted its hash, and the recomputed prefix re-hit only 8 of 12 tokens.
TEST(KvCacheManager, OrphanedDescendantDoesNotBlockTheRecomputedPrefix) {
  KvCacheManager m({.num_blocks = 12, .block_size_tokens = 4});
  const auto p = tokens(0, 12);
  for (uint64_t id : {1, 2}) {
    m.add_request(RequestId(id), kNs);
    const ComputedBlocks none = m.get_computed_blocks(p, kNs);
    ASSERT_TRUE(m.allocate_slots(RequestId(id), 12, &none));
  }
  m.cache_full_blocks(RequestId(1), p, 8);
  m.cache_full_blocks(RequestId(2), p, 12);
  m.cache_full_blocks(RequestId(1), p, 12);
  // A finishes; B keeps running. A's blocks are evicted by other work.
  m.free(RequestId(1));
  m.add_request(RequestId(3), kNs);
  ASSERT_TRUE(m.allocate_slots(RequestId(3), 4 * 9));
  EXPECT_EQ(m.stats().pool.num_evictions, 3);
  m.free(RequestId(3));
  m.free(RequestId(2));
  // The prefix is computed again, then re-hit in full.
  EXPECT_EQ(admit(m, 4, concat(p, {7})), 12);
  m.free(RequestId(4));
  EXPECT_EQ(admit(m, 5, concat(p, {8})), 12);
  EXPECT_INVARIANTS(m);
}

TEST(KvCacheManager, UncacheUncomputedDropsWhatAFailedStepRegistered) {
  KvCacheManager m({.num_blocks = 8, .block_size_tokens = 4});
  const auto p = tokens(0, 13);
  EXPECT_EQ(admit(m, 1, p), 0);  // registers blocks 0..2 as if the step ran
  m.uncache_uncomputed(RequestId(1), 4);  // only the first block was computed
  EXPECT_TRUE(m.pool().cached_hash(BlockId(0)));
  EXPECT_FALSE(m.pool().cached_hash(BlockId(1)));
  EXPECT_FALSE(m.pool().cached_hash(BlockId(2)));
  EXPECT_EQ(m.get_computed_blocks(p, kNs).num_cached_tokens, 4);
  EXPECT_INVARIANTS(m);
  // Registering again (the request is retried from token 4) works.
  m.cache_full_blocks(RequestId(1), p, 13);
  EXPECT_EQ(m.get_computed_blocks(p, kNs).num_cached_tokens, 12);
  EXPECT_INVARIANTS(m);
}

TEST(KvCacheManager, FourForksOf512TokenPromptShareItsBlocks) {
  KvCacheManager m({.num_blocks = 64, .block_size_tokens = 16});
  const auto p = tokens(0, 512);
  EXPECT_EQ(admit(m, 1, p), 0);
  EXPECT_EQ(table(m, 1), id_range(0, 32));
  for (uint64_t c = 2; c <= 4; ++c) {
    m.fork(RequestId(1), RequestId(c));
    EXPECT_INVARIANTS(m);
  }
  KvCacheStats s = m.stats();
  EXPECT_EQ(s.pool.num_used_blocks, 32);
  EXPECT_EQ(s.pool.num_shared_blocks, 32);
  for (int32_t b = 0; b < 32; ++b) EXPECT_EQ(m.pool().ref_count(BlockId(b)), 4);
  // Each sequence samples its first token: the prompt ends on a block boundary, so no copy.
  for (uint64_t r = 1; r <= 4; ++r) {
    auto a = m.allocate_slots(RequestId(r), 1);
    ASSERT_TRUE(a);
    EXPECT_TRUE(a->copies.empty());
    EXPECT_EQ(vec(a->new_blocks), ids({static_cast<int32_t>(31 + r)}));
    EXPECT_EQ(m.slot(RequestId(r), 512), (31 + static_cast<int64_t>(r)) * 16);
    EXPECT_INVARIANTS(m);
  }
  EXPECT_EQ(m.stats().pool.num_used_blocks, 36);
  for (uint64_t r = 1; r <= 4; ++r) m.free(RequestId(r));
  EXPECT_INVARIANTS(m);
  s = m.stats();
  EXPECT_EQ(s.pool.num_free_blocks, 64);
  EXPECT_EQ(s.pool.num_cached_free_blocks, 32);
  EXPECT_EQ(s.num_requests, 0);
}

TEST(KvCacheManager, CopyOnWriteOfSharedPartialBlock) {
  KvCacheManager m({.num_blocks = 8, .block_size_tokens = 4});
  const auto p = tokens(0, 6);
  EXPECT_EQ(admit(m, 1, p), 0);
  EXPECT_EQ(table(m, 1), ids({0, 1}));
  m.fork(RequestId(1), RequestId(2));
  EXPECT_EQ(m.pool().render_map(), "SS......\n");
  EXPECT_INVARIANTS(m);

  // The parent writes position 6 into shared block 1: it gets block 2, copied from 1.
  auto a = m.allocate_slots(RequestId(1), 1);
  ASSERT_TRUE(a);
  EXPECT_EQ(vec(a->copies), (std::vector<BlockCopy>{BlockCopy{BlockId(1), BlockId(2)}}));
  EXPECT_TRUE(a->new_blocks.empty());
  EXPECT_EQ(table(m, 1), ids({0, 2}));
  EXPECT_EQ(table(m, 2), ids({0, 1}));
  EXPECT_EQ(m.pool().ref_count(BlockId(1)), 1);
  EXPECT_EQ(m.slot(RequestId(1), 6), 10);
  EXPECT_EQ(m.stats().num_cow_copies, 1);
  EXPECT_INVARIANTS(m);
  // The child now owns block 1 alone: it writes in place.
  auto b = m.allocate_slots(RequestId(2), 1);
  ASSERT_TRUE(b);
  EXPECT_TRUE(b->copies.empty());
  EXPECT_TRUE(b->new_blocks.empty());
  EXPECT_EQ(m.slot(RequestId(2), 6), 6);
  // Two more parent tokens cross into a new block.
  auto c = m.allocate_slots(RequestId(1), 2);
  ASSERT_TRUE(c);
  EXPECT_TRUE(c->copies.empty());
  EXPECT_EQ(vec(c->new_blocks), ids({3}));
  EXPECT_EQ(m.pool().render_map(), "S###....\n");
  EXPECT_EQ(m.stats().num_cow_copies, 1);
  EXPECT_INVARIANTS(m);
}

TEST(KvCacheManager, CopyOnWriteThatDoesNotFitChangesNothing) {
  KvCacheManager m({.num_blocks = 3, .block_size_tokens = 4});
  EXPECT_EQ(admit(m, 1, tokens(0, 6)), 0);
  m.fork(RequestId(1), RequestId(2));
  // 6 + 3 tokens: a copy of block 1 plus one more block, but only block 2 is free.
  EXPECT_FALSE(m.allocate_slots(RequestId(2), 3).has_value());
  EXPECT_EQ(table(m, 2), ids({0, 1}));
  EXPECT_EQ(m.num_tokens(RequestId(2)), 6);
  EXPECT_EQ(m.pool().free_list(), ids({2}));
  EXPECT_EQ(m.stats().num_cow_copies, 0);
  EXPECT_INVARIANTS(m);
  auto a = m.allocate_slots(RequestId(2), 2);
  ASSERT_TRUE(a);
  EXPECT_EQ(vec(a->copies), (std::vector<BlockCopy>{BlockCopy{BlockId(1), BlockId(2)}}));
  EXPECT_EQ(table(m, 2), ids({0, 2}));
  EXPECT_INVARIANTS(m);
}

TEST(KvCacheManager, AllocationAccountsForRevivedHits) {
  // The hit's blocks sit on the free list: reviving them uses free blocks too.
  KvCacheManager m({.num_blocks = 4, .block_size_tokens = 4});
  const auto p = tokens(0, 9);
  EXPECT_EQ(admit(m, 1, p), 0);
  m.free(RequestId(1));
  m.add_request(RequestId(2), kNs);
  const ComputedBlocks hit = m.get_computed_blocks(concat(tokens(0, 8), tokens(50, 9)), kNs);
  ASSERT_EQ(hit.blocks, ids({0, 1}));
  // 8 cached + 9 new = 17 tokens = 5 blocks > 4: does not fit, nothing adopted.
  EXPECT_FALSE(m.allocate_slots(RequestId(2), 9, &hit).has_value());
  EXPECT_EQ(m.block_table(RequestId(2)).num_blocks(), 0);
  EXPECT_EQ(m.pool().free_list(), ids({2, 3, 1, 0}));  // 2 (partial, uncached) at the head
  EXPECT_INVARIANTS(m);
  auto a = m.allocate_slots(RequestId(2), 8, &hit);  // 16 tokens = 4 blocks: fits exactly
  ASSERT_TRUE(a);
  EXPECT_EQ(vec(a->new_blocks), ids({2, 3}));
  EXPECT_EQ(table(m, 2), ids({0, 1, 2, 3}));
  EXPECT_EQ(m.stats().pool.num_evictions, 0);
  EXPECT_INVARIANTS(m);
}

// The query/hit counters move when allocate_slots adopts a lookup, never on the lookup itself:
// a request that does not fit and is looked up again counts its prompt once.
TEST(KvCacheManager, PrefixCountersCountAnAdoptedLookupOnce) {
  KvCacheManager m({.num_blocks = 4, .block_size_tokens = 4});
  EXPECT_EQ(admit(m, 1, tokens(0, 8)), 0);  // blocks 0, 1
  EXPECT_EQ(m.stats().num_prefix_query_tokens, 8);
  const auto p = concat(tokens(0, 4), tokens(50, 9));  // 13 tokens: 4 blocks, block 0 shared
  m.add_request(RequestId(2), kNs);
  for (int attempt = 0; attempt < 3; ++attempt) {
    const ComputedBlocks hit = m.get_computed_blocks(p, kNs);
    EXPECT_EQ(hit.num_query_tokens, 13);
    EXPECT_EQ(hit.num_cached_tokens, 4);
    EXPECT_FALSE(m.allocate_slots(RequestId(2), 9, &hit).has_value());  // 3 more, 2 free
    EXPECT_EQ(m.stats().num_prefix_query_tokens, 8);
    EXPECT_EQ(m.stats().num_prefix_hit_tokens, 0);
  }
  m.free(RequestId(1));
  const ComputedBlocks hit = m.get_computed_blocks(p, kNs);
  ASSERT_TRUE(m.allocate_slots(RequestId(2), 9, &hit).has_value());
  EXPECT_EQ(m.stats().num_prefix_query_tokens, 8 + 13);
  EXPECT_EQ(m.stats().num_prefix_hit_tokens, 4);
  EXPECT_INVARIANTS(m);
  // A miss adopted counts its query too.
  m.free(RequestId(2));
  m.add_request(RequestId(3), kNs);
  const ComputedBlocks miss = m.get_computed_blocks(tokens(700, 5), kNs);
  EXPECT_TRUE(miss.blocks.empty());
  ASSERT_TRUE(m.allocate_slots(RequestId(3), 5, &miss).has_value());
  EXPECT_EQ(m.stats().num_prefix_query_tokens, 8 + 13 + 5);
  EXPECT_EQ(m.stats().num_prefix_hit_tokens, 4);
}

TEST(KvCacheManager, DebugMap) {
  KvCacheManager m({.num_blocks = 8, .block_size_tokens = 4});
  EXPECT_EQ(admit(m, 1, tokens(100, 10)), 0);
  EXPECT_EQ(admit(m, 2, concat(tokens(100, 8), {200, 201, 202})), 8);
  EXPECT_EQ(m.debug_string(),
            "kv: 8 blocks x 4 tokens | free 4 (cached 0) used 4 shared 2 | requests 2 | "
            "evictions 0 | prefix hit 8/21 tokens | cow 0\n"
            "SS##....\n");
  m.free(RequestId(1));
  m.free(RequestId(2));
  EXPECT_EQ(m.debug_string(4),
            "kv: 8 blocks x 4 tokens | free 8 (cached 2) used 0 shared 0 | requests 0 | "
            "evictions 0 | prefix hit 8/21 tokens | cow 0\n"
            "cc..\n....\n");
  ASSERT_EQ(setenv("HINGE_KV_DEBUG", "1", 1), 0);
  EXPECT_TRUE(kv_debug_enabled());
  ASSERT_EQ(setenv("HINGE_KV_DEBUG", "0", 1), 0);
  EXPECT_FALSE(kv_debug_enabled());
  ASSERT_EQ(unsetenv("HINGE_KV_DEBUG"), 0);
  EXPECT_FALSE(kv_debug_enabled());
}

// A request's chain hashes are computed once (extend_block_hashes) and reused by every lookup
// and by cache_full_blocks: a request that waits for room is not rehashed per attempt.
int g_hash_calls = 0;
BlockHash counting_hash(BlockHash parent, std::span<const int32_t> tokens) {
  ++g_hash_calls;
  return hash_block_tokens(parent, tokens);
}

TEST(KvCacheManager, KnownBlockHashesAreNotRecomputed) {
  KvCacheManager m({.num_blocks = 16, .block_size_tokens = 4}, &counting_hash);
  admit(m, 1, tokens(100, 18));  // caches blocks 0..3
  const auto prompt = concat(tokens(100, 16), tokens(7, 6));  // 22 tokens: 5 full blocks
  std::vector<BlockHash> hashes;
  g_hash_calls = 0;
  m.extend_block_hashes(prompt, kNs, &hashes);
  EXPECT_EQ(hashes.size(), 5u);
  EXPECT_EQ(g_hash_calls, 5);
  m.extend_block_hashes(prompt, kNs, &hashes);  // nothing new
  EXPECT_EQ(g_hash_calls, 5);
  for (int attempt = 0; attempt < 3; ++attempt) {
    const ComputedBlocks hit = m.get_computed_blocks(prompt, kNs, hashes);
    EXPECT_EQ(hit.num_cached_tokens, 16);
    EXPECT_EQ(hit.hashes, std::vector<BlockHash>(hashes.begin(), hashes.begin() + 4));
  }
  EXPECT_EQ(g_hash_calls, 5);
  // The same answer as hashing on the spot.
  const ComputedBlocks fresh = m.get_computed_blocks(prompt, kNs);
  EXPECT_EQ(fresh.blocks, m.get_computed_blocks(prompt, kNs, hashes).blocks);
  g_hash_calls = 0;
  m.add_request(RequestId(2), kNs);
  const ComputedBlocks hit = m.get_computed_blocks(prompt, kNs, hashes);
  ASSERT_TRUE(m.allocate_slots(RequestId(2), 22 - 16, &hit));
  m.cache_full_blocks(RequestId(2), prompt, 22, hashes);
  EXPECT_EQ(g_hash_calls, 0);  // block 4's hash was known
  EXPECT_INVARIANTS(m);
  // A later request hits all five blocks through the cached entry of block 4.
  const ComputedBlocks five = m.get_computed_blocks(concat(prompt, tokens(1, 3)), kNs);
  EXPECT_EQ(five.num_cached_tokens, 20);
}

TEST(KvCacheManager, WithholdTakesUnusedBlocksCachedLastAndRestoreGivesThemBack) {
  KvCacheManager m({.num_blocks = 8, .block_size_tokens = 4});
  const auto pa = tokens(100, 10);
  m.add_request(RequestId(1), kNs);
  const ComputedBlocks none = m.get_computed_blocks(pa, kNs);
  ASSERT_TRUE(m.allocate_slots(RequestId(1), 10, &none));
  m.cache_full_blocks(RequestId(1), pa, 10);
  m.free(RequestId(1));  // 0, 1 cached at the tail; 2 (partial) at the head
  EXPECT_EQ(m.pool().render_map(), "cc......\n");
  // Blocks holding nothing go first; the cached ones only when nothing else is left.
  EXPECT_EQ(vec(m.withhold(5)), ids({2, 3, 4, 5, 6}));
  EXPECT_EQ(m.num_withheld(), 5);
  EXPECT_EQ(m.stats().num_withheld_blocks, 5);
  EXPECT_EQ(m.pool().num_free_blocks(), 3);
  EXPECT_INVARIANTS(m);
  EXPECT_EQ(vec(m.withhold(2)), ids({7, 1}));  // evicts 1 (least recently freed of the two)
  EXPECT_EQ(m.pool().render_map(), "c#######\n");
  EXPECT_INVARIANTS(m);
  // No request can get a withheld block; a hit on 0 still works.
  m.add_request(RequestId(2), kNs);
  const ComputedBlocks hit = m.get_computed_blocks(pa, kNs);
  EXPECT_EQ(hit.blocks, ids({0}));
  EXPECT_FALSE(m.allocate_slots(RequestId(2), 6, &hit));  // needs 2 more, none free
  m.free(RequestId(2));
  EXPECT_EQ(vec(m.withhold(5)), ids({0}));  // at most what is free
  EXPECT_EQ(m.restore(3), 3);
  EXPECT_EQ(m.num_withheld(), 5);
  EXPECT_EQ(m.pool().num_free_blocks(), 3);
  EXPECT_INVARIANTS(m);
  EXPECT_EQ(m.restore(100), 5);
  EXPECT_EQ(m.pool().num_free_blocks(), 8);
  EXPECT_INVARIANTS(m);
}

TEST(KvCacheManager, DropCachedFreeShrinksThePrefixCacheToWhatIsInUse) {
  KvCacheManager m({.num_blocks = 8, .block_size_tokens = 4});
  const auto pa = tokens(100, 12);
  const auto pb = tokens(500, 9);
  for (uint64_t id : {1, 2}) {
    const auto& p = id == 1 ? pa : pb;
    m.add_request(RequestId(id), kNs);
    const ComputedBlocks none = m.get_computed_blocks(p, kNs);
    ASSERT_TRUE(m.allocate_slots(RequestId(id), static_cast<int32_t>(p.size()), &none));
    m.cache_full_blocks(RequestId(id), p, static_cast<int32_t>(p.size()));
  }
  m.free(RequestId(1));  // B stays: its two full blocks are cached and in use
  EXPECT_EQ(m.stats().pool.num_cached_free_blocks, 3);
  EXPECT_EQ(m.drop_cached_free(), 3);
  EXPECT_EQ(m.stats().pool.num_cached_free_blocks, 0);
  EXPECT_INVARIANTS(m);
  EXPECT_EQ(m.get_computed_blocks(pa, kNs).num_cached_tokens, 0);
  m.add_request(RequestId(3), kNs);
  EXPECT_EQ(m.get_computed_blocks(pb, kNs).num_cached_tokens, 8);  // in use: kept
}

}  // namespace
}  // namespace hinge::kv
