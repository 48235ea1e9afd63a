#include "route/prefix_index.h"

#include <xxhash.h>

namespace hinge::route {

namespace {

uint64_t block_hash(uint64_t parent, std::span<const int32_t> ids) {
  const uint64_t h = XXH3_64bits_withSeed(ids.data(), ids.size_bytes(), parent);
  return h == 0 ? 1 : h;
}

}  // namespace

void content_chain(std::span<const int32_t> tokens, int32_t block_size, std::vector<uint64_t>* out) {
  out->clear();
  if (block_size <= 0) return;
  const size_t bs = static_cast<size_t>(block_size);
  uint64_t parent = 0;
  for (size_t i = 0; (i + 1) * bs <= tokens.size(); ++i) {
    parent = block_hash(parent, tokens.subspan(i * bs, bs));
    out->push_back(parent);
  }
}

bool PrefixIndex::block_stored(std::span<const int64_t> hashes, std::optional<int64_t> parent,
                               std::span<const int32_t> tokens, int32_t block_size) {
  if (block_size <= 0 || tokens.size() != hashes.size() * static_cast<size_t>(block_size)) {
    ++orphans_;
    return false;
  }
  uint64_t p = 0;
  if (parent) {
    const auto it = by_event_.find(*parent);
    if (it == by_event_.end()) {
      ++orphans_;
      return false;
    }
    p = it->second;
  }
  const size_t bs = static_cast<size_t>(block_size);
  for (size_t i = 0; i < hashes.size(); ++i) {
    p = block_hash(p, tokens.subspan(i * bs, bs));
    const auto [it, fresh] = by_event_.try_emplace(hashes[i], p);
    if (!fresh) continue;  // announced twice: keep the first
    ++cached_[p];
  }
  return true;
}

void PrefixIndex::block_removed(std::span<const int64_t> hashes) {
  for (const int64_t h : hashes) {
    const auto it = by_event_.find(h);
    if (it == by_event_.end()) continue;
    const auto c = cached_.find(it->second);
    if (c != cached_.end() && --c->second <= 0) cached_.erase(c);
    by_event_.erase(it);
  }
}

void PrefixIndex::clear() {
  by_event_.clear();
  cached_.clear();
  routed_.clear();
}

int32_t PrefixIndex::matched_blocks(std::span<const uint64_t> chain, double now) const {
  int32_t n = 0;
  for (const uint64_t h : chain) {
    if (!cached_.contains(h)) {
      const auto r = routed_.find(h);
      if (r == routed_.end() || r->second < now) break;
    }
    ++n;
  }
  return n;
}

void PrefixIndex::note_routed(std::span<const uint64_t> chain, double now, double ttl_s) {
  if (routed_.size() > (size_t{1} << 16)) std::erase_if(routed_, [&](const auto& e) { return e.second < now; });
  for (const uint64_t h : chain) routed_[h] = now + ttl_s;
}

}  // namespace hinge::route
