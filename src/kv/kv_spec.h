// KvSpec: the shape of the KV cache (layers, KV heads, head size, storage dtype, block size,
// KV groups) and the sizing arithmetic derived from it. A plain value; thread-compatible.
//
// KV groups (vLLM's KV cache groups, its hybrid allocator): the layers are split into groups,
// and each request has one block table per group. Every group's blocks come from one pool, and a
// block (a "page") holds block_size_tokens tokens of one group's layers, so the groups of a
// sequence hold separate blocks for the same positions. Groups exist so layers can keep KV
// differently (sliding-window layers keep only the blocks of their window, hybrid models mix
// attention kinds). The engine makes one group of all layers for full-attention models (or
// EngineConfig::kv_groups ranges), and groups of one kind each for models with sliding-window
// layers (kv_spec_for in model/kv_cache.h).
//
// Layout of one block (what the kernels see), for a group's layers in order:
//   [layers_per_block][K: block_size_tokens][n_kv_heads][K head vector bytes]
//                     [V: block_size_tokens][n_kv_heads][V head vector bytes]
// where a head vector of head_dim elements takes kv_dtype_head_bytes(dtype, head_dim) bytes
// (K and V may use different dtypes) and layers_per_block is the largest group's layer count
// (a smaller group leaves the rest of its blocks unused).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace hinge::kv {

// Storage dtype of K and V.
//   f32, f16, bf16: plain elements, no scale.
//   fp8_e4m3, fp8_e5m2: 1 byte per element; the scale is per tensor (per layer), not per token,
//     so it is not counted here.
//   int8: 1 byte per element + one f16 scale per (token, kv head) = head_dim + 2 bytes.
//   int4: two elements per byte (head_dim rounded up to even) + one f16 scale per
//     (token, kv head) = ceil(head_dim / 2) + 2 bytes. Symmetric: no zero point.
enum class KvDtype : uint8_t { kF32, kF16, kBf16, kFp8E4m3, kFp8E5m2, kInt8, kInt4 };

// "f32", "f16", "bf16", "fp8_e4m3", "fp8_e5m2", "int8", "int4".
std::string_view kv_dtype_name(KvDtype dtype);
std::optional<KvDtype> parse_kv_dtype(std::string_view name);

// fp8 / int8 / int4: lossy formats with scales (f32/f16/bf16 are plain floats).
bool kv_dtype_is_quantized(KvDtype dtype);
// fp8 (E4M3 or E5M2): one scale per tensor, calibrated from the first K / V written.
bool kv_dtype_is_fp8(KvDtype dtype);

// Bytes of one (token, kv head) vector of K (or V), including its scale for int8/int4.
int64_t kv_dtype_head_bytes(KvDtype dtype, int32_t head_dim);
// Average bytes per element including the scale overhead: head_bytes / head_dim
// (int8 with head_dim 128: 130 / 128 = 1.015625).
double kv_dtype_bytes_per_element(KvDtype dtype, int32_t head_dim);

// One KV group: the model layers whose KV share a block table.
struct KvGroup {
  std::vector<int32_t> layers;  // ascending model layer indices
  // Sliding window of every layer of the group (0: full attention). A local group's blocks
  // that lie wholly before the window of a request's next query go back to the pool
  // (KvCacheManager::release_behind_window).
  int32_t window = 0;
  bool operator==(const KvGroup&) const = default;
};

struct KvSpec {
  int32_t n_layers = 0;
  int32_t n_kv_heads = 0;
  int32_t head_dim = 0;
  KvDtype k_dtype = KvDtype::kF16;  // --kv-dtype-k (or --kv-dtype for both)
  KvDtype v_dtype = KvDtype::kF16;  // --kv-dtype-v
  int32_t block_size_tokens = 16;
  // Empty: one group of every layer. Otherwise every layer in exactly one group.
  std::vector<KvGroup> groups = {};

  // Error when a field is not positive or the groups do not partition the layers (the message
  // names what is wrong).
  Status validate() const;

  int32_t num_groups() const { return groups.empty() ? 1 : static_cast<int32_t>(groups.size()); }
  // Each group's sliding window (KvCacheConfig::group_windows), or empty when every group is
  // full attention.
  std::vector<int32_t> group_windows() const;
  // Layers one block has room for: the largest group's count (n_layers with one group).
  int32_t layers_per_block() const;
  // Group of layer l, and its index among that group's layers (its place in a block).
  int32_t group_of_layer(int32_t layer) const;
  int32_t index_in_group(int32_t layer) const;
  // Groups of `num_groups` consecutive layer ranges as equal as possible (the first ones one
  // layer longer), or no groups (one group) for num_groups <= 1. num_groups <= n_layers.
  static std::vector<KvGroup> split_layers(int32_t n_layers, int32_t num_groups);

  // K and V of one layer of one token (all KV heads).
  int64_t bytes_per_layer_token() const;
  // What one token costs in blocks' bytes: every group's block share, a block's unused layers
  // (groups of unequal size) included. With one group: K and V of all layers.
  int64_t bytes_per_token() const {
    return int64_t{num_groups()} * layers_per_block() * bytes_per_layer_token();
  }
  int64_t bytes_per_block() const {
    return int64_t{layers_per_block()} * bytes_per_layer_token() * block_size_tokens;
  }
  // Blocks a sequence of num_tokens tokens holds: ceil(num_tokens / block_size_tokens) in each
  // group.
  int64_t num_blocks_for_tokens(int64_t num_tokens) const;
  // Bytes reserved by a request of num_tokens tokens (whole blocks).
  int64_t bytes_for_tokens(int64_t num_tokens) const {
    return num_blocks_for_tokens(num_tokens) * bytes_per_block();
  }
  // Whole blocks that fit in budget_bytes (0 when the budget is below one block).
  int64_t num_blocks_in_budget(int64_t budget_bytes) const;
};

}  // namespace hinge::kv
