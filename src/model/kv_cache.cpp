#include "model/kv_cache.h"

#include <numeric>

namespace hinge {
namespace {
constexpr int32_t kBlock = 16;

kv::KvArena make_arena(const ModelConfig& c, int64_t max_tokens, kv::KvDtype k, kv::KvDtype v) {
  const kv::KvSpec spec = kv_spec_for(c, k, v, kBlock);
  auto arena = kv::KvArena::create(spec, std::max<int64_t>(1, (max_tokens + kBlock - 1) / kBlock));
  HINGE_CHECK_MSG(arena.ok(), "{}", arena.status().message());
  return std::move(arena).value();
}
}  // namespace

kv::KvSpec kv_spec_for(const ModelConfig& c, kv::KvDtype k_dtype, kv::KvDtype v_dtype,
                       int32_t block_size_tokens) {
  return kv::KvSpec{.n_layers = static_cast<int32_t>(c.n_layers),
                    .n_kv_heads = static_cast<int32_t>(c.n_kv_heads),
                    .head_dim = static_cast<int32_t>(c.head_dim),
                    .k_dtype = k_dtype,
                    .v_dtype = v_dtype,
                    .block_size_tokens = block_size_tokens};
}

std::vector<kv::KvGroup> window_groups(const ModelConfig& c) {
  std::vector<int32_t> global, local;
  for (int32_t l = 0; l < static_cast<int32_t>(c.n_layers); ++l) (c.is_local(l) ? local : global).push_back(l);
  // Groups of equal size (a block holds the largest group's layers, smaller ones waste the
  // rest): as large as the smaller kind allows, as vLLM's hybrid allocator does.
  const size_t size = global.empty() ? local.size() : std::min(global.size(), local.size());
  std::vector<kv::KvGroup> groups;
  auto add = [&](const std::vector<int32_t>& layers, int32_t window) {
    for (size_t i = 0; i < layers.size(); i += size) {
      kv::KvGroup g;
      g.layers.assign(layers.begin() + static_cast<std::ptrdiff_t>(i),
                      layers.begin() + static_cast<std::ptrdiff_t>(std::min(layers.size(), i + size)));
      g.window = window;
      groups.push_back(std::move(g));
    }
  };
  add(global, 0);
  add(local, c.sliding_window);
  return groups;
}

StatusOr<kv::KvSpec> kv_spec_for(const ModelConfig& c, kv::KvDtype k_dtype, kv::KvDtype v_dtype,
                                 int32_t block_size_tokens, int32_t kv_groups) {
  if (kv_groups < 1) return Status::Errorf("--kv-groups must be >= 1, got {}", kv_groups);
  if (kv_groups > c.n_layers)
    return Status::Errorf("--kv-groups {} exceeds the model's {} layers", kv_groups, c.n_layers);
  kv::KvSpec spec = kv_spec_for(c, k_dtype, v_dtype, block_size_tokens);
  if (c.num_local_layers() > 0) {
    if (kv_groups != 1)
      return Status::Errorf("--kv-groups {}: this model has sliding-window layers, which get "
                            "their own KV groups (one per layer kind)", kv_groups);
    spec.groups = window_groups(c);
    return spec;
  }
  spec.groups = kv::KvSpec::split_layers(spec.n_layers, kv_groups);
  return spec;
}

KvCache::KvCache(const ModelConfig& config, int64_t max_tokens, kv::KvDtype k_dtype,
                 kv::KvDtype v_dtype)
    : max_tokens_(max_tokens), arena_(make_arena(config, max_tokens, k_dtype, v_dtype)) {
  table_.resize(static_cast<size_t>(arena_.num_blocks()));
  std::iota(table_.begin(), table_.end(), 0);
}

}  // namespace hinge
