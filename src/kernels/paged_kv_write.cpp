// paged_kv_write (kernels/paged_attention.h): the write side of the paged KV cache, each token's
// K and V rows quantized into their slots in the layer's format. The read side is
// paged_attention.cpp.
#include <cstdint>
#include <span>

#include "common/status.h"
#include "kernels/kv_quant.h"
#include "kernels/paged_attention.h"

namespace hinge::kernels {

void paged_kv_write(const PagedKvLayer& kv, const float* k, const float* v,
                    std::span<const int64_t> slot_mapping) {
  HINGE_CHECK_MSG(kv.head_dim >= 1 && kv.head_dim <= kKvMaxHeadDim, "head_dim {}", kv.head_dim);
  HINGE_CHECK(kv.n_kv_heads > 0 && kv.block_size > 0 && kv.base != nullptr);
  const int64_t row_stride = int64_t{kv.n_kv_heads} * kv.head_dim;
  for (size_t i = 0; i < slot_mapping.size(); ++i) {
    const int64_t slot = slot_mapping[i];
    HINGE_CHECK_MSG(slot >= 0, "slot {}", slot);
    const float* ki = k + static_cast<int64_t>(i) * row_stride;
    const float* vi = v + static_cast<int64_t>(i) * row_stride;
    for (int32_t h = 0; h < kv.n_kv_heads; ++h) {
      kv_quantize_row(kv.k_dtype, ki + int64_t{h} * kv.head_dim, kv.k_row(slot, h), kv.head_dim,
                      kv.k_scale);
      kv_quantize_row(kv.v_dtype, vi + int64_t{h} * kv.head_dim, kv.v_row(slot, h), kv.head_dim,
                      kv.v_scale);
    }
  }
}

}  // namespace hinge::kernels
