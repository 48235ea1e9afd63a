#include "kv/kv_tier.h"

namespace hinge::kv {

std::vector<std::string> TierLru::insert(const std::string& name, int64_t bytes, uint64_t group) {
  std::vector<std::string> evicted;
  erase(name);
  if (bytes > capacity_) {
    evicted.push_back(name);
    return evicted;
  }
  order_.push_front(Entry{name, bytes, group});
  index_[name] = order_.begin();
  bytes_ += bytes;
  while (bytes_ > capacity_) {
    const Entry& last = order_.back();
    evicted.push_back(last.name);
    bytes_ -= last.bytes;
    index_.erase(last.name);
    order_.pop_back();
  }
  return evicted;
}

bool TierLru::touch(const std::string& name) {
  auto it = index_.find(name);
  if (it == index_.end()) return false;
  order_.splice(order_.begin(), order_, it->second);
  return true;
}

void TierLru::erase(const std::string& name) {
  auto it = index_.find(name);
  if (it == index_.end()) return;
  bytes_ -= it->second->bytes;
  order_.erase(it->second);
  index_.erase(it);
}

std::vector<std::string> TierLru::erase_group(uint64_t group) {
  std::vector<std::string> out;
  for (auto it = order_.begin(); it != order_.end();) {
    if (it->group != group) {
      ++it;
      continue;
    }
    out.push_back(it->name);
    bytes_ -= it->bytes;
    index_.erase(it->name);
    it = order_.erase(it);
  }
  return out;
}

std::vector<std::string> TierLru::names() const {
  std::vector<std::string> out;
  for (auto it = order_.rbegin(); it != order_.rend(); ++it) out.push_back(it->name);
  return out;
}

}  // namespace hinge::kv
