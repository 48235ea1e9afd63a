// hinge route's pure parts: the KV event decoder (both encodings round-tripped through the
// publisher's encoder; hostile payloads are errors, never crashes) and the PrefixIndex
// (content chains, consecutive matches, removals, orphans, routed-but-unannounced prefixes).
#include <gtest/gtest.h>

#include <random>

#include "cluster/kv_event_wire.h"
#include "kv/kv_events.h"
#include "route/kv_event_decode.h"
#include "route/prefix_index.h"

namespace hinge {
namespace {

using route::DecodedKvEvent;
using route::PrefixIndex;

std::vector<int32_t> tokens(int n, int seed) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) t[static_cast<size_t>(i)] = seed * 1000 + i;
  return t;
}

class DecodeBothFormats : public ::testing::TestWithParam<cluster::KvEventFormat> {};

TEST_P(DecodeBothFormats, RoundTripsThePublishersEncoding) {
  kv::KvEventLog log;
  log.all_cleared();
  const auto t = tokens(32, 1);
  log.stored(11, 0, std::span(t).first(16));
  log.stored(12, 11, std::span(t).subspan(16, 16));  // joins the event above
  log.removed(11);
  cluster::KvEventWire wire;
  wire.format = GetParam();
  wire.block_size = 16;
  std::string payload;
  cluster::encode_kv_event_batch(log, 1234.5, wire, &payload);
  auto b = route::decode_kv_event_batch(payload);
  ASSERT_TRUE(b.ok()) << b.status().message();
  EXPECT_DOUBLE_EQ(b->ts, 1234.5);
  ASSERT_EQ(b->events.size(), 3u);
  EXPECT_EQ(b->events[0].kind, DecodedKvEvent::Kind::kAllCleared);
  EXPECT_EQ(b->events[1].kind, DecodedKvEvent::Kind::kStored);
  EXPECT_EQ(b->events[1].hashes, (std::vector<int64_t>{11, 12}));
  EXPECT_FALSE(b->events[1].parent.has_value());
  EXPECT_EQ(b->events[1].token_ids, t);
  EXPECT_EQ(b->events[1].block_size, 16);
  EXPECT_EQ(b->events[2].kind, DecodedKvEvent::Kind::kRemoved);
  EXPECT_EQ(b->events[2].hashes, (std::vector<int64_t>{11}));
}

INSTANTIATE_TEST_SUITE_P(Formats, DecodeBothFormats,
                         ::testing::Values(cluster::KvEventFormat::kPositional,
                                           cluster::KvEventFormat::kMap));

TEST(KvEventDecode, HostilePayloadsAreErrors) {
  kv::KvEventLog log;
  const auto t = tokens(16, 2);
  log.stored(5, 0, t);
  std::string payload;
  cluster::encode_kv_event_batch(log, 1, cluster::KvEventWire{}, &payload);
  ASSERT_TRUE(route::decode_kv_event_batch(payload).ok());
  for (size_t n = 0; n < payload.size(); ++n)  // every truncation
    EXPECT_FALSE(route::decode_kv_event_batch(std::string_view(payload).substr(0, n)).ok()) << n;
  std::mt19937 rng(7);
  for (int i = 0; i < 2000; ++i) {  // random flips: an error or a batch, never a crash
    std::string p = payload;
    p[rng() % p.size()] ^= static_cast<char>(1 + rng() % 255);
    (void)route::decode_kv_event_batch(p);
  }
  EXPECT_FALSE(route::decode_kv_event_batch("").ok());
  EXPECT_FALSE(route::decode_kv_event_batch("\x93\x01\x02").ok());  // [1, 2]: no event list
}

TEST(PrefixIndex, MatchesConsecutiveBlocksByContent) {
  const auto t = tokens(64, 3);
  std::vector<uint64_t> chain;
  route::content_chain(t, 16, &chain);
  ASSERT_EQ(chain.size(), 4u);
  std::vector<uint64_t> again;
  route::content_chain(std::span(t).first(40), 16, &again);  // partial blocks do not count
  EXPECT_EQ(again, std::vector<uint64_t>(chain.begin(), chain.begin() + 2));

  PrefixIndex idx;
  // The replica's own hashes (say, a tenant's namespace) are arbitrary: content decides.
  ASSERT_TRUE(idx.block_stored(std::vector<int64_t>{901, 902}, std::nullopt, std::span(t).first(32), 16));
  EXPECT_EQ(idx.matched_blocks(chain, 0), 2);
  ASSERT_TRUE(idx.block_stored(std::vector<int64_t>{903}, 902, std::span(t).subspan(32, 16), 16));
  EXPECT_EQ(idx.matched_blocks(chain, 0), 3);
  EXPECT_FALSE(idx.block_stored(std::vector<int64_t>{999}, 12345, std::span(t).subspan(48, 16), 16));
  EXPECT_EQ(idx.orphans(), 1);  // an unknown parent: dropped, counted
  // A second copy of the same content (another namespace) keeps it until both are removed.
  ASSERT_TRUE(idx.block_stored(std::vector<int64_t>{701}, std::nullopt, std::span(t).first(16), 16));
  idx.block_removed(std::vector<int64_t>{901});
  EXPECT_EQ(idx.matched_blocks(chain, 0), 3);
  idx.block_removed(std::vector<int64_t>{701});
  EXPECT_EQ(idx.matched_blocks(chain, 0), 0);  // block 0 gone: the run stops there
  idx.block_removed(std::vector<int64_t>{12345678});  // unknown: ignored
  // Another prompt with the same first block matches only it.
  auto other = tokens(64, 3);
  other[20] = 1;
  std::vector<uint64_t> oc;
  route::content_chain(other, 16, &oc);
  EXPECT_EQ(oc[0], chain[0]);
  EXPECT_NE(oc[1], chain[1]);
  idx.clear();
  EXPECT_EQ(idx.blocks(), 0);
}

TEST(PrefixIndex, RoutedPrefixesCountUntilTheyExpire) {
  const auto t = tokens(48, 4);
  std::vector<uint64_t> chain;
  route::content_chain(t, 16, &chain);
  PrefixIndex idx;
  EXPECT_EQ(idx.matched_blocks(chain, 100), 0);
  idx.note_routed(std::span(chain).first(2), 100, 10);
  EXPECT_EQ(idx.matched_blocks(chain, 105), 2);
  EXPECT_EQ(idx.matched_blocks(chain, 111), 0);
}

}  // namespace
}  // namespace hinge
