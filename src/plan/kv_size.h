// KV cache sizing for capacity planning (`hinge kv-size`): the bytes the keys and values of past
// tokens take, per token, per request and per batch, for a model shape from a preset, a model
// file or flags.
//
//   standard attention (MHA / GQA / MQA), per layer and token:  2 x kv_heads x head_dim x bytes
//   multi-head latent attention (MLA, DeepSeek-V2/V3):           (latent rank + rope dim) x bytes
//     (the compressed latent and the decoupled RoPE key, as vLLM and FlashMLA cache them)
//   a sliding-window layer holds at most `window` tokens of a request
//
// Element bytes are nominal: f32 4, f16 / bf16 2, fp8 / int8 1, int4 0.5 (scales left out:
// hinge's own int8 / int4 rows add 4 bytes per head, docs/kv-dtypes.md). GB = 1e9 bytes,
// GiB = 2^30.
//
// Pure functions over plain values; thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace hinge {
struct ModelConfig;
}  // namespace hinge

namespace hinge::plan {

struct KvShape {
  std::string name;             // preset or file name
  int32_t layers = 0;
  int32_t heads = 0;            // query heads (the MHA row's KV heads)
  int32_t kv_heads = 0;
  int32_t head_dim = 0;
  int32_t window = 0;           // sliding window of the local layers (0: none)
  int32_t local_layers = 0;     // layers with the window (the others attend to everything)
  int32_t mla_rank = 0;         // > 0: multi-head latent attention, latent rank (kv_lora_rank)
  int32_t mla_rope_dim = 0;     // MLA's decoupled RoPE key dimension
  int64_t max_context = 0;      // the model's trained context (0: unknown)
  double params_billion = 0;    // parameters, for weight sizes (0: unknown)
  std::string source;           // where the shape comes from (config / paper)
};

// The presets: llama-2-7b/13b/70b, llama-3.1-8b/70b/405b, mistral-7b, qwen2.5-7b/72b,
// qwen3-8b/32b, gemma3-27b, deepseek-v3.
std::span<const KvShape> kv_presets();
// The shape of a loaded model's config (its layers, heads, window and context), named `name`;
// the parameter count is the caller's to set.
KvShape kv_shape_of(const ModelConfig& config, std::string name);
const KvShape* find_kv_preset(std::string_view name);

// Nominal bytes per element of a KV dtype name (f32, f16, bf16, fp8, fp8_e4m3, fp8_e5m2, int8,
// int4); nullopt for another name.
std::optional<double> kv_element_bytes(std::string_view dtype);

// KV bytes of one token in one full-attention layer.
double kv_bytes_per_token_layer(const KvShape& s, double element_bytes);
// KV bytes of one request of `context` tokens (sliding-window layers hold min(context, window)).
double kv_bytes_per_request(const KvShape& s, int64_t context, double element_bytes);
// KV bytes per token averaged over a request of `context` tokens.
double kv_bytes_per_token(const KvShape& s, int64_t context, double element_bytes);

// The attention variants of a shape, each with the same layers and head_dim: MHA (kv_heads =
// heads), GQA (the model's, when it has 1 < kv_heads < heads), MQA (1), and MLA when the shape
// has a latent rank. `label` names each ("MHA (64 KV heads)", ...); `is_model` marks the
// model's own.
struct KvVariant {
  std::string label;
  KvShape shape;
  bool is_model = false;
};
std::vector<KvVariant> kv_variants(const KvShape& s);

// How many requests of `context` tokens fit in `memory_bytes` of KV (floor; 0 if none).
int64_t requests_that_fit(const KvShape& s, int64_t context, double element_bytes,
                          double memory_bytes);

}  // namespace hinge::plan
