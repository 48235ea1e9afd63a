#include "tier/tier_stack.h"

#include <algorithm>

namespace hinge::tier {

Status TierStack::put(const kv::TierBlockKey& key, std::span<const uint8_t> bytes, double ttl_s) {
  Status first_error = Status::Ok();
  bool stored = false;
  for (kv::KvTierStore* t : tiers_) {
    Status st = t->put(key, bytes, ttl_s);
    if (st.ok())
      stored = true;
    else if (first_error.ok())
      first_error = st.with_context(t->name());
  }
  return stored ? Status::Ok() : first_error;
}

StatusOr<bool> TierStack::get(const kv::TierBlockKey& key, std::vector<uint8_t>* out) {
  Status first_error = Status::Ok();
  for (kv::KvTierStore* t : tiers_) {
    if (!t->may_contain(key)) continue;
    auto hit = t->get(key, out);
    if (hit.ok() && *hit) return true;
    if (!hit.ok() && first_error.ok()) first_error = hit.status().with_context(t->name());
  }
  if (!first_error.ok()) return first_error;
  return false;
}

bool TierStack::may_contain(const kv::TierBlockKey& key) const {
  for (const kv::KvTierStore* t : tiers_)
    if (t->may_contain(key)) return true;
  return false;
}

int64_t TierStack::forget_group(uint64_t group) {
  int64_t n = 0;
  for (kv::KvTierStore* t : tiers_) n += t->forget_group(group);
  return n;
}

kv::KvTierCounters TierStack::counters() const {
  kv::KvTierCounters s;
  s.up = 1;
  for (const kv::KvTierStore* t : tiers_) {
    const kv::KvTierCounters c = t->counters();
    s.puts += c.puts;
    s.put_errors += c.put_errors;
    s.hits += c.hits;
    s.misses += c.misses;
    s.rejected += c.rejected;
    s.get_errors += c.get_errors;
    s.evictions += c.evictions;
    s.purged += c.purged;
    s.entries = (s.entries < 0 || c.entries < 0) ? -1 : s.entries + c.entries;
    s.bytes = (s.bytes < 0 || c.bytes < 0) ? -1 : s.bytes + c.bytes;
    s.capacity_bytes += c.capacity_bytes;
    s.up = std::min(s.up, c.up);
  }
  return s;
}

}  // namespace hinge::tier
