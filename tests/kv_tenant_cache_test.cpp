// The prefix cache's tenant boundaries, with no model: namespaces compared on every hit (even
// when chain hashes collide), per-owner TTL, per-owner quotas that evict only the owner's own
// blocks, purge, permission-version retirement, and public prefixes shared for exactly their
// declared full blocks.
#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "kv/block_pool.h"
#include "kv/kv_cache_manager.h"

namespace hinge::kv {
namespace {

#define EXPECT_INVARIANTS(m)                \
  do {                                      \
    Status _st = (m).check_invariants();    \
    ASSERT_TRUE(_st.ok()) << _st.message(); \
  } while (0)

std::vector<int32_t> tokens(int32_t first, int32_t n) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  std::iota(t.begin(), t.end(), first);
  return t;
}
std::vector<int32_t> concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

const CacheNamespace kNsA = CacheNamespace::from_string("tenant-a/v1");
const CacheNamespace kNsB = CacheNamespace::from_string("tenant-b/v1");
const CacheNamespace kPublic = CacheNamespace::from_string("public/system-prompt");

CacheScope scope(CacheNamespace ns, int32_t owner, uint64_t epoch = 0) {
  CacheScope s(ns, owner);
  s.epoch = epoch;
  return s;
}

// Adds request `id` in `sc`, adopts its hit, reserves the rest, computes and caches the prompt.
// Returns the hit tokens.
int32_t admit(KvCacheManager& m, uint64_t id, const std::vector<int32_t>& prompt,
              const CacheScope& sc) {
  m.add_request(RequestId(id), sc);
  const ComputedBlocks hit = m.get_computed_blocks(prompt, sc);
  const int32_t n = static_cast<int32_t>(prompt.size());
  auto alloc = m.allocate_slots(RequestId(id), n - hit.num_cached_tokens, &hit);
  EXPECT_TRUE(alloc.has_value());
  m.cache_full_blocks(RequestId(id), prompt, n);
  return hit.num_cached_tokens;
}
// The tokens of p found cached for a prompt that continues p (the last prompt token is always
// computed, so a query for p itself would stop one block short).
int32_t hit_tokens(const KvCacheManager& m, const std::vector<int32_t>& p, const CacheScope& sc) {
  return m.get_computed_blocks(concat(p, {424242}), sc).num_cached_tokens;
}

TEST(KvTenantCache, NamespaceIsComparedEvenWhenChainHashesCollide) {
  BlockPool pool(4, 4);
  pool.allocate(1);
  const std::vector<int32_t> t = {1, 2, 3, 4};
  const BlockHash root{7, 0}, h{42, 0};
  pool.cache_block(BlockId(0), h, root, t, 0, kNsA, 1);
  // The same 64-bit hash, parent and tokens (a forced collision) in another namespace: a miss.
  EXPECT_EQ(pool.lookup(h, root, t, 0, kNsA), BlockId(0));
  EXPECT_EQ(pool.lookup(h, root, t, 0, kNsB), std::nullopt);
  // Namespaces differing in any one of their 256 bits are different.
  CacheNamespace near = kNsA;
  near.words[3] ^= 1;
  EXPECT_EQ(pool.lookup(h, root, t, 0, near), std::nullopt);
  EXPECT_INVARIANTS(pool);
}

TEST(KvTenantCache, SameTenantHitsOtherTenantMisses) {
  KvCacheManager m({.num_blocks = 32, .block_size_tokens = 4});
  const auto p = tokens(100, 20);
  EXPECT_EQ(admit(m, 1, p, scope(kNsA, 1)), 0);
  m.free(RequestId(1));
  EXPECT_EQ(hit_tokens(m, p, scope(kNsA, 1)), 20);
  EXPECT_EQ(hit_tokens(m, p, scope(kNsB, 2)), 0);
  EXPECT_EQ(hit_tokens(m, p, CacheScope{}), 0);  // the shared namespace either
  EXPECT_EQ(admit(m, 2, p, scope(kNsB, 2)), 0);
  EXPECT_INVARIANTS(m);
}

TEST(KvTenantCache, TtlMissesAndExpiredBlocksAreReusedFirst) {
  KvCacheManager m({.num_blocks = 8, .block_size_tokens = 4});
  m.set_owner_policy(1, INT32_MAX, 10.0);
  m.set_now(100);
  const auto p = tokens(0, 8);
  EXPECT_EQ(admit(m, 1, p, scope(kNsA, 1)), 0);
  m.free(RequestId(1));
  m.set_now(109.5);
  EXPECT_EQ(hit_tokens(m, p, scope(kNsA, 1)), 8);
  m.set_now(110.5);
  EXPECT_EQ(hit_tokens(m, p, scope(kNsA, 1)), 0);  // older than 10 s: never hits again
  EXPECT_EQ(m.expire_entries(), 2);
  EXPECT_EQ(m.stats().pool.num_expired, 2);
  EXPECT_EQ(m.stats().pool.num_cached_free_blocks, 0);
  // Reclaimed first: both went to the head of the free list.
  const auto fl = m.pool().free_list();
  ASSERT_GE(fl.size(), 2u);
  EXPECT_TRUE((fl[0] == BlockId(0) || fl[0] == BlockId(1)) && (fl[1] == BlockId(0) || fl[1] == BlockId(1)));
  EXPECT_INVARIANTS(m);
}

TEST(KvTenantCache, QuotaEvictsOnlyTheOwnersOwnBlocks) {
  KvCacheManager m({.num_blocks = 64, .block_size_tokens = 4});
  m.set_owner_policy(1, 4, 0);  // A: 4 cached free blocks at most
  // B's hot prefix, cached and free.
  const auto hot = tokens(9000, 16);
  EXPECT_EQ(admit(m, 1, hot, scope(kNsB, 2)), 0);
  m.free(RequestId(1));
  // A sends 100 distinct prompts of 3 full blocks each.
  for (int32_t i = 0; i < 100; ++i) {
    EXPECT_EQ(admit(m, 10 + static_cast<uint64_t>(i), tokens(i * 1000, 12), scope(kNsA, 1)), 0);
    m.free(RequestId(10 + static_cast<uint64_t>(i)));
    EXPECT_LE(m.pool().owner_cached_free(1), 4);
  }
  EXPECT_INVARIANTS(m);
  EXPECT_EQ(m.pool().owner_cached_free(1), 4);
  EXPECT_GT(m.stats().pool.num_quota_evictions, 0);
  EXPECT_EQ(hit_tokens(m, hot, scope(kNsB, 2)), 16);  // B untouched
  // A keeps its most recently freed blocks: the last prompt's 3 hit.
  EXPECT_EQ(hit_tokens(m, tokens(99 * 1000, 12), scope(kNsA, 1)), 12);
  // Lowering the quota evicts at once.
  m.set_owner_policy(1, 1, 0);
  EXPECT_EQ(m.pool().owner_cached_free(1), 1);
  EXPECT_INVARIANTS(m);
}

TEST(KvTenantCache, PurgeDropsFreeEntriesNowAndLiveOnesStopPublishing) {
  KvCacheManager m({.num_blocks = 32, .block_size_tokens = 4});
  const auto p1 = tokens(0, 12), p2 = tokens(500, 12), pb = tokens(7000, 8);
  EXPECT_EQ(admit(m, 1, p1, scope(kNsA, 1)), 0);
  m.free(RequestId(1));
  EXPECT_EQ(admit(m, 9, pb, scope(kNsB, 2)), 0);
  m.free(RequestId(9));
  // A running request of A holds two computed blocks of p2 and has more to compute.
  m.add_request(RequestId(2), scope(kNsA, 1));
  ASSERT_TRUE(m.allocate_slots(RequestId(2), 12, nullptr).has_value());
  m.cache_full_blocks(RequestId(2), p2, 8);
  EXPECT_EQ(m.pool().owner_cached(1), 3 + 2);
  EXPECT_EQ(m.purge_owner(1), 5);
  EXPECT_EQ(m.pool().owner_cached(1), 0);
  EXPECT_EQ(hit_tokens(m, p1, scope(kNsA, 1)), 0);
  // The live request finishes computing: nothing of it is published.
  m.cache_full_blocks(RequestId(2), p2, 12);
  EXPECT_EQ(m.pool().owner_cached(1), 0);
  m.free(RequestId(2));
  EXPECT_EQ(hit_tokens(m, p2, scope(kNsA, 1)), 0);
  EXPECT_EQ(hit_tokens(m, pb, scope(kNsB, 2)), 8);  // another tenant keeps its cache
  // A new request of A caches again.
  EXPECT_EQ(admit(m, 3, p1, scope(kNsA, 1)), 0);
  m.free(RequestId(3));
  EXPECT_EQ(hit_tokens(m, p1, scope(kNsA, 1)), 12);
  EXPECT_INVARIANTS(m);
}

TEST(KvTenantCache, PermissionBumpRetiresOldEntriesAndInFlightRequestsStopPublishing) {
  KvCacheManager m({.num_blocks = 32, .block_size_tokens = 4});
  const CacheNamespace v1 = CacheNamespace::from_string("a/v1"), v2 = CacheNamespace::from_string("a/v2");
  const auto p = tokens(0, 12), q = tokens(300, 12);
  EXPECT_EQ(admit(m, 1, p, scope(v1, 1, 1)), 0);
  m.free(RequestId(1));
  m.add_request(RequestId(2), scope(v1, 1, 1));  // in flight under version 1
  ASSERT_TRUE(m.allocate_slots(RequestId(2), 12, nullptr).has_value());
  m.cache_full_blocks(RequestId(2), q, 4);
  EXPECT_EQ(m.retire_owner_epochs(1, 2), 4);
  EXPECT_EQ(hit_tokens(m, p, scope(v1, 1, 1)), 0);
  m.cache_full_blocks(RequestId(2), q, 12);  // finishes on its KV, publishes nothing
  m.free(RequestId(2));
  EXPECT_EQ(m.pool().owner_cached(1), 0);
  // Under the new version: a miss first, a hit on the repeat.
  EXPECT_EQ(admit(m, 3, p, scope(v2, 1, 2)), 0);
  m.free(RequestId(3));
  EXPECT_EQ(hit_tokens(m, p, scope(v2, 1, 2)), 12);
  // Retiring again with the same current version keeps them.
  EXPECT_EQ(m.retire_owner_epochs(1, 2), 0);
  EXPECT_EQ(hit_tokens(m, p, scope(v2, 1, 2)), 12);
  EXPECT_INVARIANTS(m);
}

TEST(KvTenantCache, PublicPrefixIsSharedForExactlyItsFullBlocks) {
  KvCacheManager m({.num_blocks = 32, .block_size_tokens = 4});
  const auto sys = tokens(1, 8);  // two full blocks of a declared prefix
  auto pub = [&](CacheNamespace ns, int32_t owner) {
    CacheScope s(ns, owner);
    s.public_ns = kPublic;
    s.public_blocks = 2;
    return s;
  };
  const auto pa = concat(sys, tokens(5000, 8));
  EXPECT_EQ(admit(m, 1, pa, pub(kNsA, 1)), 0);
  m.free(RequestId(1));
  // B, same prompt: the 2 public blocks hit, A's 2 blocks after them do not.
  const ComputedBlocks hb = m.get_computed_blocks(concat(pa, {424242}), pub(kNsB, 2));
  EXPECT_EQ(hb.num_cached_tokens, 8);
  EXPECT_EQ(hb.num_public_blocks, 2);
  // A itself: everything.
  const ComputedBlocks ha = m.get_computed_blocks(concat(pa, {424242}), pub(kNsA, 1));
  EXPECT_EQ(ha.num_cached_tokens, 16);
  EXPECT_EQ(ha.num_public_blocks, 2);
  // The public blocks are owner 0's (a tenant's purge does not drop them), A's are A's.
  EXPECT_EQ(m.pool().owner_cached(0), 2);
  EXPECT_EQ(m.pool().owner_cached(1), 2);
  EXPECT_EQ(m.purge_owner(1), 2);
  EXPECT_EQ(hit_tokens(m, pa, pub(kNsB, 2)), 8);
  // A request without the public scope (a tenant whose prompt does not start with the prefix
  // in its own namespace) never reads the public blocks.
  EXPECT_EQ(hit_tokens(m, pa, scope(kNsB, 2)), 0);
  EXPECT_INVARIANTS(m);
}

}  // namespace
}  // namespace hinge::kv

namespace hinge::kv {
namespace {

// Requests that were not live at a bump or a removal (queued, or preempted and re-added) start
// later: they must not bring the revoked or removed entries back.
TEST(KvTenantCache, RequestsStartingAfterABumpOrRemovalDoNotRepublish) {
  KvCacheManager m({.num_blocks = 32, .block_size_tokens = 4});
  const CacheNamespace v1 = CacheNamespace::from_string("a/v1");
  const auto p = tokens(0, 12);
  EXPECT_EQ(m.retire_owner_epochs(1, 2), 0);  // version 2 is current
  EXPECT_EQ(admit(m, 1, p, scope(v1, 1, 1)), 0);  // a version-1 request admitted only now
  m.free(RequestId(1));
  EXPECT_EQ(m.pool().owner_cached(1), 0);
  EXPECT_EQ(hit_tokens(m, p, scope(v1, 1, 1)), 0);
  // A removed owner never caches again.
  EXPECT_EQ(admit(m, 2, p, scope(kNsB, 3)), 0);
  m.free(RequestId(2));
  EXPECT_GT(m.retire_owner(3), 0);
  EXPECT_EQ(admit(m, 3, p, scope(kNsB, 3)), 0);
  m.free(RequestId(3));
  EXPECT_EQ(m.pool().owner_cached(3), 0);
  EXPECT_EQ(hit_tokens(m, p, scope(kNsB, 3)), 0);
  EXPECT_INVARIANTS(m);
}

}  // namespace
}  // namespace hinge::kv
