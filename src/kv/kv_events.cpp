#include "kv/kv_events.h"

#include <utility>

namespace hinge::kv {

uint64_t external_block_hash(const BlockHash& h) {
  const uint64_t v = h.lo & 0x7fffffffffffffffULL;
  return v == 0 ? 1 : v;
}

void KvEventLog::stored(uint64_t hash, uint64_t parent, std::span<const int32_t> tokens) {
  const bool joins = !events_.empty() && events_.back().kind == KvEventKind::kStored &&
                     parent != 0 && hashes_.back() == parent;
  if (!joins) {
    events_.push_back(KvEvent{.kind = KvEventKind::kStored,
                              .parent = parent,
                              .first_hash = static_cast<uint32_t>(hashes_.size()),
                              .num_hashes = 0,
                              .first_token = static_cast<uint32_t>(tokens_.size()),
                              .num_tokens = 0});
  }
  KvEvent& e = events_.back();
  hashes_.push_back(hash);
  ++e.num_hashes;
  tokens_.insert(tokens_.end(), tokens.begin(), tokens.end());
  e.num_tokens += static_cast<uint32_t>(tokens.size());
}

void KvEventLog::removed(uint64_t hash) {
  if (events_.empty() || events_.back().kind != KvEventKind::kRemoved) {
    events_.push_back(KvEvent{.kind = KvEventKind::kRemoved,
                              .first_hash = static_cast<uint32_t>(hashes_.size())});
  }
  hashes_.push_back(hash);
  ++events_.back().num_hashes;
}

void KvEventLog::all_cleared() {
  clear();
  events_.push_back(KvEvent{.kind = KvEventKind::kAllCleared});
}

void KvEventLog::clear() {
  events_.clear();
  hashes_.clear();
  tokens_.clear();
}

void KvEventLog::swap(KvEventLog& other) noexcept {
  events_.swap(other.events_);
  hashes_.swap(other.hashes_);
  tokens_.swap(other.tokens_);
}

}  // namespace hinge::kv
