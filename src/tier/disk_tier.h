// The encrypted disk tier (`hinge serve --kv-disk DIR --kv-disk-size SIZE`): one file per
// sealed block (tier/sealed_block.h) named by its keyed name, `<32 hex>.kvb`, LRU within the
// size. A file that is truncated, tampered with or foreign (another secret, model, KV format)
// is a miss: counted as rejected and deleted. At start the directory's block files are indexed
// (oldest modified first), so a restarted server with the same secret serves hits from disk.
// forget_group deletes a tenant's files (purge, permission version bumped).
//
// Files are written to a temporary name and renamed: a reader never sees half a block. The
// directory is created 0700 and files 0600. Thread-safe.
#pragma once

#include <memory>
#include <mutex>
#include <string>

#include "kv/kv_tier.h"
#include "tier/sealed_block.h"

namespace hinge::tier {

struct DiskTierOptions {
  std::string dir;
  int64_t capacity_bytes = 0;  // > 0
};

class DiskTier final : public kv::KvTierStore {
 public:
  static StatusOr<std::unique_ptr<DiskTier>> open(const DiskTierOptions& options,
                                                  std::shared_ptr<const BlockSealer> sealer);

  const char* name() const override { return "disk"; }
  Status put(const kv::TierBlockKey& key, std::span<const uint8_t> bytes, double ttl_s) override;
  StatusOr<bool> get(const kv::TierBlockKey& key, std::vector<uint8_t>* out) override;
  bool may_contain(const kv::TierBlockKey& key) const override;
  int64_t forget_group(uint64_t group) override;
  kv::KvTierCounters counters() const override;

  const std::string& dir() const { return options_.dir; }
  // The file of `name` (tests flip its bytes).
  std::string path_of(const std::string& name) const;
  const BlockSealer& sealer() const { return *sealer_; }

 private:
  DiskTier(const DiskTierOptions& options, std::shared_ptr<const BlockSealer> sealer);
  void remove_files(const std::vector<std::string>& names);

  DiskTierOptions options_;
  std::shared_ptr<const BlockSealer> sealer_;
  mutable std::mutex mu_;
  kv::TierLru lru_;           // guarded by mu_
  kv::KvTierCounters c_;      // guarded by mu_
  uint64_t tmp_counter_ = 0;  // guarded by mu_
};

}  // namespace hinge::tier
