// The Redis tier against a real redis-server (Debian's, started here on a free loopback port):
// URL parsing; the key layout (group prefix, chain hash tag, keyed name); one SET with EX per
// block, the tenant's TTL winning when shorter; tampered values refused and deleted; a purge
// deleting its group's keys only; Redis stopped: reads and writes fail fast, the store says it
// is down, and it reconnects once Redis is back; TierStack asks the disk before Redis.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <hiredis.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "test_util.h"
#include "tier/disk_tier.h"
#include "tier/redis_tier.h"
#include "tier/sealed_block.h"
#include "tier/tier_stack.h"

extern char** environ;

namespace hinge {
namespace {

using kv::TierBlockKey;
using tier::BlockFormat;
using tier::BlockSealer;
using tier::RedisTier;
using tier::RedisUrl;

constexpr const char* kRedisServer = "/usr/bin/redis-server";

int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  socklen_t len = sizeof a;
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

// redis-server on 127.0.0.1:port, no persistence; stopped (SIGKILL) by stop() or the destructor.
class RedisProcess {
 public:
  explicit RedisProcess(int port) : port_(port) { start(); }
  ~RedisProcess() { stop(); }
  void start() {
    const std::string p = std::to_string(port_);
    const char* argv[] = {kRedisServer, "--port", p.c_str(), "--bind", "127.0.0.1", "--save", "",
                          "--appendonly", "no", "--loglevel", "warning", nullptr};
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    ASSERT_EQ(posix_spawn(&pid_, kRedisServer, &fa, nullptr, const_cast<char**>(argv), environ), 0);
    posix_spawn_file_actions_destroy(&fa);
    for (int i = 0; i < 200; ++i) {  // up to 10 s
      redisContext* c = redisConnect("127.0.0.1", port_);
      const bool ok = c && !c->err;
      if (c) redisFree(c);
      if (ok) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    FAIL() << "redis-server did not start on port " << port_;
  }
  void stop() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
  // One command's reply as text (strings, integers; "(nil)").
  std::string command(const std::vector<std::string>& args) {
    redisContext* c = redisConnect("127.0.0.1", port_);
    std::vector<const char*> argv;
    std::vector<size_t> lens;
    for (const std::string& a : args) {
      argv.push_back(a.data());
      lens.push_back(a.size());
    }
    auto* r = static_cast<redisReply*>(
        redisCommandArgv(c, static_cast<int>(argv.size()), argv.data(), lens.data()));
    std::string out = "(error)";
    if (r && r->type == REDIS_REPLY_STRING) out.assign(r->str, r->len);
    if (r && r->type == REDIS_REPLY_STATUS) out.assign(r->str, r->len);
    if (r && r->type == REDIS_REPLY_INTEGER) out = std::to_string(r->integer);
    if (r && r->type == REDIS_REPLY_NIL) out = "(nil)";
    if (r && r->type == REDIS_REPLY_ARRAY) {
      out.clear();
      for (size_t i = 0; i < r->elements; ++i)
        out += std::string(r->element[i]->str, r->element[i]->len) + "\n";
    }
    if (r) freeReplyObject(r);
    redisFree(c);
    return out;
  }
  int port() const { return port_; }

 private:
  int port_;
  pid_t pid_ = -1;
};

BlockFormat format() {
  BlockFormat f;
  f.fingerprint = 0x77;
  f.block_size = 16;
  f.num_groups = 1;
  f.bytes_per_block = 256;
  f.kv_dtypes = "f16/f16";
  return f;
}

std::shared_ptr<const BlockSealer> sealer(uint8_t s = 1) {
  std::array<uint8_t, 32> secret{};
  secret.fill(s);
  return std::make_shared<const BlockSealer>(secret, format());
}

// Block h of the chain rooted at `root`, in namespace ns, tier group `group`.
TierBlockKey key(uint64_t ns, uint64_t h, uint64_t group = 5, uint64_t root = 1) {
  return TierBlockKey{.ns = kv::CacheNamespace(ns), .hash = {h, ~h}, .group = group,
                      .root_ns = kv::CacheNamespace(ns), .root = {root, root}};
}

std::vector<uint8_t> payload(uint8_t seed) {
  std::vector<uint8_t> p(256);
  for (size_t i = 0; i < p.size(); ++i) p[i] = static_cast<uint8_t>(seed * 13 + i);
  return p;
}

std::unique_ptr<RedisTier> open_tier(int port, double ttl = 3600, uint8_t secret = 1) {
  tier::RedisTierOptions o;
  o.url = *RedisUrl::parse("redis://127.0.0.1:" + std::to_string(port) + "/0");
  o.default_ttl_s = ttl;
  o.timeout_s = 0.5;
  auto t = RedisTier::open(o, sealer(secret));
  EXPECT_TRUE(t.ok()) << t.status().message();
  return std::move(t).value();
}

TEST(RedisUrl, ParsesAndRefuses) {
  auto u = RedisUrl::parse("redis://10.0.0.2:6380/3");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->host, "10.0.0.2");
  EXPECT_EQ(u->port, 6380);
  EXPECT_EQ(u->db, 3);
  u = RedisUrl::parse("redis://app:s3cret@cache.local");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->host, "cache.local");
  EXPECT_EQ(u->port, 6379);
  EXPECT_EQ(u->user, "app");
  EXPECT_EQ(u->password, "s3cret");
  EXPECT_EQ(u->display().find("s3cret"), std::string::npos);
  u = RedisUrl::parse("redis://[::1]:7000");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->host, "::1");
  EXPECT_EQ(u->port, 7000);
  for (const char* bad : {"http://h:1", "redis://", "redis://h:0", "redis://h:99999",
                          "redis://h:1/x", "redis://h:port", "redis://nopass@h:1"})
    EXPECT_FALSE(RedisUrl::parse(bad).ok()) << bad;
}

TEST(RedisTier, StoresSealedBlocksUnderKeyedNamesWithExpiry) {
  RedisProcess redis(free_port());
  auto t = open_tier(redis.port(), 100);
  EXPECT_TRUE(t->up());
  ASSERT_TRUE(t->put(key(1, 10), payload(1), 0).ok());
  ASSERT_TRUE(t->put(key(1, 11), payload(2), 20).ok());  // the tenant's TTL is shorter
  std::vector<uint8_t> out;
  ASSERT_TRUE(*t->get(key(1, 10), &out));
  EXPECT_EQ(out, payload(1));
  ASSERT_TRUE(*t->get(key(1, 11), &out));
  EXPECT_EQ(out, payload(2));
  EXPECT_FALSE(*t->get(key(1, 12), &out));  // never written
  EXPECT_FALSE(*t->get(key(2, 10), &out));  // another namespace
  EXPECT_FALSE(*open_tier(redis.port(), 100, 2)->get(key(1, 10), &out));  // another secret

  // hinge:kv:<group>:{<chain>}:<block>: one hash tag per chain, one prefix per group.
  const std::string k10 = t->key_of(key(1, 10)), k11 = t->key_of(key(1, 11));
  ASSERT_EQ(k10.size(), std::string("hinge:kv:").size() + 16 + 2 + 16 + 2 + 32);
  EXPECT_EQ(k10.substr(0, 45), k11.substr(0, 45)) << k10 << " " << k11;
  EXPECT_NE(k10, k11);
  EXPECT_NE(t->key_of(key(1, 10, 5, 2)).substr(27, 18), k10.substr(27, 18));  // another chain
  EXPECT_NE(t->key_of(key(1, 10, 6)).substr(0, 26), k10.substr(0, 26));      // another group
  const int ttl10 = std::stoi(redis.command({"TTL", k10}));
  const int ttl11 = std::stoi(redis.command({"TTL", k11}));
  EXPECT_GT(ttl10, 90);
  EXPECT_LE(ttl10, 100);
  EXPECT_GT(ttl11, 10);
  EXPECT_LE(ttl11, 20);
  // The value is the sealed blob, nothing in the clear.
  const std::string v = redis.command({"GET", k10});
  EXPECT_EQ(v.substr(0, 4), "HKVT");
  const auto p = payload(1);
  EXPECT_EQ(v.find(std::string(p.begin(), p.begin() + 32)), std::string::npos);

  const kv::KvTierCounters c = t->counters();
  EXPECT_EQ(c.puts, 2);
  EXPECT_EQ(c.hits, 2);
  EXPECT_EQ(c.misses, 2);
  EXPECT_EQ(c.entries, -1);
  EXPECT_EQ(c.up, 1);
}

TEST(RedisTier, TamperedValueIsRefusedAndDeleted) {
  RedisProcess redis(free_port());
  auto t = open_tier(redis.port());
  ASSERT_TRUE(t->put(key(1, 10), payload(1), 0).ok());
  const std::string k = t->key_of(key(1, 10));
  std::string v = redis.command({"GET", k});
  v[v.size() - 20] ^= 1;
  EXPECT_EQ(redis.command({"SET", k, v}), "OK");
  std::vector<uint8_t> out;
  EXPECT_FALSE(*t->get(key(1, 10), &out));
  EXPECT_TRUE(out.empty());
  EXPECT_EQ(t->counters().rejected, 1);
  EXPECT_EQ(redis.command({"EXISTS", k}), "0");
  // A value that is not a blob at all.
  ASSERT_TRUE(t->put(key(1, 11), payload(2), 0).ok());
  EXPECT_EQ(redis.command({"SET", t->key_of(key(1, 11)), "junk"}), "OK");
  EXPECT_FALSE(*t->get(key(1, 11), &out));
  EXPECT_EQ(t->counters().rejected, 2);
}

TEST(RedisTier, ExpiresByTtl) {
  RedisProcess redis(free_port());
  auto t = open_tier(redis.port(), 1);
  ASSERT_TRUE(t->put(key(1, 10), payload(1), 0).ok());
  std::vector<uint8_t> out;
  ASSERT_TRUE(*t->get(key(1, 10), &out));
  std::this_thread::sleep_for(std::chrono::milliseconds(2100));
  EXPECT_FALSE(*t->get(key(1, 10), &out));
}

TEST(RedisTier, ForgetGroupDeletesThatGroupOnly) {
  RedisProcess redis(free_port());
  auto t = open_tier(redis.port());
  for (uint64_t h = 0; h < 30; ++h) ASSERT_TRUE(t->put(key(1, h, h % 3), payload(1), 0).ok());
  EXPECT_EQ(t->forget_group(1), 10);
  EXPECT_EQ(t->counters().purged, 10);
  std::vector<uint8_t> out;
  for (uint64_t h = 0; h < 30; ++h) EXPECT_EQ(*t->get(key(1, h, h % 3), &out), h % 3 != 1) << h;
  EXPECT_EQ(std::stoi(redis.command({"DBSIZE"})), 20);
}

TEST(RedisTier, DownFailsFastAndReconnects) {
  const int port = free_port();
  auto redis = std::make_unique<RedisProcess>(port);
  auto t = open_tier(port);
  ASSERT_TRUE(t->put(key(1, 10), payload(1), 0).ok());
  redis->stop();
  std::vector<uint8_t> out;
  EXPECT_FALSE(t->get(key(1, 10), &out).ok());
  EXPECT_FALSE(t->up());
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 100; ++i) {  // within the backoff: no connection attempt at all
    EXPECT_FALSE(t->put(key(1, 11), payload(2), 0).ok());
    EXPECT_FALSE(t->get(key(1, 11), &out).ok());
  }
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 0.4);
  const kv::KvTierCounters c = t->counters();
  EXPECT_EQ(c.up, 0);
  EXPECT_GE(c.get_errors, 101);
  EXPECT_GE(c.put_errors, 100);
  redis->start();  // empty (no persistence)
  bool back = false;
  for (int i = 0; i < 100 && !back; ++i) {  // the backoff is 0.5 s, then 1 s, ...
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    back = t->put(key(1, 12), payload(3), 0).ok();
  }
  ASSERT_TRUE(back);
  EXPECT_TRUE(t->up());
  ASSERT_TRUE(*t->get(key(1, 12), &out));
  EXPECT_EQ(out, payload(3));
}

TEST(RedisTier, NeverReachableIsNotAnError) {
  auto t = open_tier(free_port());  // nothing listens
  EXPECT_FALSE(t->up());
  std::vector<uint8_t> out;
  EXPECT_FALSE(t->get(key(1, 1), &out).ok());
  EXPECT_FALSE(t->put(key(1, 1), payload(1), 0).ok());
  EXPECT_EQ(t->forget_group(5), 0);
}

TEST(TierStack, DiskFirstThenRedisAndPutsToBoth) {
  RedisProcess redis(free_port());
  auto s = sealer();
  auto disk = tier::DiskTier::open({.dir = testing::temp_dir(), .capacity_bytes = 1 << 20}, s);
  ASSERT_TRUE(disk.ok());
  auto r = open_tier(redis.port());
  tier::TierStack stack({disk->get(), r.get()});
  ASSERT_TRUE(stack.put(key(1, 1), payload(1), 0).ok());
  std::vector<uint8_t> out;
  ASSERT_TRUE(*stack.get(key(1, 1), &out));
  EXPECT_EQ((*disk)->counters().hits, 1);
  EXPECT_EQ(r->counters().hits, 0);  // the disk answered
  ASSERT_TRUE(r->put(key(1, 2), payload(2), 0).ok());  // another replica wrote it
  EXPECT_TRUE(stack.may_contain(key(1, 2)));
  ASSERT_TRUE(*stack.get(key(1, 2), &out));
  EXPECT_EQ(out, payload(2));
  EXPECT_EQ(r->counters().hits, 1);
  EXPECT_EQ(stack.forget_group(5), 3);  // one on disk, two in Redis
  EXPECT_FALSE(*stack.get(key(1, 1), &out));
  redis.stop();  // Redis down: the disk still stores, the stack still succeeds
  EXPECT_TRUE(stack.put(key(1, 3), payload(3), 0).ok());
  ASSERT_TRUE(*stack.get(key(1, 3), &out));
  EXPECT_FALSE(stack.get(key(1, 4), &out).ok());  // a miss on disk, an error from Redis
  EXPECT_EQ(stack.counters().up, 0);
}

}  // namespace
}  // namespace hinge
