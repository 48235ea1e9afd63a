// Views of a Llama model's weights. Nothing here owns memory: the views point into a mapped
// file (GGUF, safetensors, llama2.c) or into buffers owned by the LoadedModel.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/matmul.h"

namespace hinge {

struct LayerWeights {
  const float* attn_norm = nullptr;  // [dim] f32
  kernels::MatrixView wq;            // [n_heads * head_dim, dim]
  kernels::MatrixView wk;            // [n_kv_heads * head_dim, dim]
  kernels::MatrixView wv;            // [n_kv_heads * head_dim, dim]
  kernels::MatrixView wo;            // [dim, n_heads * head_dim]
  const float* ffn_norm = nullptr;   // [dim] f32
  kernels::MatrixView w_gate;        // [ffn_dim, dim]
  kernels::MatrixView w_up;          // [ffn_dim, dim]
  kernels::MatrixView w_down;        // [dim, ffn_dim]
};

struct LlamaWeights {
  kernels::MatrixView token_embd;    // [n_vocab, dim] (rows are looked up, any type)
  std::vector<LayerWeights> layers;
  const float* output_norm = nullptr;  // [dim] f32
  kernels::MatrixView output;          // [n_vocab, dim] (== token_embd when tied)

  // Bytes of weights read for one decoded token (all matrices; the embedding contributes one
  // row). Used for the achieved-GB/s statistic.
  uint64_t bytes_per_token() const;
  // Bytes of all weights (embedding counted once even when tied).
  uint64_t total_bytes() const;
};

}  // namespace hinge
