// Hyper-parameters and block recipe of a decoder-only transformer, independent of the file
// format it came from. A model family (model/family.h, one file per family under
// model/families/) fills this from GGUF metadata; the forward pass (model/transformer.h) reads
// only this.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "kernels/ops.h"

namespace hinge {

struct Family;

// Rotary position embedding of one kind of layer (llama.cpp's ggml_rope_ext parameters).
struct RopeConfig {
  kernels::RopeStyle style = kernels::RopeStyle::kInterleaved;
  int64_t n_rot = 0;           // rotated dimensions of a head (partial rotary when < head_dim)
  float theta = 10000.0f;      // rope.freq_base
  float freq_scale = 1.0f;     // 1 / rope.scaling.factor (linear and YaRN)
  // YaRN (rope.scaling.type = yarn): ramp between interpolation and extrapolation.
  float ext_factor = 0.0f;
  float attn_factor = 1.0f;    // cos/sin magnitude (YaRN mscale, LongRoPE attention factor)
  float beta_fast = 32.0f, beta_slow = 1.0f;
  float yarn_log_mul = 0.0f;          // rope.scaling.yarn_log_multiplier (mistral3)
  float scaling_attn_factor = 1.0f;   // rope.scaling.attn_factor as the file says
  int64_t n_ctx_orig = 0;      // rope.scaling.original_context_length
  // Per-pair frequency divisors (rope_freqs.weight, Llama 3, LongRoPE); empty = none.
  std::vector<float> freq_factors;
};

// What a layer does with its state. Only kAttention exists today; the description keeps room
// for layers that carry a recurrent state instead of KV (Qwen3.5's DeltaNet, Granite-H's Mamba
// layers, Jamba): such a layer would own a fixed-size state per sequence, allocated by the
// engine next to the KV groups, and no block table.
enum class LayerKind : uint8_t { kAttention };

enum class Activation : uint8_t { kSilu, kGeluTanh };
enum class QkNorm : uint8_t {
  kNone,
  kPerHead,  // RMSNorm over each head of Q and K (qwen3, gemma3)
  kFull,     // RMSNorm over the whole Q and K projections (olmo2)
};

// Optional per-matrix extras a family applies when the file has them (llama.cpp applies a
// different subset per architecture; the random-weight files of test-llama-archs carry all).
enum LinearExtra : uint32_t {
  kQkvBias = 1u << 0,   // attn_q/k/v.bias
  kQkvScale = 1u << 1,  // attn_q/k/v.scale (one scalar multiplying the product)
  kOutBias = 1u << 2,   // attn_output.bias
  kOutScale = 1u << 3,
  kFfnBias = 1u << 4,   // ffn_gate/up/down.bias
  kFfnScale = 1u << 5,
  kOutputBias = 1u << 6,  // output.bias
};

struct ModelConfig {
  std::string architecture = "llama";  // general.architecture
  const Family* family = nullptr;
  std::string name;
  int64_t n_vocab = 0;
  int64_t dim = 0;             // embedding length
  int64_t n_layers = 0;
  int64_t n_heads = 0;
  int64_t n_kv_heads = 0;
  int64_t head_dim = 0;        // attention.key_length (= value_length), dim / n_heads by default
  int64_t ffn_dim = 0;
  int64_t context_length = 2048;
  float rms_eps = 1e-5f;

  // RoPE of full-attention layers and of sliding-window ("local") layers.
  RopeConfig rope, rope_local;
  // Sliding window of local layers (attention.sliding_window); layer_local[l] marks them.
  int32_t sliding_window = 0;
  std::vector<uint8_t> layer_local;  // [n_layers] or empty (no local layers)
  std::vector<LayerKind> layer_kind;  // [n_layers] (all kAttention today)

  // Block recipe.
  bool pre_norms = true;        // attn_norm / ffn_norm before each block (olmo2: none)
  bool post_norms = false;      // post_attention_norm / post_ffw_norm on each block's output
  QkNorm qk_norm = QkNorm::kNone;
  Activation activation = Activation::kSilu;
  bool fused_gate_up = false;   // ffn_up holds [gate; up] (phi3)
  uint32_t extras = 0;          // LinearExtra bits the family applies
  float attn_scale = 0.0f;      // score multiplier; 0 = 1 / sqrt(head_dim)
  float attn_softcap = 0.0f;    // attention score soft-capping (gemma2)
  float final_softcap = 0.0f;   // logit soft-capping (gemma2)
  float embed_scale = 0.0f;     // embeddings multiplier (gemma sqrt(dim), granite); 0 = none
  float residual_scale = 0.0f;  // block output multiplier before the residual add (granite)
  float logit_scale = 0.0f;     // logits divided by this (granite); 0 = none
  // Llama-4 style attention temperature (mistral3): queries at position p are multiplied by
  // log(floor(p / temp_floor) + 1) * temp_scale + 1.
  float attn_temp_scale = 0.0f;
  int64_t attn_temp_floor = 0;
  bool tied_output = false;     // output matrix is the token embedding

  int64_t q_dim() const { return n_heads * head_dim; }
  int64_t kv_dim() const { return n_kv_heads * head_dim; }
  bool is_local(int64_t layer) const {
    return !layer_local.empty() && layer_local[static_cast<size_t>(layer)] != 0;
  }
  int64_t num_local_layers() const;
  // Window of layer l in tokens (0 = full attention).
  int32_t window_of(int64_t layer) const { return is_local(layer) ? sliding_window : 0; }
  const RopeConfig& rope_of(int64_t layer) const { return is_local(layer) ? rope_local : rope; }
  // KV bytes per token: 2 (K and V) x layers x kv_heads x head_dim x bytes per element.
  int64_t kv_bytes_per_token(int64_t bytes_per_element) const {
    return 2 * n_layers * n_kv_heads * head_dim * bytes_per_element;
  }
  // Checks that the numbers are sane and consistent (hostile metadata must not reach the
  // forward pass). `source` names the file in the message.
  Status validate(const std::string& source) const;
};

}  // namespace hinge
