// Several KV tiers as one store (the engine attaches one): `hinge serve --kv-disk D --kv-redis U`
// stacks the local disk above the shared Redis.
//   put          every tier (each keeps its own copy: the disk survives Redis going down, Redis
//                shares the block with the other replicas)
//   get          the tiers in order, the first hit wins (disk before Redis: the local copy is
//                cheaper); a tier that errors counts as a miss there
//   may_contain  any tier
//   forget_group every tier
// Metrics stay per tier (server/metrics_tier.h lists the stacked tiers, not the stack).
#pragma once

#include <vector>

#include "kv/kv_tier.h"

namespace hinge::tier {

class TierStack final : public kv::KvTierStore {
 public:
  // Tiers outlive the stack; first is asked first.
  explicit TierStack(std::vector<kv::KvTierStore*> tiers) : tiers_(std::move(tiers)) {}

  const char* name() const override { return "stack"; }
  Status put(const kv::TierBlockKey& key, std::span<const uint8_t> bytes, double ttl_s) override;
  StatusOr<bool> get(const kv::TierBlockKey& key, std::vector<uint8_t>* out) override;
  bool may_contain(const kv::TierBlockKey& key) const override;
  int64_t forget_group(uint64_t group) override;
  // Sums (entries and bytes -1 when any tier does not know).
  kv::KvTierCounters counters() const override;

 private:
  std::vector<kv::KvTierStore*> tiers_;
};

}  // namespace hinge::tier
