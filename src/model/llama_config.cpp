#include "model/llama_config.h"

namespace hinge {

Status LlamaConfig::validate(const std::string& source) const {
  auto bad = [&](const std::string& what) {
    return Status::Error(source + ": invalid model hyper-parameters: " + what);
  };
  constexpr int64_t kMaxDim = 1 << 17, kMaxLayers = 1024, kMaxVocab = 1 << 22;
  if (n_vocab <= 0 || n_vocab > kMaxVocab) return bad(fmt::format("vocab size {}", n_vocab));
  if (dim <= 0 || dim > kMaxDim) return bad(fmt::format("embedding length {}", dim));
  if (n_layers <= 0 || n_layers > kMaxLayers) return bad(fmt::format("block count {}", n_layers));
  if (n_heads <= 0 || n_heads > dim) return bad(fmt::format("head count {}", n_heads));
  if (n_kv_heads <= 0 || n_kv_heads > n_heads || n_heads % n_kv_heads != 0)
    return bad(fmt::format("kv head count {} (head count {})", n_kv_heads, n_heads));
  if (head_dim <= 0 || head_dim % 2 != 0 || head_dim > 1024)
    return bad(fmt::format("head dimension {}", head_dim));
  if (ffn_dim <= 0 || ffn_dim > 8 * kMaxDim) return bad(fmt::format("feed-forward length {}", ffn_dim));
  if (context_length <= 0 || context_length > (1 << 24))
    return bad(fmt::format("context length {}", context_length));
  if (!(rms_eps > 0.0f && rms_eps < 1.0f)) return bad(fmt::format("rms epsilon {}", rms_eps));
  if (!(rope_theta > 1.0f && rope_theta < 1e9f)) return bad(fmt::format("rope theta {}", rope_theta));
  if (!rope_freq_factors.empty() &&
      static_cast<int64_t>(rope_freq_factors.size()) != head_dim / 2)
    return bad(fmt::format("{} rope frequency factors for head dimension {}",
                           rope_freq_factors.size(), head_dim));
  for (float f : rope_freq_factors)
    if (!(f > 0.0f && f < 1e6f)) return bad("rope frequency factor out of range");
  return Status::Ok();
}

}  // namespace hinge
