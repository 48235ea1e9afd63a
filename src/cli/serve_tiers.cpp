#include "cli/serve_tiers.h"

#include <cstdio>

#include "common/units.h"
#include "tier/disk_tier.h"
#include "tier/sealed_block.h"

namespace hinge::cli {

StatusOr<std::unique_ptr<kv::KvTierStore>> open_kv_tiers(const ServeArgs& args, Engine& engine,
                                                         const server::CacheSecret& secret) {
  if (args.kv_disk.empty()) return std::unique_ptr<kv::KvTierStore>();
  const std::optional<uint64_t> size = parse_bytes(args.kv_disk_size);
  if (!size || *size == 0)
    return Status::Errorf("--kv-disk-size '{}': give a size, e.g. 20GiB", args.kv_disk_size);
  const EngineConfig& ec = engine.config();
  tier::BlockFormat format;
  format.fingerprint = engine.stats().kv_fingerprint;
  format.block_size = ec.block_size;
  format.num_groups = engine.kv_spec().num_groups();
  format.bytes_per_block = engine.kv_tier_block_bytes();
  format.kv_dtypes = std::string(kv::kv_dtype_name(ec.k_dtype)) + "/" +
                     std::string(kv::kv_dtype_name(ec.v_dtype));
  auto sealer = std::make_shared<const tier::BlockSealer>(secret, format);
  auto disk = tier::DiskTier::open({.dir = args.kv_disk, .capacity_bytes = static_cast<int64_t>(*size)}, sealer);
  if (!disk.ok()) return disk.status();
  HINGE_RETURN_IF_ERROR(engine.attach_kv_tier(disk->get()).with_context("--kv-disk"));
  const kv::KvTierCounters c = (*disk)->counters();
  std::fprintf(stderr, "hinge: KV disk tier %s: %s of %s, %lld blocks from earlier runs%s\n",
               args.kv_disk.c_str(), format_bytes(static_cast<uint64_t>(c.bytes)).c_str(), format_bytes(*size).c_str(),
               static_cast<long long>(c.entries),
               args.cache_secret_file.empty()
                   ? " (no --cache-secret-file: a random secret, so a restarted server cannot "
                     "read what this one writes)"
                   : "");
  return std::unique_ptr<kv::KvTierStore>(std::move(disk).value());
}

}  // namespace hinge::cli
