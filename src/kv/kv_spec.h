// KvSpec: the shape of the KV cache (layers, KV heads, head size, storage dtype, block size) and
// the sizing arithmetic derived from it. A plain value; thread-compatible.
//
// Layout of one block (what the kernels will see):
//   [n_layers][K: block_size_tokens][n_kv_heads][K head vector bytes]
//             [V: block_size_tokens][n_kv_heads][V head vector bytes]
// where a head vector of head_dim elements takes kv_dtype_head_bytes(dtype, head_dim) bytes
// (K and V may use different dtypes).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

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

// Bytes of one (token, kv head) vector of K (or V), including its scale for int8/int4.
int64_t kv_dtype_head_bytes(KvDtype dtype, int32_t head_dim);
// Average bytes per element including the scale overhead: head_bytes / head_dim
// (int8 with head_dim 128: 130 / 128 = 1.015625).
double kv_dtype_bytes_per_element(KvDtype dtype, int32_t head_dim);

struct KvSpec {
  int32_t n_layers = 0;
  int32_t n_kv_heads = 0;
  int32_t head_dim = 0;
  KvDtype k_dtype = KvDtype::kF16;  // --kv-dtype-k (or --kv-dtype for both)
  KvDtype v_dtype = KvDtype::kF16;  // --kv-dtype-v
  int32_t block_size_tokens = 16;

  // Error when a field is not positive (the message names it).
  Status validate() const;

  // K and V of one token across all layers and KV heads.
  int64_t bytes_per_token() const;
  int64_t bytes_per_block() const { return bytes_per_token() * block_size_tokens; }
  // Blocks that hold num_tokens tokens: ceil(num_tokens / block_size_tokens).
  int64_t num_blocks_for_tokens(int64_t num_tokens) const;
  // Bytes reserved by a request of num_tokens tokens (whole blocks).
  int64_t bytes_for_tokens(int64_t num_tokens) const {
    return num_blocks_for_tokens(num_tokens) * bytes_per_block();
  }
  // Whole blocks that fit in budget_bytes (0 when the budget is below one block).
  int64_t num_blocks_in_budget(int64_t budget_bytes) const;
};

}  // namespace hinge::kv
