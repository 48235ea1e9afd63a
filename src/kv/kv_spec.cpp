#include "kv/kv_spec.h"

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

bool kv_dtype_is_quantized(KvDtype dtype) {
  return dtype == KvDtype::kFp8E4m3 || dtype == KvDtype::kFp8E5m2 || dtype == KvDtype::kInt8 ||
         dtype == KvDtype::kInt4;
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
  return Status::Ok();
}

int64_t KvSpec::bytes_per_token() const {
  return int64_t{n_layers} * n_kv_heads *
         (kv_dtype_head_bytes(k_dtype, head_dim) + kv_dtype_head_bytes(v_dtype, head_dim));
}

int64_t KvSpec::num_blocks_for_tokens(int64_t num_tokens) const {
  HINGE_CHECK(num_tokens >= 0 && block_size_tokens > 0);
  return (num_tokens + block_size_tokens - 1) / block_size_tokens;
}

int64_t KvSpec::num_blocks_in_budget(int64_t budget_bytes) const {
  const int64_t per_block = bytes_per_block();
  HINGE_CHECK(per_block > 0);
  return budget_bytes <= 0 ? 0 : budget_bytes / per_block;
}

}  // namespace hinge::kv
