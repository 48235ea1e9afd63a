// Precondition checks shared by paged_attention() and paged_attention_ref() (defined in
// paged_attention_ref.cpp). Internal to kernels/: callers use paged_attention.h.
#pragma once

#include <span>

#include "kernels/paged_attention.h"

namespace hinge::kernels {

// HINGE_CHECKs the layer view against the shape (n_kv_heads, head_dim in 1..kKvMaxHeadDim, row
// sizes, fp8 scales), n_heads % n_kv_heads == 0, and for every sequence num_queries >= 1,
// first_position >= 0, enough blocks for its positions, non-negative block ids.
void check_paged_attention_args(const PagedKvLayer& kv, std::span<const AttentionSeq> seqs,
                                const AttentionShape& shape, const float* q, const float* out);

}  // namespace hinge::kernels
