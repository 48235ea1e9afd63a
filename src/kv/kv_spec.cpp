#include "kv/kv_spec.h"

#include <algorithm>

namespace hinge::kv {

namespace {
struct DtypeName {
  KvDtype dtype;
  std::string_view name;
};
constexpr DtypeName kDtypeNames[] = {
    {KvDtype::kF32, "f32"},          {KvDtype::kF16, "f16"},          {KvDtype::kBf16, "bf16"},
    {KvDtype::kFp8E4m3, "fp8_e4m3"}, {KvDtype::kFp8E5m2, "fp8_e5m2"}, {KvDtype::kInt8, "int8"},
    {KvDtype::kInt4, "int4"},
};
// One f16 scale per (token, kv head) for the integer dtypes.
constexpr int64_t kScaleBytes = 2;
}  // namespace

std::string_view kv_dtype_name(KvDtype dtype) {
  for (const auto& d : kDtypeNames)
    if (d.dtype == dtype) return d.name;
  return "?";
}

std::optional<KvDtype> parse_kv_dtype(std::string_view name) {
  for (const auto& d : kDtypeNames)
    if (d.name == name) return d.dtype;
  return std::nullopt;
}

bool kv_dtype_is_fp8(KvDtype dtype) {
  return dtype == KvDtype::kFp8E4m3 || dtype == KvDtype::kFp8E5m2;
}

bool kv_dtype_is_quantized(KvDtype dtype) {
  return kv_dtype_is_fp8(dtype) || dtype == KvDtype::kInt8 || dtype == KvDtype::kInt4;
}

int64_t kv_dtype_head_bytes(KvDtype dtype, int32_t head_dim) {
  const int64_t n = head_dim;
  switch (dtype) {
    case KvDtype::kF32:
      return 4 * n;
    case KvDtype::kF16:
    case KvDtype::kBf16:
      return 2 * n;
    case KvDtype::kFp8E4m3:
    case KvDtype::kFp8E5m2:
      return n;
    case KvDtype::kInt8:
      return n + kScaleBytes;
    case KvDtype::kInt4:
      return (n + 1) / 2 + kScaleBytes;
  }
  HINGE_CHECK_MSG(false, "unknown KvDtype {}", static_cast<int>(dtype));
  return 0;
}

double kv_dtype_bytes_per_element(KvDtype dtype, int32_t head_dim) {
  HINGE_CHECK(head_dim > 0);
  return static_cast<double>(kv_dtype_head_bytes(dtype, head_dim)) / head_dim;
}

Status KvSpec::validate() const {
  if (n_layers <= 0) return Status::Errorf("kv spec: n_layers must be positive, got {}", n_layers);
  if (n_kv_heads <= 0)
    return Status::Errorf("kv spec: n_kv_heads must be positive, got {}", n_kv_heads);
  if (head_dim <= 0) return Status::Errorf("kv spec: head_dim must be positive, got {}", head_dim);
  if (block_size_tokens <= 0)
    return Status::Errorf("kv spec: block_size_tokens must be positive, got {}", block_size_tokens);
  if (groups.empty()) return Status::Ok();
  std::vector<int32_t> seen(static_cast<size_t>(n_layers), -1);
  for (size_t g = 0; g < groups.size(); ++g) {
    if (groups[g].layers.empty()) return Status::Errorf("kv spec: KV group {} has no layers", g);
    int32_t prev = -1;
    for (int32_t l : groups[g].layers) {
      if (l < 0 || l >= n_layers)
        return Status::Errorf("kv spec: KV group {} names layer {}, outside [0, {})", g, l,
                              n_layers);
      if (l <= prev)
        return Status::Errorf("kv spec: KV group {} lists its layers out of order ({} after {})",
                              g, l, prev);
      if (seen[static_cast<size_t>(l)] >= 0)
        return Status::Errorf("kv spec: layer {} is in KV groups {} and {}", l,
                              seen[static_cast<size_t>(l)], g);
      seen[static_cast<size_t>(l)] = static_cast<int32_t>(g);
      prev = l;
    }
  }
  for (int32_t l = 0; l < n_layers; ++l)
    if (seen[static_cast<size_t>(l)] < 0)
      return Status::Errorf("kv spec: layer {} is in no KV group", l);
  return Status::Ok();
}

std::vector<int32_t> KvSpec::group_windows() const {
  std::vector<int32_t> w;
  for (const KvGroup& g : groups) w.push_back(g.window);
  for (int32_t x : w)
    if (x > 0) return w;
  return {};
}

int32_t KvSpec::layers_per_block() const {
  if (groups.empty()) return n_layers;
  size_t most = 0;
  for (const KvGroup& g : groups) most = std::max(most, g.layers.size());
  return static_cast<int32_t>(most);
}

int32_t KvSpec::group_of_layer(int32_t layer) const {
  for (size_t g = 0; g < groups.size(); ++g)
    for (int32_t l : groups[g].layers)
      if (l == layer) return static_cast<int32_t>(g);
  HINGE_CHECK_MSG(groups.empty() && layer >= 0 && layer < n_layers, "layer {} in no KV group",
                  layer);
  return 0;
}

int32_t KvSpec::index_in_group(int32_t layer) const {
  if (groups.empty()) return layer;
  const auto& ls = groups[static_cast<size_t>(group_of_layer(layer))].layers;
  return static_cast<int32_t>(std::find(ls.begin(), ls.end(), layer) - ls.begin());
}

std::vector<KvGroup> KvSpec::split_layers(int32_t n_layers, int32_t num_groups) {
  HINGE_CHECK(num_groups <= n_layers);
  std::vector<KvGroup> out;
  if (num_groups <= 1) return out;
  out.resize(static_cast<size_t>(num_groups));
  int32_t l = 0;
  for (int32_t g = 0; g < num_groups; ++g) {
    const int32_t count = n_layers / num_groups + (g < n_layers % num_groups ? 1 : 0);
    for (int32_t i = 0; i < count; ++i) out[static_cast<size_t>(g)].layers.push_back(l++);
  }
  return out;
}

int64_t KvSpec::bytes_per_layer_token() const {
  return int64_t{n_kv_heads} *
         (kv_dtype_head_bytes(k_dtype, head_dim) + kv_dtype_head_bytes(v_dtype, head_dim));
}

int64_t KvSpec::num_blocks_for_tokens(int64_t num_tokens) const {
  HINGE_CHECK(num_tokens >= 0 && block_size_tokens > 0);
  return int64_t{num_groups()} * ((num_tokens + block_size_tokens - 1) / block_size_tokens);
}

int64_t KvSpec::num_blocks_in_budget(int64_t budget_bytes) const {
  const int64_t per_block = bytes_per_block();
  HINGE_CHECK(per_block > 0);
  return budget_bytes <= 0 ? 0 : budget_bytes / per_block;
}

}  // namespace hinge::kv
