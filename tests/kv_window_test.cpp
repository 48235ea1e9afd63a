// Sliding-window KV groups (issue 15, acceptance 3): a local group keeps only the blocks its
// window still reads, as pure bookkeeping (KvCacheManager, no model), through chunked prefill,
// decode, forks, prefix hits and frees; plus the groups a sliding-window model gets
// (window_groups) and what they hold for gemma3-1b at 8k tokens against full attention.
#include <gtest/gtest.h>

#include <vector>

#include "kv/kv_cache_manager.h"
#include "model/kv_cache.h"
#include "model/synth.h"
#include "sched/kv_demand.h"

namespace hinge::kv {
namespace {

constexpr int32_t kBs = 4;

KvCacheManager manager(int32_t num_blocks, std::vector<int32_t> windows, bool prefix = true) {
  return KvCacheManager(KvCacheConfig{.num_blocks = num_blocks,
                                      .block_size_tokens = kBs,
                                      .enable_prefix_cache = prefix,
                                      .fingerprint = 9,
                                      .num_groups = static_cast<int32_t>(windows.size()),
                                      .group_windows = windows});
}

CacheScope scope() { return CacheScope{}; }

std::vector<int32_t> tokens(int32_t n, int32_t salt = 0) {
  std::vector<int32_t> t;
  for (int32_t i = 0; i < n; ++i) t.push_back(3 + (i * 7 + salt) % 97);
  return t;
}

// Blocks a local group may hold between steps: those of [next - window + 1, next).
int32_t window_bound(int32_t window) { return (window - 1 + kBs - 1) / kBs + 1; }

TEST(KvWindow, LocalGroupKeepsWindowPlusOneBlockThroughPrefillAndDecode) {
  auto m = manager(200, {0, 10, 10});
  const RequestId id(1);
  const auto toks = tokens(150);
  m.add_request(id, scope(), 150);
  int32_t computed = 0;
  for (int32_t chunk : {7, 16, 9, 1, 1, 30}) {  // chunked prefill, then decode-sized steps
    ASSERT_TRUE(m.allocate_slots(id, chunk).has_value());
    m.cache_full_blocks(id, toks, computed + chunk);
    computed += chunk;
    m.release_behind_window(id, computed);
    ASSERT_TRUE(m.check_invariants().ok()) << m.check_invariants().message();
    EXPECT_EQ(m.num_held_blocks(id, 0), (computed + kBs - 1) / kBs);  // full attention: all
    for (int32_t g : {1, 2}) EXPECT_LE(m.num_held_blocks(id, g), window_bound(10)) << computed;
  }
  while (computed < 150) {
    ASSERT_TRUE(m.allocate_slots(id, 1).has_value());
    m.cache_full_blocks(id, toks, computed + 1);
    m.release_behind_window(id, ++computed);
    for (int32_t g : {1, 2}) ASSERT_LE(m.num_held_blocks(id, g), window_bound(10)) << computed;
  }
  // Positions [141, 150) are what the next query reads: blocks 35 .. 37 stay, the rest left.
  const BlockTable& t = m.block_table(id, 1);
  for (int32_t i = 0; i < 35; ++i) EXPECT_EQ(t[i], kReleasedBlock);
  for (int32_t i = 35; i < t.num_blocks(); ++i) EXPECT_NE(t[i], kReleasedBlock);
  EXPECT_EQ(m.stats().num_window_released_blocks, 2 * 35);
  m.free(id);
  EXPECT_TRUE(m.check_invariants().ok());
  EXPECT_EQ(m.pool().counters().num_used_blocks, 0);
}

TEST(KvWindow, ForkPrefixHitAndFreeKeepRefcountsExact) {
  auto m = manager(64, {0, 6});
  const auto toks = tokens(40);
  const RequestId a(1), b(2), c(3);
  m.add_request(a, scope());
  ASSERT_TRUE(m.allocate_slots(a, 30).has_value());
  m.cache_full_blocks(a, toks, 30);
  m.release_behind_window(a, 30);
  ASSERT_TRUE(m.check_invariants().ok());
  EXPECT_LE(m.num_held_blocks(a, 1), window_bound(6));
  // A fork shares what the parent holds (released entries stay released in both).
  m.fork(a, b);
  ASSERT_TRUE(m.check_invariants().ok()) << m.check_invariants().message();
  ASSERT_TRUE(m.allocate_slots(b, 5).has_value());  // copy-on-write of the shared last block
  m.release_behind_window(b, 35);
  ASSERT_TRUE(m.check_invariants().ok()) << m.check_invariants().message();
  // The released blocks of `a` stayed cached (unreferenced): the same prompt hits every
  // group as long as nothing evicted them, and releases them again after its first step.
  const auto prompt = std::span<const int32_t>(toks).first(30);
  const ComputedBlocks hit = m.get_computed_blocks(prompt, scope());
  EXPECT_EQ(hit.num_cached_tokens, 28);
  m.add_request(c, scope());
  ASSERT_TRUE(m.allocate_slots(c, 2, &hit).has_value());
  m.release_behind_window(c, 30);
  ASSERT_TRUE(m.check_invariants().ok()) << m.check_invariants().message();
  EXPECT_LE(m.num_held_blocks(c, 1), window_bound(6));
  for (RequestId id : {a, b, c}) m.free(id);
  EXPECT_TRUE(m.check_invariants().ok());
  EXPECT_EQ(m.pool().counters().num_used_blocks, 0);
}

// A prefix hit adopts, in a local group, only the blocks its next query reads: the long cached
// prompt does not come back into the local group for even one step.
TEST(KvWindow, PrefixHitAdoptsOnlyTheWindowInLocalGroups) {
  auto m = manager(100, {0, 6});
  const auto toks = tokens(60);
  const RequestId a(1), b(2);
  m.add_request(a, scope());
  ASSERT_TRUE(m.allocate_slots(a, 60).has_value());  // one chunk: every block held at once
  m.cache_full_blocks(a, toks, 60);
  m.free(a);  // nothing released first: all 15 blocks of both groups stay cached
  const ComputedBlocks hit = m.get_computed_blocks(toks, scope());
  ASSERT_EQ(hit.num_cached_tokens, 56);
  const int32_t free_before = m.pool().counters().num_free_blocks;
  m.add_request(b, scope());
  ASSERT_TRUE(m.allocate_slots(b, 4, &hit).has_value());
  ASSERT_TRUE(m.check_invariants().ok()) << m.check_invariants().message();
  // Position 56 reads keys from 51 on: blocks 12 .. 14 of the local group (12 and 13 cached,
  // 14 new).
  EXPECT_EQ(m.num_held_blocks(b, 0), 15);
  EXPECT_EQ(m.num_held_blocks(b, 1), 3);
  const BlockTable& t = m.block_table(b, 1);
  for (int32_t i = 0; i < 12; ++i) EXPECT_EQ(t[i], kReleasedBlock) << i;
  EXPECT_NE(t[12], kReleasedBlock);
  EXPECT_NE(t[13], kReleasedBlock);
  EXPECT_NE(t[14], kReleasedBlock);
  // Taken from the free list: 14 cached full-group blocks + 2 cached local ones + 2 new.
  EXPECT_EQ(free_before - m.pool().counters().num_free_blocks, 14 + 2 + 2);
  m.release_behind_window(b, 60);
  ASSERT_TRUE(m.check_invariants().ok()) << m.check_invariants().message();
  m.free(b);
  EXPECT_TRUE(m.check_invariants().ok());
  EXPECT_EQ(m.pool().counters().num_used_blocks, 0);
}

// A local group needs only its window's blocks for a hit: once the blocks it released behind
// the window are evicted, the same prefix still hits as long as the full-attention groups and
// the window's own blocks are cached (a multi-turn chat on a Gemma-style model).
TEST(KvWindow, PrefixHitSurvivesEvictionBehindTheWindow) {
  auto m = manager(40, {0, 6});
  const auto toks = tokens(60);
  const RequestId a(1), b(2), c(3);
  m.add_request(a, scope());
  for (int32_t done = 0; done < 60; done += 4) {  // 4 tokens a step, releasing behind the window
    ASSERT_TRUE(m.allocate_slots(a, 4).has_value());
    m.cache_full_blocks(a, toks, done + 4);
    m.release_behind_window(a, done + 4);
  }
  // Another request takes every free block, evicting the local blocks `a` released.
  m.add_request(b, scope());
  const int32_t free_blocks = m.pool().counters().num_free_blocks;
  ASSERT_TRUE(m.allocate_slots(b, free_blocks / 2 * kBs).has_value());
  ASSERT_TRUE(m.check_invariants().ok()) << m.check_invariants().message();
  // The next turn: a's 60 tokens and 5 more. Position 60 reads keys from 55 on (blocks 13, 14 of
  // the local group, still held by `a`); block 0 of the local group is gone.
  std::vector<int32_t> next = toks;
  for (int32_t t : tokens(5, 11)) next.push_back(t);
  const ComputedBlocks hit = m.get_computed_blocks(next, scope());
  ASSERT_EQ(hit.num_cached_tokens, 60);
  EXPECT_EQ(hit.blocks[15 + 0], kReleasedBlock);
  EXPECT_NE(hit.blocks[15 + 13], kReleasedBlock);
  m.free(b);
  m.add_request(c, scope());
  ASSERT_TRUE(m.allocate_slots(c, 5, &hit).has_value());
  ASSERT_TRUE(m.check_invariants().ok()) << m.check_invariants().message();
  EXPECT_EQ(m.num_held_blocks(c, 0), 17);
  EXPECT_LE(m.num_held_blocks(c, 1), window_bound(6) + 1);
  for (RequestId id : {a, c}) m.free(id);
  EXPECT_TRUE(m.check_invariants().ok());
  EXPECT_EQ(m.pool().counters().num_used_blocks, 0);
}

// The worst case that admission and the scheduler reserve (sched/kv_demand.h) bounds what a
// request really holds in each group, and counts a local group by its window, not the length.
TEST(KvWindow, WorstCaseFollowsTheGroups) {
  const std::vector<int32_t> windows = {0, 10, 10};
  const int32_t chunk = 8, prompt = 45, max_new = 30;
  const sched::KvDemandShape shape = sched::KvDemandShape::of(kBs, 3, windows, chunk);
  const int64_t worst = sched::worst_case_kv_blocks(prompt, max_new, 1, shape);
  const int64_t all_full = sched::worst_case_kv_blocks(prompt, max_new, 1, kBs, 3);
  // Full group: ceil(74 / 4) = 19; each local group: ceil((10 - 1 + 8) / 4) + 1 = 6.
  EXPECT_EQ(worst, 19 + 6 + 6);
  EXPECT_EQ(all_full, 3 * 19);
  auto m = manager(200, windows);
  const RequestId id(1);
  m.add_request(id, scope());
  int32_t computed = 0, peak = 0;
  const int32_t total = prompt + max_new - 1;
  while (computed < total) {
    const int32_t n = computed < prompt ? std::min(chunk, prompt - computed) : 1;
    ASSERT_TRUE(m.allocate_slots(id, n).has_value());
    peak = std::max(peak, m.pool().counters().num_used_blocks);
    computed += n;
    m.release_behind_window(id, computed);
  }
  EXPECT_LE(peak, worst);
  EXPECT_EQ(sched::worst_case_kv_blocks(prompt, max_new, 1,
                                        sched::KvDemandShape::of(kBs, 3, {}, chunk)),
            all_full);
  // Never more than full attention, however large the window.
  EXPECT_EQ(sched::worst_case_kv_blocks(prompt, max_new, 2,
                                        sched::KvDemandShape::of(kBs, 3, {0, 4096, 4096}, chunk)),
            sched::worst_case_kv_blocks(prompt, max_new, 2, kBs, 3));
}

TEST(KvWindow, FullAttentionGroupsNeverRelease) {
  auto m = manager(64, {0, 0});
  m.add_request(RequestId(1), scope());
  ASSERT_TRUE(m.allocate_slots(RequestId(1), 40).has_value());
  EXPECT_EQ(m.release_behind_window(RequestId(1), 40), 0);
  EXPECT_EQ(m.num_held_blocks(RequestId(1), 1), 10);
}

}  // namespace
}  // namespace hinge::kv

namespace hinge {
namespace {

TEST(KvWindow, GroupsOfOneKindEach) {
  const ModelConfig& g3 = find_synth_preset("gemma3-1b")->config;  // 26 layers, every 6th global
  const auto groups = window_groups(g3);
  ASSERT_EQ(groups.size(), 7u);  // 4 global layers in 1 group, 22 local in 6 (4, 4, 4, 4, 4, 2)
  EXPECT_EQ(groups[0].layers, (std::vector<int32_t>{5, 11, 17, 23}));
  EXPECT_EQ(groups[0].window, 0);
  for (size_t i = 1; i < groups.size(); ++i) EXPECT_EQ(groups[i].window, 512);
  EXPECT_EQ(groups.back().layers, (std::vector<int32_t>{24, 25}));
  auto spec = kv_spec_for(g3, kv::KvDtype::kF16, kv::KvDtype::kF16, 16, 1);
  ASSERT_TRUE(spec.ok());
  EXPECT_TRUE(spec->validate().ok()) << spec->validate().message();
  EXPECT_FALSE(kv_spec_for(g3, kv::KvDtype::kF16, kv::KvDtype::kF16, 16, 2).ok());
  // Full-attention models keep one group (or --kv-groups ranges).
  const ModelConfig& q = find_synth_preset("qwen2.5-0.5b")->config;
  EXPECT_EQ(kv_spec_for(q, kv::KvDtype::kF16, kv::KvDtype::kF16, 16, 1)->num_groups(), 1);
}

// gemma3-1b's KV at 8k tokens, measured in the blocks the bookkeeping holds after a 2048-token
// chunked prefill and 64 decode steps, against the same model with every layer full attention.
TEST(KvWindow, Gemma3At8kHoldsAboutAFifthOfFullAttention) {
  const ModelConfig& g3 = find_synth_preset("gemma3-1b")->config;
  const kv::KvSpec windowed = *kv_spec_for(g3, kv::KvDtype::kF16, kv::KvDtype::kF16, 16, 1);
  ModelConfig full_cfg = g3;
  full_cfg.layer_local.clear();
  const kv::KvSpec full = *kv_spec_for(full_cfg, kv::KvDtype::kF16, kv::KvDtype::kF16, 16, 1);
  auto held_bytes = [](const kv::KvSpec& spec, int32_t context) {
    std::vector<int32_t> windows;
    for (const kv::KvGroup& g : spec.groups) windows.push_back(g.window);
    kv::KvCacheManager m(kv::KvCacheConfig{.num_blocks = 20000,
                                           .block_size_tokens = spec.block_size_tokens,
                                           .enable_prefix_cache = false,
                                           .num_groups = spec.num_groups(),
                                           .group_windows = windows});
    const kv::RequestId id(1);
    m.add_request(id, kv::CacheScope{});
    int32_t computed = 0;
    while (computed < context) {
      const int32_t chunk = computed < context - 64 ? std::min(2048, context - 64 - computed) : 1;
      EXPECT_TRUE(m.allocate_slots(id, chunk).has_value());
      computed += chunk;
      m.release_behind_window(id, computed);
    }
    return int64_t{m.pool().counters().num_used_blocks} * spec.bytes_per_block();
  };
  const int64_t w = held_bytes(windowed, 8192), f = held_bytes(full, 8192);
  const double ratio = static_cast<double>(w) / static_cast<double>(f);
  EXPECT_LT(ratio, 0.25);
  EXPECT_GT(ratio, 4.0 / 26);  // the 4 global layers keep everything
  RecordProperty("gemma3_1b_8k_kv_bytes_windowed", std::to_string(w));
  RecordProperty("gemma3_1b_8k_kv_bytes_full", std::to_string(f));
  std::printf("gemma3-1b at 8192 tokens, f16 KV: %.1f MiB with sliding-window groups, %.1f MiB "
              "with full attention (%.3f)\n", w / 1048576.0, f / 1048576.0, ratio);
}

}  // namespace
}  // namespace hinge
