// Views of a transformer's weights. Nothing here owns memory: the views point into a mapped
// file (GGUF, safetensors, llama2.c) or into buffers owned by the LoadedModel.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/matmul.h"

namespace hinge {

// What a family applies after a matrix product when the file has it (ModelConfig::extras):
// y = (W x) * scale + bias, or (W x + bias) * scale with bias_first (llama.cpp's build_ffn
// order; its attention projections scale first).
struct LinearExtras {
  const float* bias = nullptr;  // [rows] f32
  float scale = 1.0f;
  bool bias_first = false;
  bool any() const { return bias != nullptr || scale != 1.0f; }
};

struct LayerWeights {
  const float* attn_norm = nullptr;  // [dim] f32 (null without pre-norms)
  kernels::MatrixView wq;            // [n_heads * head_dim, dim]
  kernels::MatrixView wk;            // [n_kv_heads * head_dim, dim]
  kernels::MatrixView wv;            // [n_kv_heads * head_dim, dim]
  kernels::MatrixView wo;            // [dim, n_heads * head_dim]
  LinearExtras xq, xk, xv, xo;
  const float* q_norm = nullptr;     // [head_dim] (per head) or [q_dim] (whole projection)
  const float* k_norm = nullptr;     // [head_dim] or [kv_dim]
  const float* post_attn_norm = nullptr;  // [dim] (gemma, olmo2)
  const float* ffn_norm = nullptr;   // [dim] f32 (null without pre-norms)
  kernels::MatrixView w_gate;        // [ffn_dim, dim]
  kernels::MatrixView w_up;          // [ffn_dim, dim]
  kernels::MatrixView w_down;        // [dim, ffn_dim]
  LinearExtras x_gate, x_up, x_down;
  const float* post_ffn_norm = nullptr;   // [dim]
};

struct ModelWeights {
  kernels::MatrixView token_embd;    // [n_vocab, dim] (rows are looked up, any type)
  std::vector<LayerWeights> layers;
  const float* output_norm = nullptr;  // [dim] f32
  kernels::MatrixView output;          // [n_vocab, dim] (== token_embd when tied)
  const float* output_bias = nullptr;  // [n_vocab] or null

  // Bytes of weights read for one decoded token (all matrices; the embedding contributes one
  // row). Used for the achieved-GB/s statistic.
  uint64_t bytes_per_token() const;
  // Bytes of all weights (embedding counted once even when tied).
  uint64_t total_bytes() const;
};

}  // namespace hinge
