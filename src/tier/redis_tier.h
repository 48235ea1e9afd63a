// The shared KV tier on Redis (`hinge serve --kv-redis redis://HOST:PORT[/DB]`): the disk
// tier's sealed blobs (tier/sealed_block.h), one key per block, written with one atomic
// `SET key blob EX ttl` (the tenant's TTL, else --kv-redis-ttl): a reader sees a whole block or
// none, and nothing but the blob is stored. Replicas that share the Redis and the cache secret
// read each other's prefixes.
//
// Key names: `<prefix>:<group>:{<chain>}:<name>`, all keyed digests (nothing derives from a
// prompt without the secret):
//   group  16 hex: the block's tier group (tenant and permission version); a purge deletes by
//          this prefix (SCAN MATCH + UNLINK)
//   chain  16 hex: the chain's first block; in braces, a Redis Cluster hash tag, so every block
//          of a chain lives in one slot (one node serves a prefix's reads)
//   name   32 hex: the block (BlockSealer::name)
//
// Down or slow Redis: connect and command time out (--kv-redis-timeout); a failure marks the
// store down (a warning, hinge:kv_tier_up{tier="redis"} 0) and every read and write fails fast
// until a reconnect, tried with backoff (0.5 s doubling to 8 s). The engine counts a failed read
// as a miss: requests are served from RAM and recompute, none fails. Thread-safe (one
// connection under a lock).
#pragma once

#include <memory>
#include <mutex>
#include <string>

#include "kv/kv_tier.h"
#include "tier/sealed_block.h"

struct redisContext;

namespace hinge::tier {

// redis://[[USER]:PASSWORD@]HOST[:PORT][/DB]
struct RedisUrl {
  std::string host;
  int port = 6379;
  int db = 0;
  std::string user;
  std::string password;
  static StatusOr<RedisUrl> parse(const std::string& url);
  // host:port/db, never the password (for logs).
  std::string display() const;
};

struct RedisTierOptions {
  RedisUrl url;
  double default_ttl_s = 3600;  // EX of blocks whose tenant has no TTL (0: no expiry)
  double timeout_s = 0.25;      // connect and per-command
  std::string key_prefix = "hinge:kv";
};

class RedisTier final : public kv::KvTierStore {
 public:
  // Never fails for an unreachable Redis (a warning; reads and writes fail fast until it is
  // reachable): only for bad options.
  static StatusOr<std::unique_ptr<RedisTier>> open(const RedisTierOptions& options,
                                                   std::shared_ptr<const BlockSealer> sealer);
  ~RedisTier() override;

  const char* name() const override { return "redis"; }
  Status put(const kv::TierBlockKey& key, std::span<const uint8_t> bytes, double ttl_s) override;
  StatusOr<bool> get(const kv::TierBlockKey& key, std::vector<uint8_t>* out) override;
  bool may_contain(const kv::TierBlockKey&) const override { return true; }
  int64_t forget_group(uint64_t group) override;
  kv::KvTierCounters counters() const override;

  // The block's Redis key (tests read and corrupt it).
  std::string key_of(const kv::TierBlockKey& key) const;
  bool up() const;

 private:
  RedisTier(const RedisTierOptions& options, std::shared_ptr<const BlockSealer> sealer);
  // mu_ held. A connection, or false (down; retried after the backoff).
  bool connect_locked();
  void mark_down_locked(const std::string& why);

  RedisTierOptions options_;
  std::shared_ptr<const BlockSealer> sealer_;
  mutable std::mutex mu_;
  redisContext* ctx_ = nullptr;  // guarded by mu_
  double retry_at_ = 0;          // guarded by mu_: steady seconds
  double backoff_s_ = 0;         // guarded by mu_
  kv::KvTierCounters c_;         // guarded by mu_
};

}  // namespace hinge::tier
