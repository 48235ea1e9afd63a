// The Llama-family forward pass (RMSNorm, RoPE, grouped-query attention, SwiGLU FFN) over a
// batch of consecutive tokens of one sequence, reading and appending a KvCache.
//
// Activations are f32. All scratch buffers are sized once at construction for
// `max_batch_tokens` tokens and the model's context length: forward() never allocates.
// Thread-safety: one thread calls forward() at a time (the pool parallelizes inside).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "common/status.h"
#include "common/thread_pool.h"
#include "kernels/matmul.h"
#include "model/kv_cache.h"
#include "model/llama_config.h"
#include "model/llama_weights.h"

namespace hinge {

class LlamaModel {
 public:
  LlamaModel(const LlamaConfig& config, const LlamaWeights& weights, ThreadPool& pool,
             int64_t max_batch_tokens = 64);

  const LlamaConfig& config() const { return config_; }
  const LlamaWeights& weights() const { return weights_; }
  int64_t max_batch_tokens() const { return max_batch_; }

  // Runs `tokens` at positions cache.num_tokens() ... + tokens.size() - 1, appends their K/V to
  // the cache and writes logits: [n_vocab] for the last token, or [tokens.size(), n_vocab]
  // when all_logits. Longer inputs than max_batch_tokens are processed in chunks.
  // Errors: token id out of range, cache full.
  Status forward(std::span<const int32_t> tokens, KvCache& cache, float* logits,
                 bool all_logits = false);

 private:
  void forward_chunk(const int32_t* tokens, int64_t n, KvCache& cache, float* logits,
                     bool all_logits);
  void attention(int64_t layer, int64_t n, int64_t pos0, KvCache& cache);

  LlamaConfig config_;
  LlamaWeights weights_;
  ThreadPool& pool_;
  int64_t max_batch_;
  std::vector<float> inv_freq_;  // [head_dim / 2]
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
  std::vector<float> scores_;   // [threads, context_length]
  kernels::MatmulScratch mm_scratch_;
};

}  // namespace hinge
