// Randomized stress of KvCacheManager (seeded, deterministic): thousands of random admissions
// with prefix hits, decodes with copy-on-write, forks and frees. After every operation:
//   - check_invariants() holds;
//   - a shadow "KV arena" proves every request reads back exactly its own KV. Each slot holds a
//     fingerprint of (namespace, every token up to and including that position) written when the
//     token is "computed"; prefix hits and CoW copies must reproduce the request's fingerprints.
// Run with the real hash and with one that piles every block into a few index positions: the
// second must be just as correct. And with several KV groups: each group's slots hold their own
// fingerprints (the group is part of them), so a group reading another's block fails.
// With events on (kv_events.h), a consumer applying every operation's events in order holds
// exactly the hashes the pool holds: a stored hash is new and its parent is held, a removed
// hash is held, and the set's size is the pool's num_announced() after every operation.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <map>
#include <random>
#include <set>
#include <vector>

#include "kv/kv_cache_manager.h"

namespace hinge::kv {
namespace {

uint64_t mix(uint64_t x) {  // splitmix64 finalizer
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// The index's probe position (the low word) from two bits of one token: blocks collide in the
// index constantly. The high word keeps the chain identity (what a lookup compares) exact.
BlockHash weak_hash(BlockHash parent, std::span<const int32_t> tokens) {
  return BlockHash{parent.lo * 31 + static_cast<uint64_t>(tokens[0] & 1),
                   hash_block_tokens(parent, tokens).hi};
}

struct Live {
  CacheNamespace ns;
  std::vector<int32_t> tokens;  // all computed (== num_tokens reserved)
};

class Stress {
 public:
  Stress(const KvCacheConfig& config, BlockHashFn hash_fn, uint64_t seed)
      : m_(config, hash_fn),
        bs_(config.block_size_tokens),
        groups_(config.num_groups),
        shadow_(static_cast<size_t>(config.num_blocks) * config.block_size_tokens, 0),
        rng_(seed) {
    for (auto& base : bases_) {
      base.resize(48);
      for (auto& t : base) t = static_cast<int32_t>(rng_() % 8);
    }
  }

  int64_t hit_tokens() const { return m_.stats().num_prefix_hit_tokens; }
  int64_t cow_copies() const { return m_.stats().num_cow_copies; }
  int64_t evictions() const { return m_.stats().pool.num_evictions; }
  int64_t events_removed() const { return events_removed_; }

  // Records KV events from now on and checks them after every operation.
  void enable_events() {
    m_.enable_events();
    events_on_ = true;
  }

  void run(int num_ops) {
    for (int op = 0; op < num_ops; ++op) {
      const uint32_t r = static_cast<uint32_t>(rng_() % 100);
      if (live_.empty() || (r < 30 && live_.size() < 24))
        admit();
      else if (r < 65)
        decode();
      else if (r < 75)
        fork();
      else
        release();
      const Status st = m_.check_invariants();
      ASSERT_TRUE(st.ok()) << "op " << op << ": " << st.message();
      const auto c = m_.stats().pool;
      ASSERT_EQ(c.num_free_blocks + c.num_used_blocks, c.num_total_blocks);
      if (events_on_) {
        apply_events();
        if (::testing::Test::HasFatalFailure()) return;
        ASSERT_EQ(static_cast<int32_t>(announced_.size()), m_.pool().num_announced()) << "op " << op;
      }
      for (const auto& [id, l] : live_) {
        ASSERT_EQ(m_.num_tokens(RequestId(id)), static_cast<int32_t>(l.tokens.size()));
        verify_reads(id, l);
        if (::testing::Test::HasFatalFailure()) return;
      }
    }
  }

 private:
  std::vector<uint64_t> fingerprints(const Live& l, int32_t group) const {
    std::vector<uint64_t> f(l.tokens.size());
    uint64_t h = mix(l.ns.words[0] ^ 0x51ed270b27d2f3a5ULL ^ mix(static_cast<uint64_t>(group)));
    for (size_t i = 0; i < l.tokens.size(); ++i) f[i] = h = mix(h ^ mix(uint64_t(l.tokens[i])));
    return f;
  }
  void write(uint64_t id, const Live& l, size_t from) {
    for (int32_t g = 0; g < groups_; ++g) {
      const auto f = fingerprints(l, g);
      for (size_t p = from; p < l.tokens.size(); ++p)
        shadow_[static_cast<size_t>(m_.slot(RequestId(id), static_cast<int64_t>(p), g))] = f[p];
    }
  }
  void verify_reads(uint64_t id, const Live& l) {
    for (int32_t g = 0; g < groups_; ++g) {
      const auto f = fingerprints(l, g);
      for (size_t p = 0; p < l.tokens.size(); ++p) {
        ASSERT_EQ(shadow_[static_cast<size_t>(m_.slot(RequestId(id), static_cast<int64_t>(p), g))],
                  f[p])
            << "request " << id << " group " << g << " position " << p;
      }
    }
  }
  void apply_copies(std::span<const BlockCopy> copies) {
    for (const BlockCopy& copy : copies)
      std::copy_n(shadow_.begin() + static_cast<ptrdiff_t>(copy.src.value) * bs_, bs_,
                  shadow_.begin() + static_cast<ptrdiff_t>(copy.dst.value) * bs_);
  }
  // A consumer of the events (a router's index): applies the log, checking it as it goes.
  void apply_events() {
    KvEventLog& log = m_.event_log();
    for (const KvEvent& e : log.events()) {
      const auto hashes = log.hashes(e);
      ASSERT_EQ(hashes.empty(), e.kind == KvEventKind::kAllCleared);
      switch (e.kind) {
        case KvEventKind::kStored: {
          ASSERT_EQ(log.tokens(e).size(), hashes.size() * static_cast<size_t>(bs_));
          uint64_t parent = e.parent;
          for (const uint64_t h : hashes) {
            ASSERT_NE(h, 0u);
            ASSERT_LT(h, uint64_t{1} << 63);
            if (parent != 0) {
              ASSERT_TRUE(announced_.count(parent)) << "parent not announced";
            }
            ASSERT_TRUE(announced_.insert(h).second) << "hash stored twice";
            parent = h;
          }
          break;
        }
        case KvEventKind::kRemoved:
          for (const uint64_t h : hashes) {
            ASSERT_EQ(announced_.erase(h), 1u) << "removed a hash never stored";
            ++events_removed_;
          }
          break;
        case KvEventKind::kAllCleared:
          announced_.clear();
          break;
      }
    }
    log.clear();
  }

  uint64_t pick() {
    auto it = live_.begin();
    std::advance(it, static_cast<ptrdiff_t>(rng_() % live_.size()));
    return it->first;
  }

  void admit() {
    Live l{CacheNamespace(1 + rng_() % 2), {}};
    const auto& base = bases_[rng_() % bases_.size()];
    l.tokens.assign(base.begin(), base.begin() + static_cast<ptrdiff_t>(rng_() % 49));
    const size_t num_suffix = 1 + rng_() % 12;
    for (size_t i = 0; i < num_suffix; ++i) l.tokens.push_back(static_cast<int32_t>(rng_() % 4));
    const uint64_t id = next_id_++;
    m_.add_request(RequestId(id), l.ns);
    const ComputedBlocks hit = m_.get_computed_blocks(l.tokens, l.ns);
    ASSERT_LT(hit.num_cached_tokens, static_cast<int32_t>(l.tokens.size()));
    // The hit's KV must be exactly this prompt's, in every group.
    ASSERT_EQ(hit.blocks.size(), hit.hashes.size() * static_cast<size_t>(groups_));
    for (int32_t g = 0; g < groups_; ++g) {
      const auto f = fingerprints(l, g);
      for (int32_t p = 0; p < hit.num_cached_tokens; ++p) {
        const size_t j = static_cast<size_t>(g * hit.num_hit_blocks() + p / bs_);
        const size_t slot = static_cast<size_t>(hit.blocks[j].value) * static_cast<size_t>(bs_) +
                            static_cast<size_t>(p % bs_);
        ASSERT_EQ(shadow_[slot], f[static_cast<size_t>(p)])
            << "wrong prefix hit at " << p << " in group " << g;
      }
    }
    const int32_t num_free_before = m_.pool().num_free_blocks();
    auto alloc = m_.allocate_slots(
        RequestId(id), static_cast<int32_t>(l.tokens.size()) - hit.num_cached_tokens, &hit);
    if (!alloc) {
      ASSERT_EQ(m_.pool().num_free_blocks(), num_free_before);
      ASSERT_EQ(m_.block_table(RequestId(id)).num_blocks(), 0);
      m_.free(RequestId(id));
      return;
    }
    ASSERT_TRUE(alloc->copies.empty());
    write(id, l, static_cast<size_t>(hit.num_cached_tokens));
    m_.cache_full_blocks(RequestId(id), l.tokens, static_cast<int32_t>(l.tokens.size()));
    live_.emplace(id, std::move(l));
  }

  void decode() {
    const uint64_t id = pick();
    Live& l = live_.at(id);
    const size_t old_size = l.tokens.size();
    const size_t k = 1 + rng_() % 5;
    for (size_t i = 0; i < k; ++i) l.tokens.push_back(static_cast<int32_t>(rng_() % 4));
    const auto before = m_.block_table(RequestId(id)).blocks();
    const std::vector<BlockId> table_before(before.begin(), before.end());
    auto alloc = m_.allocate_slots(RequestId(id), static_cast<int32_t>(k));
    if (!alloc) {
      l.tokens.resize(old_size);
      const auto after = m_.block_table(RequestId(id)).blocks();
      ASSERT_TRUE(std::equal(after.begin(), after.end(), table_before.begin(), table_before.end()));
      return;
    }
    apply_copies(alloc->copies);
    write(id, l, old_size);
    m_.cache_full_blocks(RequestId(id), l.tokens, static_cast<int32_t>(l.tokens.size()));
  }

  void fork() {
    const uint64_t parent = pick();
    const uint64_t child = next_id_++;
    m_.fork(RequestId(parent), RequestId(child));
    Live copy = live_.at(parent);
    live_.emplace(child, std::move(copy));
  }

  void release() {
    const uint64_t id = pick();
    m_.free(RequestId(id));
    live_.erase(id);
  }

  KvCacheManager m_;
  int32_t bs_;
  int32_t groups_;
  std::vector<uint64_t> shadow_;  // [num_blocks * block_size] fingerprint written at each slot
  std::mt19937_64 rng_;
  std::array<std::vector<int32_t>, 3> bases_;
  std::map<uint64_t, Live> live_;  // ordered: the run is deterministic
  uint64_t next_id_ = 1;
  bool events_on_ = false;
  std::set<uint64_t> announced_;  // what the events say the cache holds
  int64_t events_removed_ = 0;
};

TEST(KvStress, RandomOpsRealHash) {
  Stress s({.num_blocks = 48, .block_size_tokens = 4}, &hash_block_tokens, 1234);
  s.run(4000);
  if (HasFatalFailure()) return;
  // The run must exercise what it checks (this seed: 11348 hit tokens, 132 copies, 2958
  // evictions).
  EXPECT_GT(s.hit_tokens(), 5000);
  EXPECT_GT(s.cow_copies(), 50);
  EXPECT_GT(s.evictions(), 1000);
}

TEST(KvStress, RandomOpsEventsTrackThePool) {
  Stress s({.num_blocks = 48, .block_size_tokens = 4}, &hash_block_tokens, 1234);
  s.enable_events();
  s.run(4000);
  if (HasFatalFailure()) return;
  EXPECT_GT(s.evictions(), 1000);
  EXPECT_GT(s.events_removed(), 1000);  // every eviction of a last copy is a removal
}

TEST(KvStress, RandomOpsEventsThreeKvGroups) {
  Stress s({.num_blocks = 144, .block_size_tokens = 4, .num_groups = 3}, &hash_block_tokens, 4321);
  s.enable_events();
  s.run(3000);
  if (HasFatalFailure()) return;
  EXPECT_GT(s.events_removed(), 500);
}

TEST(KvStress, RandomOpsWeakHashCollisions) {
  Stress s({.num_blocks = 48, .block_size_tokens = 4}, &weak_hash, 99);
  s.run(4000);
  if (HasFatalFailure()) return;
  EXPECT_GT(s.hit_tokens(), 1000);  // this seed: 4152
  EXPECT_GT(s.cow_copies(), 50);
}

TEST(KvStress, RandomOpsNoPrefixCache) {
  Stress s({.num_blocks = 48, .block_size_tokens = 4, .enable_prefix_cache = false},
           &hash_block_tokens, 7);
  s.run(3000);
  if (HasFatalFailure()) return;
  EXPECT_EQ(s.hit_tokens(), 0);
  EXPECT_EQ(s.evictions(), 0);
}

TEST(KvStress, RandomOpsThreeKvGroups) {
  // Three groups on 3 x 48 blocks: each sequence holds a block per group for every position.
  Stress s({.num_blocks = 144, .block_size_tokens = 4, .num_groups = 3}, &hash_block_tokens, 4321);
  s.run(4000);
  if (HasFatalFailure()) return;
  EXPECT_GT(s.hit_tokens(), 5000);
  EXPECT_GT(s.cow_copies(), 50);
  EXPECT_GT(s.evictions(), 1000);
}

TEST(KvStress, RandomOpsTwoKvGroupsWeakHash) {
  Stress s({.num_blocks = 96, .block_size_tokens = 4, .num_groups = 2}, &weak_hash, 77);
  s.run(4000);
  if (HasFatalFailure()) return;
  EXPECT_GT(s.hit_tokens(), 1000);
  EXPECT_GT(s.cow_copies(), 50);
}

}  // namespace
}  // namespace hinge::kv
