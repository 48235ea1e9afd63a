// Gemma 2: llama.cpp's LLM_ARCH_GEMMA2 (src/models/gemma2.cpp). Embeddings scaled by sqrt(dim),
// sandwich norms (post_attention_norm, post_ffw_norm), GEGLU with tanh-GELU, attention and
// final logit soft-capping, alternating sliding-window layers (even layers local, window 4096
// unless the file says otherwise), queries scaled by 1/sqrt(head_dim) (27B: sqrt(dim/heads)).
#include <cmath>

#include <nlohmann/json.hpp>

#include "model/family.h"

namespace hinge {
namespace {

Status load(const HparamReader& hp, ModelConfig& c) {
  c.post_norms = true;
  c.activation = Activation::kGeluTanh;
  c.extras = kQkvBias | kQkvScale | kOutScale;
  c.embed_scale = std::sqrt(static_cast<float>(c.dim));
  HINGE_ASSIGN_OR_RETURN(c.sliding_window, read_sliding_window(hp, 4096));
  HINGE_RETURN_IF_ERROR(set_swa_pattern(hp, c, 2));
  c.rope_local = c.rope;  // local layers rotate like the global ones unless freq_base_swa says
  c.rope_local.theta = static_cast<float>(hp.get_float("rope.freq_base_swa").value_or(c.rope.theta));
  c.attn_softcap = static_cast<float>(hp.get_float("attn_logit_softcapping").value_or(50.0));
  c.final_softcap = static_cast<float>(hp.get_float("final_logit_softcapping").value_or(30.0));
  c.attn_scale = c.n_layers == 46 ? 1.0f / std::sqrt(static_cast<float>(c.dim / c.n_heads))
                                  : 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  return Status::Ok();
}

Status hf(const nlohmann::json& j, const std::string& src, Metadata& out) {
  HINGE_RETURN_IF_ERROR(hf_common_metadata(j, "gemma2", src, out));
  for (const char* key : {"attn_logit_softcapping", "final_logit_softcapping"})
    if (j.contains(key) && j[key].is_number())
      out.emplace_back(std::string("gemma2.") + key, gguf::Value::f32(j[key].get<float>()));
  return Status::Ok();
}

}  // namespace

extern const std::vector<HfTensorName> kGemmaHfLayerNames{
    {"post_attention_layernorm.weight", "post_attention_norm.weight"},
    {"pre_feedforward_layernorm.weight", "ffn_norm.weight"},
    {"post_feedforward_layernorm.weight", "post_ffw_norm.weight"},
    {"self_attn.q_norm.weight", "attn_q_norm.weight"},
    {"self_attn.k_norm.weight", "attn_k_norm.weight"},
};

extern const Family kGemma2Family{
    .name = "gemma2",
    .gguf_archs = {"gemma2"},
    .hf_model_types = {"gemma2"},
    .models = "Gemma 2",
    .load_hparams = load,
    .hf_metadata = hf,
    .hf_layer_names = kGemmaHfLayerNames,
    .hf_norm_plus_one = true,
    .rope_style = kernels::RopeStyle::kNeox,
};

}  // namespace hinge
