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
}

void KvCacheManager::add_request(RequestId id, CacheNamespace ns, int32_t max_tokens) {
  auto [it, inserted] = requests_.try_emplace(id);
  HINGE_CHECK_MSG(inserted, "request {} already live", id.value);
  it->second.ns = ns;
  if (max_tokens > 0) {
    const size_t blocks = static_cast<size_t>(blocks_for(max_tokens));
    it->second.table.reserve(blocks);
    it->second.hashes.reserve(blocks);
  }
}

ComputedBlocks KvCacheManager::get_computed_blocks(std::span<const int32_t> prompt,
                                                   CacheNamespace ns) const {
  ComputedBlocks out;
  out.num_query_tokens = static_cast<int32_t>(prompt.size());
  if (!config_.enable_prefix_cache || prompt.empty()) return out;
  const size_t bs = static_cast<size_t>(config_.block_size_tokens);
  // At least one token must remain to compute (its logits start generation).
  const size_t max_blocks = (prompt.size() - 1) / bs;
  BlockHash parent = namespace_root_hash(ns, config_.fingerprint);
  for (size_t i = 0; i < max_blocks; ++i) {
    const auto tokens = prompt.subspan(i * bs, bs);
    const BlockHash h = hash_fn_(parent, tokens);
    const auto hit = pool_.lookup(h, parent, tokens);
    if (!hit) break;
    out.blocks.push_back(*hit);
    out.hashes.push_back(h);
    parent = h;
  }
  out.num_cached_tokens = static_cast<int32_t>(out.blocks.size() * bs);
  return out;
}

std::optional<SlotAllocation> KvCacheManager::allocate_slots(RequestId id, int32_t num_new_tokens,
                                                             const ComputedBlocks* computed) {
  HINGE_CHECK(num_new_tokens >= 0);
  RequestState& st = state(id);
  const int32_t bs = config_.block_size_tokens;
  int32_t num_hit_blocks = 0;
  int32_t num_hits_on_free_list = 0;
  if (computed != nullptr) {
    HINGE_CHECK_MSG(st.table.empty() && st.num_tokens == 0,
                    "request {}: prefix lookup adopted after its first allocation", id.value);
  }
  if (computed != nullptr && !computed->blocks.empty()) {
    HINGE_CHECK(computed->hashes.size() == computed->blocks.size());
    HINGE_CHECK(computed->num_cached_tokens == static_cast<int32_t>(computed->blocks.size()) * bs);
    num_hit_blocks = static_cast<int32_t>(computed->blocks.size());
    for (int32_t i = 0; i < num_hit_blocks; ++i) {
      const BlockId b = computed->blocks[static_cast<size_t>(i)];
      // Stale hit (evicted between query and allocation) is a caller bug.
      HINGE_CHECK_MSG(pool_.cached_hash(b) == computed->hashes[static_cast<size_t>(i)],
                      "request {}: computed block {} no longer cached", id.value, b.value);
      if (pool_.ref_count(b) == 0) ++num_hits_on_free_list;
    }
  }
  const int32_t base_tokens = num_hit_blocks > 0 ? num_hit_blocks * bs : st.num_tokens;
  const int32_t base_blocks = st.table.num_blocks() + num_hit_blocks;
  const int32_t num_needed =
      std::max(0, blocks_for(int64_t{base_tokens} + num_new_tokens) - base_blocks);
  // Copy-on-write: the next token lands in a partial last block that others also reference.
  const bool cow =
      num_new_tokens > 0 && base_tokens % bs != 0 && pool_.ref_count(st.table.back()) > 1;
  if (!pool_.can_allocate(num_needed + (cow ? 1 : 0) + num_hits_on_free_list)) {
    return std::nullopt;
  }

  // Commit. Hits first, so allocation below cannot evict them.
  for (int32_t i = 0; i < num_hit_blocks; ++i) {
    pool_.ref(computed->blocks[static_cast<size_t>(i)]);
    st.table.push_back(computed->blocks[static_cast<size_t>(i)]);
  }
  if (num_hit_blocks > 0) {
    st.hashes = computed->hashes;
    st.num_tokens = base_tokens;
  }
  if (computed != nullptr) {
    num_prefix_query_tokens_ += computed->num_query_tokens;
    num_prefix_hit_tokens_ += computed->num_cached_tokens;
  }
  SlotAllocation out;
  if (cow) {
    const BlockId src = st.table.back();
    allocated_.clear();
    pool_.allocate(1, &allocated_);
    const BlockId one[1] = {src};
    pool_.free(one);  // still referenced by the other sharers
    st.table.set(st.table.num_blocks() - 1, allocated_[0]);
    out.copy = BlockCopy{src, allocated_[0]};
    ++num_cow_copies_;
  }
  allocated_.clear();
  pool_.allocate(num_needed, &allocated_);
  for (BlockId b : allocated_) st.table.push_back(b);
  out.new_blocks = st.table.blocks().last(allocated_.size());
  st.num_tokens += num_new_tokens;
  return out;
}

void KvCacheManager::cache_full_blocks(RequestId id, std::span<const int32_t> tokens,
                                       int32_t num_tokens) {
  RequestState& st = state(id);
  HINGE_CHECK_MSG(num_tokens >= 0 && num_tokens <= st.num_tokens &&
                      static_cast<size_t>(num_tokens) <= tokens.size(),
                  "request {}: {} tokens to cache, {} reserved, {} given", id.value, num_tokens,
                  st.num_tokens, tokens.size());
  if (!config_.enable_prefix_cache) return;
  const size_t bs = static_cast<size_t>(config_.block_size_tokens);
  const size_t num_full = static_cast<size_t>(num_tokens) / bs;
  for (size_t i = st.hashes.size(); i < num_full; ++i) {
    const BlockHash parent =
        i == 0 ? namespace_root_hash(st.ns, config_.fingerprint) : st.hashes[i - 1];
    const auto block_tokens = tokens.subspan(i * bs, bs);
    const BlockHash h = hash_fn_(parent, block_tokens);
    // Another block may hold the same content (computed concurrently) or the same hash with
    // other content (a collision): the pool keeps both, lookups compare tokens and parents.
    pool_.cache_block(st.table[static_cast<int32_t>(i)], h, parent, block_tokens);
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
    pool_.uncache(st.table[static_cast<int32_t>(st.hashes.size() - 1)]);
    st.hashes.pop_back();
  }
}

void KvCacheManager::fork(RequestId parent, RequestId child) {
  HINGE_CHECK_MSG(!requests_.contains(child), "fork: request {} already live", child.value);
  const RequestState& from = state(parent);
  RequestState copy = from;
  copy.table.reserve(from.table.capacity());  // the child grows to the same length
  copy.hashes.reserve(from.hashes.capacity());
  for (BlockId b : copy.table.blocks()) pool_.ref(b);
  requests_.emplace(child, std::move(copy));
}

void KvCacheManager::free(RequestId id) {
  auto it = requests_.find(id);
  HINGE_CHECK_MSG(it != requests_.end(), "free of unknown request {}", id.value);
  const auto blocks = it->second.table.blocks();
  scratch_.assign(blocks.rbegin(), blocks.rend());
  pool_.free(scratch_);
  requests_.erase(it);
}

KvCacheStats KvCacheManager::stats() const {
  KvCacheStats s;
  s.pool = pool_.counters();
  s.num_requests = static_cast<int32_t>(requests_.size());
  s.num_prefix_query_tokens = num_prefix_query_tokens_;
  s.num_prefix_hit_tokens = num_prefix_hit_tokens_;
  s.num_cow_copies = num_cow_copies_;
  return s;
}

Status KvCacheManager::check_invariants() const {
  HINGE_RETURN_IF_ERROR(pool_.check_invariants());
  std::vector<int32_t> refs(static_cast<size_t>(pool_.num_blocks()), 0);
  for (const auto& [id, st] : requests_) {
    if (st.table.num_blocks() != blocks_for(st.num_tokens))
      return Status::Errorf("request {}: {} blocks for {} tokens", id.value, st.table.num_blocks(),
                            st.num_tokens);
    if (static_cast<int32_t>(st.hashes.size()) > st.table.num_blocks())
      return Status::Errorf("request {}: {} hashes > {} blocks", id.value, st.hashes.size(),
                            st.table.num_blocks());
    for (BlockId b : st.table.blocks()) {
      if (b.value < 0 || b.value >= pool_.num_blocks())
        return Status::Errorf("request {}: bad block {}", id.value, b.value);
      ++refs[static_cast<size_t>(b.value)];
    }
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
