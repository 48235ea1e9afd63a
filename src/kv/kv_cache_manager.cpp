#include "kv/kv_cache_manager.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <utility>

namespace hinge::kv {

bool kv_debug_enabled() {
  const char* v = std::getenv("HINGE_KV_DEBUG");
  return v != nullptr && std::strcmp(v, "1") == 0;
}

KvCacheManager::KvCacheManager(const KvCacheConfig& config, BlockHashFn hash_fn)
    : config_(config), hash_fn_(hash_fn), pool_(config.num_blocks, config.block_size_tokens) {
  HINGE_CHECK(hash_fn_ != nullptr);
  HINGE_CHECK_MSG(config_.num_groups >= 1, "{} KV groups", config_.num_groups);
  HINGE_CHECK_MSG(config_.group_windows.empty() ||
                      config_.group_windows.size() == static_cast<size_t>(config_.num_groups),
                  "{} group windows for {} KV groups", config_.group_windows.size(),
                  config_.num_groups);
  for (int32_t w : config_.group_windows) HINGE_CHECK_MSG(w >= 0, "window {}", w);
  copies_.reserve(static_cast<size_t>(config_.num_groups));
}

void KvCacheManager::add_request(RequestId id, const CacheScope& scope, int32_t max_tokens) {
  HINGE_CHECK_MSG(scope.public_blocks >= 0 && scope.owner >= 0 && scope.owner < kMaxCacheOwners,
                  "request {}: bad cache scope", id.value);
  auto [it, inserted] = requests_.try_emplace(id);
  HINGE_CHECK_MSG(inserted, "request {} already live", id.value);
  RequestState& st = it->second;
  st.scope = scope;
  st.tables.resize(static_cast<size_t>(config_.num_groups));
  st.released.assign(static_cast<size_t>(config_.num_groups), 0);
  if (max_tokens > 0) {
    const size_t blocks = static_cast<size_t>(blocks_for(max_tokens));
    for (BlockTable& t : st.tables) t.reserve(blocks);
    st.hashes.reserve(blocks);
  }
}

void KvCacheManager::extend_block_hashes(std::span<const int32_t> tokens, const CacheScope& scope,
                                         std::vector<BlockHash>* hashes) const {
  if (!config_.enable_prefix_cache) return;
  const size_t bs = static_cast<size_t>(config_.block_size_tokens);
  for (size_t i = hashes->size(); i < tokens.size() / bs; ++i) {
    const BlockHash parent = chain_parent(scope, i, *hashes, config_.fingerprint);
    hashes->push_back(hash_fn_(parent, tokens.subspan(i * bs, bs)));
  }
}

ComputedBlocks KvCacheManager::get_computed_blocks(std::span<const int32_t> prompt,
                                                   const CacheScope& scope) const {
  std::vector<BlockHash> hashes;
  if (!prompt.empty()) extend_block_hashes(prompt.first(prompt.size() - 1), scope, &hashes);
  return get_computed_blocks(prompt, scope, hashes);
}

ComputedBlocks KvCacheManager::get_computed_blocks(std::span<const int32_t> prompt,
                                                   const CacheScope& scope,
                                                   std::span<const BlockHash> hashes) const {
  ComputedBlocks out;
  out.num_query_tokens = static_cast<int32_t>(prompt.size());
  if (!config_.enable_prefix_cache || prompt.empty()) return out;
  const size_t bs = static_cast<size_t>(config_.block_size_tokens);
  const int32_t groups = config_.num_groups;
  // At least one token must remain to compute (its logits start generation).
  const size_t max_blocks = (prompt.size() - 1) / bs;
  HINGE_CHECK_MSG(hashes.size() >= max_blocks, "{} block hashes for {} full blocks",
                  hashes.size(), max_blocks);
  // Full-attention groups need every block of the hit; a sliding-window group only the blocks
  // the first position left to compute reads (vLLM's sliding-window hit rule), so a hit survives
  // the eviction of the local blocks that went back to the pool behind the window. found[g][i]:
  // group g's cached block i, or kReleasedBlock when it is not cached.
  std::vector<std::vector<BlockId>> found(static_cast<size_t>(groups));
  size_t n = 0;
  for (; n < max_blocks; ++n) {
    const auto tokens = prompt.subspan(n * bs, bs);
    const BlockHash h = hashes[n];
    const BlockHash parent = chain_parent(scope, n, hashes, config_.fingerprint);
    const CacheNamespace& ns = scope.ns_of_block(n);
    bool full_hit = true;
    for (int32_t g = 0; g < groups; ++g) {
      const auto hit = pool_.lookup(h, parent, tokens, g, ns, now_);
      found[static_cast<size_t>(g)].push_back(hit ? *hit : kReleasedBlock);
      if (!hit && group_window(g) == 0) full_hit = false;
    }
    if (!full_hit) break;  // a full-attention group must hold the whole prefix
  }
  // The longest n whose window blocks are cached in every local group: run[g] counts the cached
  // blocks that end at block n - 1.
  auto window_ok = [&](size_t len) {
    for (int32_t g = 0; g < groups; ++g) {
      if (group_window(g) == 0 || len == 0) continue;
      const auto first = static_cast<size_t>(first_window_block(g, static_cast<int32_t>(len * bs)));
      const std::vector<BlockId>& f = found[static_cast<size_t>(g)];
      for (size_t i = first; i < len; ++i)
        if (f[i] == kReleasedBlock) return false;
    }
    return true;
  };
  while (n > 0 && !window_ok(n)) --n;
  out.hashes.assign(hashes.begin(), hashes.begin() + static_cast<std::ptrdiff_t>(n));
  out.blocks.resize(n * static_cast<size_t>(groups));
  for (size_t g = 0; g < static_cast<size_t>(groups); ++g) {
    const auto first = static_cast<size_t>(
        n > 0 ? first_window_block(static_cast<int32_t>(g), static_cast<int32_t>(n * bs)) : 0);
    for (size_t i = 0; i < n; ++i)
      out.blocks[g * n + i] = i < first ? kReleasedBlock : found[g][i];
  }
  out.num_cached_tokens = static_cast<int32_t>(n * bs);
  out.num_public_blocks = std::min(static_cast<int32_t>(n), scope.public_blocks);
  return out;
}

std::optional<SlotAllocation> KvCacheManager::allocate_slots(RequestId id, int32_t num_new_tokens,
                                                             const ComputedBlocks* computed) {
  HINGE_CHECK(num_new_tokens >= 0);
  RequestState& st = state(id);
  const int32_t bs = config_.block_size_tokens;
  const int32_t groups = config_.num_groups;
  int32_t num_hit_blocks = 0;
  int32_t num_hits_on_free_list = 0;
  if (computed != nullptr) {
    HINGE_CHECK_MSG(st.tables[0].empty() && st.num_tokens == 0,
                    "request {}: prefix lookup adopted after its first allocation", id.value);
  }
  if (computed != nullptr && !computed->hashes.empty()) {
    num_hit_blocks = computed->num_hit_blocks();
    HINGE_CHECK(computed->blocks.size() == static_cast<size_t>(num_hit_blocks) * groups);
    HINGE_CHECK(computed->num_cached_tokens == num_hit_blocks * bs);
    for (size_t j = 0; j < computed->blocks.size(); ++j) {
      const BlockId b = computed->blocks[j];
      const auto g = static_cast<int32_t>(j / static_cast<size_t>(num_hit_blocks));
      const auto i = static_cast<int32_t>(j % static_cast<size_t>(num_hit_blocks));
      if (i < first_window_block(g, num_hit_blocks * bs)) continue;  // behind a window: unused
      // Stale hit (evicted between query and allocation) is a caller bug.
      HINGE_CHECK_MSG(pool_.cached_hash(b) == computed->hashes[j % num_hit_blocks],
                      "request {}: computed block {} no longer cached", id.value, b.value);
      if (pool_.ref_count(b) == 0) ++num_hits_on_free_list;
    }
  }
  const int32_t base_tokens = num_hit_blocks > 0 ? num_hit_blocks * bs : st.num_tokens;
  const int32_t base_blocks = st.tables[0].num_blocks() + num_hit_blocks;
  const int32_t num_needed =
      std::max(0, blocks_for(int64_t{base_tokens} + num_new_tokens) - base_blocks);
  // Copy-on-write: the next token lands in a partial last block that others also reference.
  int32_t num_cow = 0;
  const bool partial = num_new_tokens > 0 && base_tokens % bs != 0;
  if (partial)
    for (const BlockTable& t : st.tables) num_cow += pool_.ref_count(t.back()) > 1 ? 1 : 0;
  if (!pool_.can_allocate(num_needed * groups + num_cow + num_hits_on_free_list)) {
    return std::nullopt;
  }

  // Commit. Hits first, so allocation below cannot evict them. A sliding-window group adopts
  // only the hit blocks its next query can read; the ones behind are released entries.
  for (int32_t g = 0; g < groups; ++g) {
    const int32_t first = num_hit_blocks > 0 ? first_window_block(g, num_hit_blocks * bs) : 0;
    for (int32_t i = 0; i < num_hit_blocks; ++i) {
      if (i < first) {
        st.tables[static_cast<size_t>(g)].push_back(kReleasedBlock);
        continue;
      }
      const BlockId b = computed->blocks[static_cast<size_t>(g * num_hit_blocks + i)];
      pool_.ref(b);
      st.tables[static_cast<size_t>(g)].push_back(b);
    }
    if (num_hit_blocks > 0) st.released[static_cast<size_t>(g)] = first;
  }
  if (num_hit_blocks > 0) {
    st.hashes = computed->hashes;
    st.num_tokens = base_tokens;
  }
  if (computed != nullptr) {
    num_prefix_query_tokens_ += computed->num_query_tokens;
    num_prefix_hit_tokens_ += computed->num_cached_tokens;
    num_prefix_public_hit_tokens_ += int64_t{computed->num_public_blocks} * bs;
  }
  copies_.clear();
  for (int32_t g = 0; g < groups && num_cow > 0; ++g) {
    BlockTable& t = st.tables[static_cast<size_t>(g)];
    const BlockId src = t.back();
    if (pool_.ref_count(src) <= 1) continue;
    one_.clear();
    pool_.allocate(1, &one_);
    const BlockId drop[1] = {src};
    pool_.free(drop);  // still referenced by the other sharers
    t.set(t.num_blocks() - 1, one_[0]);
    copies_.push_back(BlockCopy{src, one_[0]});
    ++num_cow_copies_;
  }
  allocated_.clear();
  pool_.allocate(num_needed * groups, &allocated_);
  for (int32_t g = 0; g < groups; ++g)
    for (int32_t i = 0; i < num_needed; ++i)
      st.tables[static_cast<size_t>(g)].push_back(
          allocated_[static_cast<size_t>(g * num_needed + i)]);
  st.num_tokens += num_new_tokens;
  return SlotAllocation{.new_blocks = allocated_, .copies = copies_};
}

void KvCacheManager::cache_full_blocks(RequestId id, std::span<const int32_t> tokens,
                                       int32_t num_tokens, std::span<const BlockHash> known) {
  RequestState& st = state(id);
  HINGE_CHECK_MSG(num_tokens >= 0 && num_tokens <= st.num_tokens &&
                      static_cast<size_t>(num_tokens) <= tokens.size(),
                  "request {}: {} tokens to cache, {} reserved, {} given", id.value, num_tokens,
                  st.num_tokens, tokens.size());
  if (!config_.enable_prefix_cache || !st.publish || !may_publish(st.scope)) return;
  const size_t bs = static_cast<size_t>(config_.block_size_tokens);
  const size_t num_full = static_cast<size_t>(num_tokens) / bs;
  for (size_t i = st.hashes.size(); i < num_full; ++i) {
    // A lookup walks the chain from its first block, so a block whose predecessor lost its
    // entry (expired while in use) could never hit: it and the rest stay uncached (and
    // unannounced: an announced block's parent is always cached).
    if (i > 0 && !pool_.announced(st.hashes[i - 1])) return;
    const BlockHash parent = chain_parent(st.scope, i, st.hashes, config_.fingerprint);
    const auto block_tokens = tokens.subspan(i * bs, bs);
    const BlockHash h = i < known.size() ? known[i] : hash_fn_(parent, block_tokens);
    // Another block may hold the same content (computed concurrently) or the same hash with
    // other content (a collision): the pool keeps both, lookups compare tokens and parents.
    for (int32_t g = 0; g < config_.num_groups; ++g) {
      const BlockId b = st.tables[static_cast<size_t>(g)][static_cast<int32_t>(i)];
      if (b == kReleasedBlock) continue;  // behind a window before it was published
      const bool announce = pool_.cache_block(
          b, h, parent, block_tokens, g, st.scope.ns_of_block(i), st.scope.owner_of_block(i), now_,
          i < static_cast<size_t>(st.scope.public_blocks) ? 0 : st.scope.epoch);
      if (announce && events_on_)
        events_.stored(external_block_hash(h), i == 0 ? 0 : external_block_hash(st.hashes[i - 1]),
                       block_tokens);
    }
    st.hashes.push_back(h);
  }
}

void KvCacheManager::uncache_uncomputed(RequestId id, int32_t num_computed_tokens) {
  RequestState& st = state(id);
  const size_t keep = static_cast<size_t>(std::max(0, num_computed_tokens)) /
                      static_cast<size_t>(config_.block_size_tokens);
  while (st.hashes.size() > keep) {
    // Registered this step (hits and forks only share computed blocks): drop it even when a
    // request admitted in the same step hit it, that request failed with this one.
    for (const BlockTable& t : st.tables)
      pool_.uncache(t[static_cast<int32_t>(st.hashes.size() - 1)]);
    st.hashes.pop_back();
  }
}

void KvCacheManager::enable_events() {
  events_on_ = true;
  pool_.set_event_log(&events_);
  events_.all_cleared();
}

int32_t KvCacheManager::reset_prefix_cache() {
  for (auto& [id, st] : requests_) st.publish = false;
  return pool_.uncache_all();
}

int32_t KvCacheManager::purge_owner(int32_t owner) {
  for (auto& [id, st] : requests_)
    if (st.scope.owner == owner) st.publish = false;
  return pool_.uncache_owner(owner);
}

bool KvCacheManager::may_publish(const CacheScope& scope) const {
  if (retired_owners_.contains(scope.owner)) return false;
  const auto it = owner_epoch_.find(scope.owner);
  return it == owner_epoch_.end() || it->second == scope.epoch;
}

int32_t KvCacheManager::retire_owner(int32_t owner) {
  retired_owners_[owner] = true;
  return purge_owner(owner);
}

int32_t KvCacheManager::retire_owner_epochs(int32_t owner, uint64_t current) {
  const auto [it, fresh] = owner_epoch_.try_emplace(owner, current);
  if (!fresh && it->second == current) return 0;  // unchanged: nothing of another epoch is cached
  it->second = current;
  for (auto& [id, st] : requests_)
    if (st.scope.owner == owner && st.scope.epoch != current) st.publish = false;
  return pool_.uncache_owner(owner, &current);
}

void KvCacheManager::fork(RequestId parent, RequestId child) {
  HINGE_CHECK_MSG(!requests_.contains(child), "fork: request {} already live", child.value);
  const RequestState& from = state(parent);
  RequestState copy = from;
  for (size_t g = 0; g < copy.tables.size(); ++g) {
    copy.tables[g].reserve(from.tables[g].capacity());  // the child grows to the same length
    for (BlockId b : copy.tables[g].blocks())
      if (b != kReleasedBlock) pool_.ref(b);
  }
  copy.hashes.reserve(from.hashes.capacity());
  requests_.emplace(child, std::move(copy));
}

void KvCacheManager::trim_slots(RequestId id, int32_t num_tokens) {
  RequestState& st = state(id);
  const int32_t bs = config_.block_size_tokens;
  HINGE_CHECK_MSG(num_tokens >= 0 && num_tokens <= st.num_tokens &&
                      static_cast<int64_t>(st.hashes.size()) * bs <= num_tokens,
                  "request {}: trim to {} tokens ({} reserved, {} cached blocks)", id.value,
                  num_tokens, st.num_tokens, st.hashes.size());
  const int32_t keep = blocks_for(num_tokens);
  for (BlockTable& t : st.tables) {
    const int32_t n = t.num_blocks();
    if (n <= keep) continue;
    scratch_.clear();
    for (int32_t i = n - 1; i >= keep; --i)
      if (t[i] != kReleasedBlock) scratch_.push_back(t[i]);
    pool_.free(scratch_);
    t.erase(keep, n - keep);
  }
  st.num_tokens = num_tokens;
}

void KvCacheManager::free(RequestId id) {
  auto it = requests_.find(id);
  HINGE_CHECK_MSG(it != requests_.end(), "free of unknown request {}", id.value);
  // Tail-first across the groups too: a sequence's last positions are evicted first.
  const auto& tables = it->second.tables;
  scratch_.clear();
  for (int32_t i = tables[0].num_blocks() - 1; i >= 0; --i)
    for (const BlockTable& t : tables)
      if (t[i] != kReleasedBlock) scratch_.push_back(t[i]);
  pool_.free(scratch_);
  requests_.erase(it);
}

int32_t KvCacheManager::first_window_block(int32_t group, int32_t num_computed_tokens) const {
  const int32_t w = group_window(group);
  if (w == 0) return 0;
  const int64_t first_key = std::max<int64_t>(0, int64_t{num_computed_tokens} - w + 1);
  return static_cast<int32_t>(first_key / config_.block_size_tokens);
}

int32_t KvCacheManager::release_behind_window(RequestId id, int32_t num_computed_tokens) {
  if (config_.group_windows.empty()) return 0;
  RequestState& st = state(id);
  int32_t released = 0;
  for (int32_t g = 0; g < config_.num_groups; ++g) {
    if (group_window(g) == 0) continue;
    // The next query sits at position num_computed_tokens and reads keys from
    // num_computed_tokens - w + 1 on: blocks wholly before that are never read again.
    BlockTable& t = st.tables[static_cast<size_t>(g)];
    const int32_t upto = std::min<int32_t>(first_window_block(g, num_computed_tokens), t.num_blocks());
    int32_t& done = st.released[static_cast<size_t>(g)];
    for (; done < upto; ++done) {
      const BlockId b[1] = {t[done]};
      pool_.free(b);
      t.set(done, kReleasedBlock);
      ++released;
    }
  }
  num_window_released_ += released;
  return released;
}

void KvCacheManager::drop_blocks(RequestId id, int32_t first, int32_t count) {
  RequestState& st = state(id);
  for (int32_t g = 0; g < config_.num_groups; ++g) {
    BlockTable& t = st.tables[static_cast<size_t>(g)];
    HINGE_CHECK(first >= 0 && count >= 0 && first + count <= t.num_blocks());
    // A sliding-window group's entries [0, released) were released behind its window already:
    // those in the range are dropped without a reference to free.
    int32_t& released = st.released[static_cast<size_t>(g)];
    const int32_t gone = std::clamp(released - first, 0, count);
    pool_.free(t.blocks().subspan(static_cast<size_t>(first + gone),
                                  static_cast<size_t>(count - gone)));
    t.erase(first, count);
    released -= gone;
  }
  st.num_tokens -= count * config_.block_size_tokens;
  HINGE_CHECK(st.num_tokens >= 0);
  if (st.hashes.size() > static_cast<size_t>(first)) st.hashes.resize(static_cast<size_t>(first));
  st.publish = false;
}

int32_t KvCacheManager::num_held_blocks(RequestId id, int32_t group) const {
  const RequestState& st = state(id);
  return st.tables[static_cast<size_t>(group)].num_blocks() - st.released[static_cast<size_t>(group)];
}

KvCacheStats KvCacheManager::stats() const {
  KvCacheStats s;
  s.pool = pool_.counters();
  s.num_requests = static_cast<int32_t>(requests_.size());
  s.num_prefix_query_tokens = num_prefix_query_tokens_;
  s.num_prefix_hit_tokens = num_prefix_hit_tokens_;
  s.num_prefix_public_hit_tokens = num_prefix_public_hit_tokens_;
  s.num_cow_copies = num_cow_copies_;
  s.num_window_released_blocks = num_window_released_;
  s.num_withheld_blocks = num_withheld();
  return s;
}

std::span<const BlockId> KvCacheManager::withhold(int32_t n) {
  n = std::clamp(n, 0, pool_.num_free_blocks());
  const size_t before = withheld_.size();
  pool_.allocate(n, &withheld_);
  return std::span<const BlockId>(withheld_).subspan(before);
}

int32_t KvCacheManager::restore(int32_t n) {
  n = std::clamp(n, 0, num_withheld());
  const std::span<const BlockId> back =
      std::span<const BlockId>(withheld_).subspan(withheld_.size() - static_cast<size_t>(n));
  pool_.free(back);
  withheld_.resize(withheld_.size() - static_cast<size_t>(n));
  return n;
}

Status KvCacheManager::check_invariants() const {
  HINGE_RETURN_IF_ERROR(pool_.check_invariants());
  std::vector<int32_t> refs(static_cast<size_t>(pool_.num_blocks()), 0);
  for (const auto& [id, st] : requests_) {
    if (st.tables.size() != static_cast<size_t>(config_.num_groups))
      return Status::Errorf("request {}: {} block tables for {} KV groups", id.value,
                            st.tables.size(), config_.num_groups);
    for (size_t g = 0; g < st.tables.size(); ++g) {
      const BlockTable& t = st.tables[g];
      if (t.num_blocks() != blocks_for(st.num_tokens))
        return Status::Errorf("request {}: {} blocks in group {} for {} tokens", id.value,
                              t.num_blocks(), g, st.num_tokens);
      if (static_cast<int32_t>(st.hashes.size()) > t.num_blocks())
        return Status::Errorf("request {}: {} hashes > {} blocks", id.value, st.hashes.size(),
                              t.num_blocks());
      const int32_t released = st.released[g];
      if (released > 0 && group_window(static_cast<int32_t>(g)) == 0)
        return Status::Errorf("request {}: released blocks in full-attention group {}", id.value, g);
      for (int32_t i = 0; i < t.num_blocks(); ++i) {
        const BlockId b = t[i];
        if ((b == kReleasedBlock) != (i < released))
          return Status::Errorf("request {}: group {} entry {} is {} with {} released", id.value,
                                g, i, b.value, released);
        if (b == kReleasedBlock) continue;
        if (b.value < 0 || b.value >= pool_.num_blocks())
          return Status::Errorf("request {}: bad block {}", id.value, b.value);
        ++refs[static_cast<size_t>(b.value)];
      }
    }
  }
  for (const BlockId b : withheld_) {
    if (b.value < 0 || b.value >= pool_.num_blocks() || refs[static_cast<size_t>(b.value)] != 0)
      return Status::Errorf("withheld block {} is out of range or in a table", b.value);
    refs[static_cast<size_t>(b.value)] = 1;
  }
  for (int32_t b = 0; b < pool_.num_blocks(); ++b) {
    if (pool_.ref_count(BlockId(b)) != refs[static_cast<size_t>(b)])
      return Status::Errorf("block {}: refcount {} but {} table references", b,
                            pool_.ref_count(BlockId(b)), refs[static_cast<size_t>(b)]);
  }
  return Status::Ok();
}

std::string KvCacheManager::debug_string(int32_t blocks_per_line) const {
  const KvCacheStats s = stats();
  std::string out = fmt::format(
      "kv: {} blocks x {} tokens | free {} (cached {}) used {} shared {} | requests {} | "
      "evictions {} | prefix hit {}/{} tokens | cow {}\n",
      s.pool.num_total_blocks, config_.block_size_tokens, s.pool.num_free_blocks,
      s.pool.num_cached_free_blocks, s.pool.num_used_blocks, s.pool.num_shared_blocks,
      s.num_requests, s.pool.num_evictions, s.num_prefix_hit_tokens, s.num_prefix_query_tokens,
      s.num_cow_copies);
  out += pool_.render_map(blocks_per_line);
  return out;
}

}  // namespace hinge::kv
