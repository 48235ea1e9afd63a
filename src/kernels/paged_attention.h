// Attention over a paged KV cache: a batch of sequences of different lengths, each with its own
// block table, reading K/V stored in any kv::KvDtype (dequantized inside the kernel), with an
// online (running max / running sum) softmax. Also the write side: quantize a step's new K/V
// rows into their physical slots.
//
// KV memory geometry (what kv::KvArena lays out; the kernel only sees this view of one layer):
//   block b starts at base + b * block_stride
//   K row of (slot offset t in the block, kv head h): block + k_offset + t * k_token_stride
//                                                     + h * k_row_bytes
//   V row likewise with v_offset / v_token_stride / v_row_bytes
//   a row is kernels::kv_row_bytes(dtype, head_dim) bytes in kv_quant.h's layout.
// A physical slot s = block_id * block_size + t.
//
// Queries: q and out are [num_tokens, n_heads * head_dim] f32, rows in batch order. Sequence i
// owns rows [query_begin, query_begin + num_queries); its query j sits at token position
// first_position + j and attends causally to positions [0, first_position + j] of its block
// table (which already hold this step's K/V: write first, then attend). Query head hq reads KV
// head hq / (n_heads / n_kv_heads) (grouped-query attention).
//
// Scores are dot(q, k) / sqrt(head_dim) (a division, as llama2.c does), or dot(q, k) * scale
// when AttentionShape::scale is set; then soft-capped (cap * tanh(score / cap)) when
// AttentionShape::softcap is set (Gemma 2). A sliding window (AttentionShape::window = W > 0)
// limits query position p to keys [p - W + 1, p] (llama.cpp's standard SWA mask): the kernel
// never reads a block table entry or block wholly before the first query's window, so those
// blocks may already be back in the pool. Each output row depends
// only on its own query and its sequence's K/V, computed in a fixed order: results do not depend
// on which other sequences share the batch or on the thread count (batch invariance).
//
// Position offsets (the shift context policy, StreamingLLM's positions within the cache): when
// AttentionSeq::block_rotation is set, the keys of logical block b were written with RoPE at
// d_b positions further than where they now sit in the cache. Their scores use the query
// rotated by d_b more instead (<R(p + d) q, R(p_k) k> = <R(p) q, R(p_k - d) k>), so cached keys
// are never rewritten or requantized: block_rotation[b] is that rotation (kernels::
// rope_rotation's table, pairs laid out as AttentionShape::rope_style / n_rot say), or null for
// d_b = 0. With PagedKvLayer::k_shift (quantized K stores k - shift) a rotated block's scores
// also get dot(R q - q, shift), so every key keeps the same softmax-cancelling constant.
//
// Thread-safety: paged_attention() uses `pool` and `scratch`; one caller at a time per scratch.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "common/thread_pool.h"
#include "kernels/ops.h"
#include "kv/kv_spec.h"

namespace hinge::kernels {

using kv::KvDtype;

// One layer's view of the paged KV arena.
struct PagedKvLayer {
  uint8_t* base = nullptr;
  int64_t block_stride = 0;  // bytes between consecutive blocks
  int32_t block_size = 16;   // tokens per block
  int32_t n_kv_heads = 0;
  int32_t head_dim = 0;
  KvDtype k_dtype = KvDtype::kF32;
  KvDtype v_dtype = KvDtype::kF32;
  int64_t k_offset = 0;        // bytes from block start to this layer's K region
  int64_t v_offset = 0;        // bytes from block start to this layer's V region
  int64_t k_token_stride = 0;  // bytes between tokens in the K region (n_kv_heads * k row)
  int64_t v_token_stride = 0;
  int64_t k_row_bytes = 0;     // bytes between heads (kv_row_bytes(k_dtype, head_dim))
  int64_t v_row_bytes = 0;
  float k_scale = 1.0f;        // fp8 per-tensor scales (ignored by other dtypes)
  float v_scale = 1.0f;
  // Quantized K may be stored as H (k - shift) with queries passed as H q (H: the orthonormal
  // Hadamard transform per head, kernels::hadamard_inplace): `hadamard` says so, and k_shift
  // is then H shift, in the stored basis ([n_kv_heads * head_dim], or null for none). Both only
  // matter to rotated blocks (a RoPE rotation acts before H: the query is rotated as H R H q).
  const float* k_shift = nullptr;
  bool hadamard = false;

  uint8_t* k_row(int64_t slot, int32_t head) const {
    return base + (slot / block_size) * block_stride + k_offset +
           (slot % block_size) * k_token_stride + head * k_row_bytes;
  }
  uint8_t* v_row(int64_t slot, int32_t head) const {
    return base + (slot / block_size) * block_stride + v_offset +
           (slot % block_size) * v_token_stride + head * v_row_bytes;
  }
};

// One sequence of the batch.
struct AttentionSeq {
  int32_t query_begin = 0;     // first row of this sequence in q / out
  int32_t num_queries = 0;     // >= 1
  int32_t first_position = 0;  // token position of its first query row
  const int32_t* block_table = nullptr;  // physical block ids, logical order
  int32_t num_blocks = 0;      // >= ceil((first_position + num_queries) / block_size)
  // Per logical block: the query rotation for its keys (see the header comment), or null for
  // none; null array: no block is rotated.
  const float* const* block_rotation = nullptr;
};

struct AttentionShape {
  int32_t n_heads = 0;
  int32_t n_kv_heads = 0;  // divides n_heads
  int32_t head_dim = 0;    // 1 .. kKvMaxHeadDim
  int32_t window = 0;      // sliding window in tokens (a query sees itself and window - 1
                           // earlier keys); 0 = full causal attention
  float scale = 0.0f;      // score multiplier; 0 = divide by sqrt(head_dim)
  float softcap = 0.0f;    // score soft-capping; 0 = none
  RopeStyle rope_style = RopeStyle::kInterleaved;  // pair layout of block_rotation tables
  int32_t n_rot = 0;       // rotated dims per head (<= head_dim, even)
};

// First key position query position `pos` attends to under `window` (0 = no window).
inline int64_t attention_first_key(int64_t pos, int32_t window) {
  return window > 0 && pos + 1 > window ? pos + 1 - window : 0;
}

// Scratch sized on first use for the largest (threads, head_dim) seen; reused afterwards so the
// hot path does not allocate.
struct AttentionScratch {
  std::vector<float> buf;
  std::vector<float> partials;          // partial softmax states of rows split by key range
  std::vector<int64_t> partial_offset;  // per batch row: its first partial state
};

// Quantizes k, v ([num_tokens, n_kv_heads * head_dim] f32) into slot_mapping[i] of `kv`.
// Slots must be distinct within one call.
void paged_kv_write(const PagedKvLayer& kv, const float* k, const float* v,
                    std::span<const int64_t> slot_mapping);

// The attention of every query row of `seqs` (see the header comment). SIMD + multithreaded.
void paged_attention(const PagedKvLayer& kv, std::span<const AttentionSeq> seqs,
                     const AttentionShape& shape, const float* q, float* out, ThreadPool& pool,
                     AttentionScratch& scratch);

// Scalar reference: two-pass exact softmax in double over dequantized rows
// (kv_dequantize_row_ref). The specification the parity tests compare against.
void paged_attention_ref(const PagedKvLayer& kv, std::span<const AttentionSeq> seqs,
                         const AttentionShape& shape, const float* q, float* out);

}  // namespace hinge::kernels
