// KV tier pieces with no model: TierLru's order and capacity; BlockSealer's seal / open and
// every way a blob is refused (flipped byte, truncation, another namespace, chain, format or
// secret); DiskTier's files (put / get, restart, tamper and foreign files are misses that are
// counted and removed, LRU within the size, forget_group deletes a group's files).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "kv/kv_tier.h"
#include "test_util.h"
#include "tier/disk_tier.h"
#include "tier/sealed_block.h"

namespace hinge {
namespace {

namespace fs = std::filesystem;
using kv::TierBlockKey;
using tier::BlockFormat;
using tier::BlockSealer;
using tier::DiskTier;

TEST(TierLru, EvictsLeastRecentAndCountsBytes) {
  kv::TierLru lru(100);
  EXPECT_TRUE(lru.insert("a", 40, 1).empty());
  EXPECT_TRUE(lru.insert("b", 40, 2).empty());
  EXPECT_TRUE(lru.touch("a"));  // b is now the least recent
  EXPECT_EQ(lru.insert("c", 40, 1), std::vector<std::string>{"b"});
  EXPECT_EQ(lru.bytes(), 80);
  EXPECT_EQ(lru.names(), (std::vector<std::string>{"a", "c"}));
  EXPECT_EQ(lru.insert("big", 101, 3), std::vector<std::string>{"big"});  // never fits
  EXPECT_FALSE(lru.contains("big"));
  EXPECT_EQ(lru.erase_group(1), (std::vector<std::string>{"c", "a"}));
  EXPECT_EQ(lru.size(), 0);
  EXPECT_EQ(lru.bytes(), 0);
  EXPECT_FALSE(lru.touch("a"));
}

std::array<uint8_t, 32> secret(uint8_t v) {
  std::array<uint8_t, 32> s{};
  s.fill(v);
  return s;
}

BlockFormat format(int64_t bytes = 64) {
  BlockFormat f;
  f.fingerprint = 0x1234;
  f.block_size = 16;
  f.num_groups = 1;
  f.bytes_per_block = bytes;
  f.kv_dtypes = "f16/f16";
  return f;
}

TierBlockKey key(uint64_t ns, uint64_t h, uint64_t group = 7) {
  return TierBlockKey{.ns = kv::CacheNamespace(ns), .hash = {h, h * 3}, .group = group,
                      .root_ns = kv::CacheNamespace(ns), .root = {1, 2}};
}

std::vector<uint8_t> payload(int64_t n, uint8_t seed) {
  std::vector<uint8_t> p(static_cast<size_t>(n));
  for (size_t i = 0; i < p.size(); ++i) p[i] = static_cast<uint8_t>(seed + i * 7);
  return p;
}

TEST(BlockSealer, OpensWhatItSealedAndRefusesEverythingElse) {
  const BlockSealer s(secret(1), format());
  const std::vector<uint8_t> plain = payload(64, 3);
  std::vector<uint8_t> blob, out;
  s.seal(key(1, 10), plain, &blob);
  EXPECT_EQ(static_cast<int64_t>(blob.size()), s.blob_bytes());
  ASSERT_TRUE(s.open(key(1, 10), blob, &out).ok());
  EXPECT_EQ(out, plain);
  EXPECT_EQ(BlockSealer::peek_group(blob).value(), 7u);
  // The plaintext never appears in the blob.
  EXPECT_EQ(std::search(blob.begin(), blob.end(), plain.begin(), plain.begin() + 16), blob.end());
  // Another namespace, chain or group: foreign.
  EXPECT_FALSE(s.open(key(2, 10), blob, &out).ok());
  EXPECT_FALSE(s.open(key(1, 11), blob, &out).ok());
  EXPECT_FALSE(s.open(key(1, 10, 8), blob, &out).ok());
  // Every single flipped byte is refused.
  for (size_t i = 0; i < blob.size(); ++i) {
    std::vector<uint8_t> bad = blob;
    bad[i] ^= 0x01;
    EXPECT_FALSE(s.open(key(1, 10), bad, &out).ok()) << "byte " << i;
  }
  // Truncated anywhere.
  for (size_t n : {size_t{0}, size_t{5}, size_t{40}, blob.size() - 1})
    EXPECT_FALSE(s.open(key(1, 10), std::span(blob).first(n), &out).ok()) << n;
  // Another secret, another KV format.
  EXPECT_FALSE(BlockSealer(secret(2), format()).open(key(1, 10), blob, &out).ok());
  BlockFormat other = format();
  other.fingerprint = 0x9999;
  EXPECT_FALSE(BlockSealer(secret(1), other).open(key(1, 10), blob, &out).ok());
  // Names: keyed, stable, distinct.
  EXPECT_EQ(s.name(key(1, 10)), s.name(key(1, 10)));
  EXPECT_NE(s.name(key(1, 10)), s.name(key(2, 10)));
  EXPECT_NE(s.name(key(1, 10)), BlockSealer(secret(2), format()).name(key(1, 10)));
  EXPECT_EQ(s.name(key(1, 10)).size(), 32u);
}

std::unique_ptr<DiskTier> open_disk(const std::string& dir, int64_t capacity, uint8_t sec = 1) {
  auto t = DiskTier::open({.dir = dir, .capacity_bytes = capacity},
                          std::make_shared<const BlockSealer>(secret(sec), format()));
  EXPECT_TRUE(t.ok()) << t.status().message();
  return std::move(t).value();
}

size_t num_files(const std::string& dir) {
  return static_cast<size_t>(std::distance(fs::directory_iterator(dir), fs::directory_iterator{}));
}

TEST(DiskTier, PutGetRestartTamperForeignLruAndForget) {
  const std::string dir = testing::temp_dir() + "/tier";
  const int64_t blob = BlockSealer(secret(1), format()).blob_bytes();
  std::vector<uint8_t> out;
  {
    auto t = open_disk(dir, 3 * blob);
    EXPECT_EQ(fs::status(dir).permissions() & fs::perms::all, fs::perms::owner_all);
    ASSERT_TRUE(t->put(key(1, 1), payload(64, 1), 0).ok());
    ASSERT_TRUE(t->put(key(1, 2), payload(64, 2), 0).ok());
    ASSERT_TRUE(t->put(key(1, 2), payload(64, 2), 0).ok());  // held already: no second file
    EXPECT_EQ(num_files(dir), 2u);
    EXPECT_TRUE(t->may_contain(key(1, 1)));
    EXPECT_FALSE(t->may_contain(key(1, 3)));
    ASSERT_TRUE(t->get(key(1, 1), &out).value());
    EXPECT_EQ(out, payload(64, 1));
    EXPECT_FALSE(t->get(key(1, 3), &out).value());
    EXPECT_EQ(t->counters().misses, 1);
  }
  {
    // A restart with the same secret: the files are indexed and read.
    auto t = open_disk(dir, 3 * blob);
    EXPECT_EQ(t->counters().entries, 2);
    ASSERT_TRUE(t->get(key(1, 2), &out).value());
    EXPECT_EQ(out, payload(64, 2));
    // A flipped byte: a miss, counted, and the file is gone.
    const std::string f = t->path_of(t->sealer().name(key(1, 1)));
    {
      std::fstream io(f, std::ios::in | std::ios::out | std::ios::binary);
      io.seekp(blob - 5);
      io.put('\x5a');
    }
    EXPECT_FALSE(t->get(key(1, 1), &out).value());
    EXPECT_EQ(t->counters().rejected, 1);
    EXPECT_FALSE(fs::exists(f));
    // LRU within 3 blobs: the fourth put evicts the least recent (key 2 was read: 3 goes).
    ASSERT_TRUE(t->put(key(1, 3), payload(64, 3), 0).ok());
    ASSERT_TRUE(t->put(key(1, 4), payload(64, 4), 0).ok());
    ASSERT_TRUE(t->get(key(1, 2), &out).value());
    ASSERT_TRUE(t->put(key(1, 5), payload(64, 5), 0).ok());
    EXPECT_FALSE(t->may_contain(key(1, 3)));
    EXPECT_EQ(t->counters().evictions, 1);
    EXPECT_EQ(num_files(dir), 3u);
    // forget_group deletes the group's files only.
    ASSERT_TRUE(t->put(key(9, 9, 99), payload(64, 9), 0).ok());  // evicts key 4
    EXPECT_EQ(t->forget_group(7), 2);
    EXPECT_EQ(num_files(dir), 1u);
    EXPECT_TRUE(t->may_contain(key(9, 9, 99)));
  }
  {
    // Another secret: the old file is foreign (its name never matches; a read is refused).
    auto t = open_disk(dir, 3 * blob, 2);
    EXPECT_FALSE(t->get(key(9, 9, 99), &out).value());
    // A stray non-block file and a cut-short write are handled at start.
    std::ofstream(dir + "/notes.txt") << "mine";
    std::ofstream(dir + "/kvb-1-1.tmp") << "half";
    std::ofstream(dir + "/0123456789abcdef0123456789abcdef.kvb") << "garbage";
  }
  auto t = open_disk(dir, 3 * blob);
  EXPECT_TRUE(fs::exists(dir + "/notes.txt"));
  EXPECT_FALSE(fs::exists(dir + "/kvb-1-1.tmp"));
  EXPECT_FALSE(fs::exists(dir + "/0123456789abcdef0123456789abcdef.kvb"));
  EXPECT_EQ(t->counters().rejected, 1);
}

TEST(DiskTier, RefusesBadOptions) {
  auto sealer = std::make_shared<const BlockSealer>(secret(1), format());
  EXPECT_FALSE(DiskTier::open({.dir = "", .capacity_bytes = 1 << 20}, sealer).ok());
  EXPECT_FALSE(DiskTier::open({.dir = testing::temp_dir(), .capacity_bytes = 10}, sealer).ok());
  EXPECT_FALSE(DiskTier::open({.dir = "/proc/hinge-no", .capacity_bytes = 1 << 20}, sealer).ok());
}

}  // namespace
}  // namespace hinge
