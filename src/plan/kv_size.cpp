#include "plan/kv_size.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <utility>

#include <fmt/format.h>

#include "model/model_config.h"

namespace hinge::plan {
namespace {

// The shapes as each model's config.json (Hugging Face) gives them.
const std::array<KvShape, 13> kPresets = {{
    {"llama-2-7b", 32, 32, 32, 128, 0, 0, 0, 0, 4096, 6.74, "meta-llama/Llama-2-7b-hf config.json"},
    {"llama-2-13b", 40, 40, 40, 128, 0, 0, 0, 0, 4096, 13.0, "meta-llama/Llama-2-13b-hf config.json"},
    {"llama-2-70b", 80, 64, 8, 128, 0, 0, 0, 0, 4096, 69.0, "meta-llama/Llama-2-70b-hf config.json"},
    {"llama-3.1-8b", 32, 32, 8, 128, 0, 0, 0, 0, 131072, 8.03,
     "meta-llama/Llama-3.1-8B config.json"},
    {"llama-3.1-70b", 80, 64, 8, 128, 0, 0, 0, 0, 131072, 70.6,
     "meta-llama/Llama-3.1-70B config.json"},
    {"llama-3.1-405b", 126, 128, 8, 128, 0, 0, 0, 0, 131072, 405.9,
     "meta-llama/Llama-3.1-405B config.json"},
    {"mistral-7b", 32, 32, 8, 128, 0, 0, 0, 0, 32768, 7.25,
     "mistralai/Mistral-7B-v0.3 config.json (no sliding window since v0.2)"},
    {"qwen2.5-7b", 28, 28, 4, 128, 0, 0, 0, 0, 131072, 7.62, "Qwen/Qwen2.5-7B config.json"},
    {"qwen2.5-72b", 80, 64, 8, 128, 0, 0, 0, 0, 131072, 72.7, "Qwen/Qwen2.5-72B config.json"},
    {"qwen3-8b", 36, 32, 8, 128, 0, 0, 0, 0, 131072, 8.19, "Qwen/Qwen3-8B config.json"},
    {"qwen3-32b", 64, 64, 8, 128, 0, 0, 0, 0, 131072, 32.8, "Qwen/Qwen3-32B config.json"},
    // 62 layers, 5 local (window 1024) to 1 global: 52 local, 10 global.
    {"gemma3-27b", 62, 32, 16, 128, 1024, 52, 0, 0, 131072, 27.4,
     "google/gemma-3-27b-it config.json (sliding_window 1024, every 6th layer global)"},
    // MLA: kv_lora_rank 512, qk_rope_head_dim 64. Uncompressed, 128 heads of 192-dim keys
    // (128 + 64 RoPE) and 128-dim values: head_dim 160 on average, what the MHA row uses.
    {"deepseek-v3", 61, 128, 128, 160, 0, 0, 512, 64, 163840, 671.0,
     "deepseek-ai/DeepSeek-V3 config.json (kv_lora_rank 512, qk_rope_head_dim 64)"},
}};

}  // namespace

std::span<const KvShape> kv_presets() { return kPresets; }

KvShape kv_shape_of(const ModelConfig& c, std::string name) {
  KvShape s;
  s.name = std::move(name);
  s.layers = static_cast<int32_t>(c.n_layers);
  s.heads = static_cast<int32_t>(c.n_heads);
  s.kv_heads = static_cast<int32_t>(c.n_kv_heads);
  s.head_dim = static_cast<int32_t>(c.head_dim);
  s.window = c.sliding_window;
  s.local_layers = static_cast<int32_t>(c.num_local_layers());
  s.max_context = c.context_length;
  s.source = "the model file";
  return s;
}

const KvShape* find_kv_preset(std::string_view name) {
  for (const KvShape& s : kPresets)
    if (s.name == name) return &s;
  return nullptr;
}

std::optional<double> kv_element_bytes(std::string_view d) {
  if (d == "f32") return 4.0;
  if (d == "f16" || d == "bf16") return 2.0;
  if (d == "fp8" || d == "fp8_e4m3" || d == "fp8_e5m2" || d == "fp8-e4m3" || d == "fp8-e5m2" ||
      d == "int8")
    return 1.0;
  if (d == "int4") return 0.5;
  return std::nullopt;
}

double kv_bytes_per_token_layer(const KvShape& s, double element_bytes) {
  if (s.mla_rank > 0) return (double{1} * s.mla_rank + s.mla_rope_dim) * element_bytes;
  return 2.0 * s.kv_heads * s.head_dim * element_bytes;
}

double kv_bytes_per_request(const KvShape& s, int64_t context, double element_bytes) {
  const double per = kv_bytes_per_token_layer(s, element_bytes);
  const int64_t local = s.window > 0 ? std::clamp<int64_t>(s.local_layers, 0, s.layers) : 0;
  const int64_t global = s.layers - local;
  const int64_t local_tokens = s.window > 0 ? std::min<int64_t>(context, s.window) : context;
  return per * (static_cast<double>(global) * static_cast<double>(context) +
                static_cast<double>(local) * static_cast<double>(local_tokens));
}

double kv_bytes_per_token(const KvShape& s, int64_t context, double element_bytes) {
  return context > 0 ? kv_bytes_per_request(s, context, element_bytes) / static_cast<double>(context)
                     : 0.0;
}

std::vector<KvVariant> kv_variants(const KvShape& s) {
  std::vector<KvVariant> v;
  auto with_heads = [&](int32_t kv_heads) {
    KvShape x = s;
    x.kv_heads = kv_heads;
    x.mla_rank = x.mla_rope_dim = 0;
    return x;
  };
  const bool mla = s.mla_rank > 0;
  v.push_back({fmt::format("MHA ({} KV heads)", s.heads), with_heads(s.heads),
               !mla && s.kv_heads == s.heads});
  if (!mla && s.kv_heads > 1 && s.kv_heads < s.heads)
    v.push_back({fmt::format("GQA ({} KV heads)", s.kv_heads), with_heads(s.kv_heads), true});
  v.push_back({"MQA (1 KV head)", with_heads(1), !mla && s.kv_heads == 1});
  if (mla)
    v.push_back({fmt::format("MLA (latent {} + RoPE {})", s.mla_rank, s.mla_rope_dim), s, true});
  return v;
}

int64_t requests_that_fit(const KvShape& s, int64_t context, double element_bytes,
                          double memory_bytes) {
  const double per = kv_bytes_per_request(s, context, element_bytes);
  if (per <= 0 || memory_bytes <= 0) return 0;
  return static_cast<int64_t>(std::floor(memory_bytes / per));
}

}  // namespace hinge::plan
