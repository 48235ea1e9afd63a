#include "model/model_config.h"

#include <cmath>

#include <fmt/format.h>

#include "kernels/kv_quant.h"

namespace hinge {

Status ModelConfig::validate(const std::string& source) const {
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
  if (head_dim <= 0 || head_dim % 2 != 0 || head_dim > kernels::kKvMaxHeadDim)
    return bad(fmt::format("head dimension {}", head_dim));
  if (ffn_dim <= 0 || ffn_dim > 8 * kMaxDim) return bad(fmt::format("feed-forward length {}", ffn_dim));
  if (context_length <= 0 || context_length > (1 << 24))
    return bad(fmt::format("context length {}", context_length));
  if (!(rms_eps > 0.0f && rms_eps < 1.0f)) return bad(fmt::format("rms epsilon {}", rms_eps));
  auto check_rope = [&](const RopeConfig& r, const char* which) -> Status {
    if (r.n_rot <= 0 || r.n_rot > head_dim || r.n_rot % 2 != 0)
      return bad(fmt::format("{} rope dimension count {} (head dimension {})", which, r.n_rot,
                             head_dim));
    if (!(r.theta > 1.0f && r.theta < 1e12f)) return bad(fmt::format("{} rope theta {}", which, r.theta));
    if (!(r.freq_scale > 0.0f && r.freq_scale <= 1e3f))
      return bad(fmt::format("{} rope frequency scale {}", which, r.freq_scale));
    if (!(std::isfinite(r.attn_factor) && r.attn_factor > 0.0f && r.attn_factor < 1e3f))
      return bad(fmt::format("{} rope attention factor {}", which, r.attn_factor));
    if (!(std::isfinite(r.ext_factor) && std::isfinite(r.beta_fast) && std::isfinite(r.beta_slow)))
      return bad(fmt::format("{} YaRN parameters", which));
    if (r.ext_factor != 0.0f && (r.n_ctx_orig <= 0 || r.beta_fast <= 0 || r.beta_slow <= 0))
      return bad(fmt::format("{} YaRN original context {}", which, r.n_ctx_orig));
    if (!r.freq_factors.empty() && static_cast<int64_t>(r.freq_factors.size()) != r.n_rot / 2)
      return bad(fmt::format("{} rope frequency factors for {} rotated dimensions",
                             r.freq_factors.size(), r.n_rot));
    for (float f : r.freq_factors)
      if (!std::isfinite(f) || std::fabs(f) < 1e-30f || std::fabs(f) > 1e30f)
        return bad("rope frequency factor out of range");
    return Status::Ok();
  };
  HINGE_RETURN_IF_ERROR(check_rope(rope, "global"));
  HINGE_RETURN_IF_ERROR(check_rope(rope_local, "local"));
  if (!layer_local.empty()) {
    if (static_cast<int64_t>(layer_local.size()) != n_layers) return bad("sliding-window layer flags");
    if (sliding_window <= 0 && num_local_layers() > 0)
      return bad(fmt::format("sliding window {}", sliding_window));
  }
  if (sliding_window < 0 || sliding_window > (1 << 24)) return bad(fmt::format("sliding window {}", sliding_window));
  for (float f : {attn_scale, attn_softcap, final_softcap, embed_scale, residual_scale, logit_scale,
                  attn_temp_scale})
    if (!std::isfinite(f) || std::fabs(f) > 1e6f) return bad("a scale or soft-cap is not finite");
  if (attn_scale < 0 || attn_softcap < 0 || final_softcap < 0 || logit_scale < 0)
    return bad("negative attention scale, soft-cap or logit scale");
  if (attn_temp_scale != 0.0f && attn_temp_floor <= 0) return bad("attention temperature floor");
  return Status::Ok();
}

}  // namespace hinge
