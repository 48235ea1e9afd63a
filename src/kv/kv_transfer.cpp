#include "kv/kv_transfer.h"

#include <algorithm>
#include <cstring>
#include <limits>

namespace hinge {

namespace {

// The id import holds its blocks under while it writes them; the scheduler numbers requests
// from 1 upwards and never reaches it.
constexpr kv::RequestId kImportRequest{std::numeric_limits<uint64_t>::max()};

}  // namespace

int64_t KvTransfer::bytes_per_token_block() const {
  return arena_->bytes_per_block() * kv_->num_groups();
}

Status KvTransfer::check_full_attention() const {
  for (int32_t g = 0; g < kv_->num_groups(); ++g)
    if (kv_->group_window(g) != 0)
      return Status::Error(
          "this model has sliding-window layers, whose KV is not kept for a whole prefix; the "
          "conversation is saved without its KV blocks");
  return Status::Ok();
}

StatusOr<int32_t> KvTransfer::export_prefix(std::span<const int32_t> tokens,
                                            const kv::CacheScope& scope,
                                            std::vector<uint8_t>* out) const {
  HINGE_RETURN_IF_ERROR(check_full_attention());
  if (tokens.empty() || !kv_->prefix_cache_enabled()) return 0;
  // get_computed_blocks leaves one token to compute: one more token lets every full block of
  // `tokens` count.
  std::vector<int32_t> probe(tokens.begin(), tokens.end());
  probe.push_back(0);
  const kv::ComputedBlocks hit = kv_->get_computed_blocks(probe, scope);
  const int32_t n = hit.num_hit_blocks();
  const int64_t bpb = arena_->bytes_per_block();
  const size_t start = out->size();
  out->resize(start + static_cast<size_t>(n * bytes_per_token_block()));
  uint8_t* dst = out->data() + start;
  for (int32_t i = 0; i < n; ++i)
    for (int32_t g = 0; g < kv_->num_groups(); ++g) {
      const kv::BlockId b = hit.blocks[static_cast<size_t>(g * n + i)];
      std::memcpy(dst, arena_->base() + int64_t{b.value} * bpb, static_cast<size_t>(bpb));
      dst += bpb;
    }
  return n;
}

StatusOr<int32_t> KvTransfer::import_prefix(std::span<const int32_t> tokens,
                                            const kv::CacheScope& scope,
                                            std::span<const uint8_t> bytes,
                                            int32_t first_block) {
  HINGE_RETURN_IF_ERROR(check_full_attention());
  const int64_t per = bytes_per_token_block();
  const int32_t bs = kv_->block_size_tokens();
  if (static_cast<int64_t>(bytes.size()) % per != 0)
    return Status::Errorf("KV bytes: {} is not a whole number of {}-byte blocks", bytes.size(),
                          per);
  const int64_t given = static_cast<int64_t>(bytes.size()) / per + first_block;
  if (given > static_cast<int64_t>(tokens.size()) / bs)
    return Status::Errorf("KV bytes: {} blocks for {} tokens ({} full blocks)", given,
                          tokens.size(), tokens.size() / static_cast<size_t>(bs));
  if (given == 0 || !kv_->prefix_cache_enabled()) return 0;
  const int32_t n = static_cast<int32_t>(given);
  std::vector<int32_t> probe(tokens.begin(), tokens.begin() + int64_t{n} * bs);
  probe.push_back(0);
  kv::ComputedBlocks hit = kv_->get_computed_blocks(probe, scope);
  const int32_t have = std::min(hit.num_hit_blocks(), n);
  if (have == n) return n;
  if (have < first_block) return have;  // the chain's head is gone: the rest cannot attach
  // The adopted head counts in the prefix counters as a query that hit in full (an import is
  // not a prompt: nothing it brings is a miss).
  hit.num_query_tokens = hit.num_cached_tokens;
  // Adopting the cached head keeps the chain whole (block i's hash depends on blocks < i); the
  // rest is written into fresh blocks one at a time, as far as free blocks go.
  kv_->add_request(kImportRequest, scope, n * bs);
  int32_t held = 0;
  const int64_t bpb = arena_->bytes_per_block();
  for (int32_t i = have; i < n; ++i) {
    const bool first = i == have;
    const auto alloc = kv_->allocate_slots(kImportRequest, bs, first ? &hit : nullptr);
    if (!alloc) break;
    const uint8_t* src = bytes.data() + static_cast<int64_t>(i - first_block) * per;
    for (int32_t g = 0; g < kv_->num_groups(); ++g) {
      const kv::BlockId b = kv_->block_table(kImportRequest, g)[i];
      std::memcpy(arena_->base() + int64_t{b.value} * bpb, src + g * bpb,
                  static_cast<size_t>(bpb));
    }
    held = i + 1;
  }
  if (held > 0) kv_->cache_full_blocks(kImportRequest, probe, held * bs);
  kv_->free(kImportRequest);
  return held > 0 ? held : have;
}

int64_t KvTransfer::wipe_free_blocks() {
  kv_->drop_cached_free();
  const int64_t bpb = arena_->bytes_per_block();
  int64_t zeroed = 0;
  for (const kv::BlockId b : kv_->pool().free_list()) {
    std::memset(arena_->base() + int64_t{b.value} * bpb, 0, static_cast<size_t>(bpb));
    zeroed += bpb;
  }
  return zeroed;
}

}  // namespace hinge
