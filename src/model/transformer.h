// The forward pass of every model family (model/family.h): the block recipe in ModelConfig
// (pre/post RMSNorms, Q/K norms, biases, RoPE kinds, sliding windows, soft-capping, gated FFN
// with SiLU or tanh-GELU) over a batch of tokens from any number of sequences, reading and writing a paged KV arena.
//
// One forward_batch() pushes every token of an engine step through each weight matrix once
// (matrix-matrix), writes each token's K/V into its physical slot, and runs paged attention per
// sequence over its block table. forward() is the single-sequence convenience over a
// contiguous KvCache (same code path).
//
// Activations are f32. All scratch buffers are sized once at construction for
// `max_batch_tokens` tokens: forward_batch() never allocates (after the first call).
// fp8 KV: the per-(layer, K/V) scale is calibrated from the first K/V written to the arena
// (absmax x kFp8Headroom), then fixed.
// Thread-safety: one thread calls forward at a time (the pool parallelizes inside).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "common/status.h"
#include "common/thread_pool.h"
#include "kernels/matmul.h"
#include "kernels/matmul_packed.h"
#include "kernels/ops.h"
#include "kernels/paged_attention.h"
#include "kv/kv_arena.h"
#include "model/kv_cache.h"
#include "model/model_config.h"
#include "model/model_weights.h"
#include "model/step_profile.h"

namespace hinge {

// One step's tokens. Rows are grouped by sequence: seqs[i] owns rows
// [query_begin, query_begin + num_queries) at positions first_position + j.
struct ForwardBatch {
  std::span<const int32_t> token_ids;            // [T]
  // Per KV group of the arena (kv::KvSpec::num_groups(), G), group-major: group g's layers write
  // the token's K/V to slot_mapping[g * T + t] and attend through seqs[g * S .. g * S + S).
  std::span<const int64_t> slot_mapping;         // [G][T] physical KV slot of each token
  std::span<const kernels::AttentionSeq> seqs;   // [G][S]; each group's cover rows [0, T) in
                                                 // order, alike but for the block tables
  std::span<const int32_t> logit_rows;           // rows whose logits are wanted, ascending
};

class Transformer {
 public:
  static constexpr float kFp8Headroom = 2.0f;

  // file_mappings: read-only private file mappings the weight views may point into
  // (LoadedModel::file_mappings); the pages of matrices that get a packed copy are dropped from
  // memory (they stay readable: the kernel re-reads the file if something touches them).
  Transformer(const ModelConfig& config, const ModelWeights& weights, ThreadPool& pool,
             int64_t max_batch_tokens = 64,
             std::span<const std::span<const uint8_t>> file_mappings = {});

  const ModelConfig& config() const { return config_; }
  const ModelWeights& weights() const { return weights_; }
  int64_t max_batch_tokens() const { return max_batch_; }
  // Bytes of file-mapped weights whose pages were dropped because a packed copy replaced them
  // (never read again): the memory budget does not count them.
  int64_t dropped_file_bytes() const { return dropped_file_bytes_; }
  // Bytes of the packed weight copies and of the GGUF-layout copies on huge pages (anonymous
  // memory, in RSS).
  int64_t packed_bytes() const {
    int64_t n = copied_bytes_;
    for (const auto& p : packed_) n += static_cast<int64_t>(p->bytes());
    return n;
  }
  // Wall time the packed copies took to build (at construction).
  double pack_seconds() const { return pack_seconds_; }
  // RoPE of the full-attention layers (what the shift context policy's query rotations use).
  const kernels::RopeTable& rope_global() const { return rope_global_; }
  const kernels::RopeTable& rope_local() const { return rope_local_; }  // sliding-window layers'

  // Runs the batch; logits receives [logit_rows.size(), n_vocab]. Errors (nothing computed):
  // more than max_batch_tokens tokens, token id out of range, position beyond the context,
  // malformed sequence layout, arena geometry not this model's.
  Status forward_batch(const ForwardBatch& batch, kv::KvArena& arena, float* logits);

  // Runs `tokens` at positions cache.num_tokens() ... + tokens.size() - 1, appends their K/V to
  // the cache and writes logits: [n_vocab] for the last token, or [tokens.size(), n_vocab]
  // when all_logits. Longer inputs than max_batch_tokens are processed in chunks.
  // Errors: token id out of range, cache full.
  Status forward(std::span<const int32_t> tokens, KvCache& cache, float* logits,
                 bool all_logits = false);

  // Adds each decode step's phase times to `decode` and each other step's (prefill, mixed) to
  // `prefill` from now on (null: none); they must outlive the transformer or be detached first.
  void set_profile(StepProfile* decode, StepProfile* prefill = nullptr) {
    profile_ = decode;
    prefill_profile_ = prefill;
  }

 private:
  void run_layers(const ForwardBatch& batch, kv::KvArena& arena);
  void pack_weights(std::span<const std::span<const uint8_t>> file_mappings);
  kernels::PagedKvLayer layer_view(kv::KvArena& arena, int32_t layer) const;
  static kernels::RopeTable make_rope(const RopeConfig& r);

  ModelConfig config_;
  ModelWeights weights_;
  // Packed copies of the matrices (kernels/matmul_packed.h) the views point to, when the CPU
  // has the packed kernel.
  std::vector<std::unique_ptr<kernels::PackedMatrix>> packed_;
  // Matrices no packed layout takes (Q6_K, Q5_K, ...; or where the GGUF layout measured
  // fastest), copied as they are from the file mapping onto huge pages (the views point to them).
  std::vector<std::unique_ptr<uint8_t[], kernels::PackedMatrix::Free>> copies_;
  int64_t copied_bytes_ = 0;
  int64_t dropped_file_bytes_ = 0;  // file-mapped weight pages dropped after packing
  double pack_seconds_ = 0;
  // Per layer: the arena's K shift in the basis K is stored in (layer_view).
  mutable std::vector<float> k_shift_stored_;
  ThreadPool& pool_;
  int64_t max_batch_;
  kernels::RopeTable rope_global_, rope_local_;  // full-attention and sliding-window layers
  // Scratch, sized once.
  std::vector<float> x_;    // [max_batch, dim] residual stream
  std::vector<float> xb_;   // [max_batch, dim] normed input
  std::vector<float> q_;    // [max_batch, q_dim]
  std::vector<float> k_;    // [max_batch, kv_dim]
  std::vector<float> v_;    // [max_batch, kv_dim]
  std::vector<float> att_out_;  // [max_batch, q_dim]
  std::vector<float> proj_;     // [max_batch, dim]
  std::vector<float> gate_;     // [max_batch, ffn_dim]
  std::vector<float> up_;       // [max_batch, ffn_dim]
  std::vector<int32_t> positions_;  // [max_batch]
  std::vector<int32_t> group_window_;  // per KV group of the arena: its window (0 = full)
  // forward()'s single-sequence batch description.
  std::vector<int64_t> slots_;
  std::vector<int32_t> rows_;
  kernels::AttentionScratch att_scratch_;
  kernels::MatmulScratch mm_scratch_;
  StepProfile* profile_ = nullptr;          // decode steps
  StepProfile* prefill_profile_ = nullptr;  // the other steps
  StepProfile* prof_ = nullptr;             // this step's (either, or null)
};

}  // namespace hinge
