#include "cli/serve_tiers.h"

#include <cstdio>

#include "common/units.h"
#include "tier/disk_tier.h"
#include "tier/redis_tier.h"
#include "tier/sealed_block.h"
#include "tier/tier_stack.h"

namespace hinge::cli {

StatusOr<ServeTiers> open_kv_tiers(const ServeArgs& args, Engine& engine,
                                   const server::CacheSecret& secret) {
  ServeTiers out;
  if (args.kv_disk.empty() && args.kv_redis.empty()) return out;
  const EngineConfig& ec = engine.config();
  tier::BlockFormat format;
  format.fingerprint = engine.stats().kv_fingerprint;
  format.block_size = ec.block_size;
  format.num_groups = engine.kv_spec().num_groups();
  format.bytes_per_block = engine.kv_tier_block_bytes();
  format.kv_dtypes = std::string(kv::kv_dtype_name(ec.k_dtype)) + "/" +
                     std::string(kv::kv_dtype_name(ec.v_dtype));
  auto sealer = std::make_shared<const tier::BlockSealer>(secret, format);
  const char* no_secret = args.cache_secret_file.empty()
                              ? " (no --cache-secret-file: a random secret, so no restarted or "
                                "other server can read what this one writes)"
                              : "";
  if (!args.kv_disk.empty()) {
    const std::optional<uint64_t> size = parse_bytes(args.kv_disk_size);
    if (!size || *size == 0)
      return Status::Errorf("--kv-disk-size '{}': give a size, e.g. 20GiB", args.kv_disk_size);
    auto disk = tier::DiskTier::open(
        {.dir = args.kv_disk, .capacity_bytes = static_cast<int64_t>(*size)}, sealer);
    if (!disk.ok()) return disk.status();
    const kv::KvTierCounters c = (*disk)->counters();
    std::fprintf(stderr, "hinge: KV disk tier %s: %s of %s, %lld blocks from earlier runs%s\n",
                 args.kv_disk.c_str(), format_bytes(static_cast<uint64_t>(c.bytes)).c_str(),
                 format_bytes(*size).c_str(), static_cast<long long>(c.entries), no_secret);
    out.tiers.push_back(disk->get());
    out.owned.push_back(std::move(disk).value());
  }
  if (!args.kv_redis.empty()) {
    auto url = tier::RedisUrl::parse(args.kv_redis);
    if (!url.ok()) return url.status();
    tier::RedisTierOptions ro;
    ro.url = *url;
    ro.default_ttl_s = args.kv_redis_ttl;
    ro.timeout_s = args.kv_redis_timeout;
    auto redis = tier::RedisTier::open(ro, sealer);
    if (!redis.ok()) return redis.status();
    std::fprintf(stderr, "hinge: KV Redis tier %s: %s, blocks expire after %gs unless their "
                 "tenant's TTL is shorter%s\n",
                 url->display().c_str(), (*redis)->up() ? "connected" : "not reachable yet",
                 ro.default_ttl_s, no_secret);
    out.tiers.push_back(redis->get());
    out.owned.push_back(std::move(redis).value());
  }
  kv::KvTierStore* attach = out.tiers.front();
  if (out.tiers.size() > 1) {
    out.owned.push_back(std::make_unique<tier::TierStack>(out.tiers));
    attach = out.owned.back().get();
  }
  HINGE_RETURN_IF_ERROR(engine.attach_kv_tier(attach).with_context(
      args.kv_disk.empty() ? "--kv-redis" : "--kv-disk"));
  return out;
}

}  // namespace hinge::cli
