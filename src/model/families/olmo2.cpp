// OLMo 2 and OLMo 3: llama.cpp's LLM_ARCH_OLMO2 (src/models/olmo2.cpp). No norm before the
// blocks, RMSNorm after them (post_attention_norm, post_ffw_norm), RMSNorm over the whole Q and
// K projections, NEOX RoPE. With attention.sliding_window (OLMo 3): 3 local : 1 global layers,
// local layers rotate without the YaRN scaling.
#include <nlohmann/json.hpp>

#include "model/family.h"

namespace hinge {
namespace {

Status load(const HparamReader& hp, ModelConfig& c) {
  c.pre_norms = false;
  c.post_norms = true;
  c.qk_norm = QkNorm::kFull;
  c.extras = kOutScale;
  HINGE_ASSIGN_OR_RETURN(const int32_t swa, read_sliding_window(hp, 0));
  if (swa > 0) {
    c.sliding_window = swa;
    HINGE_RETURN_IF_ERROR(set_swa_pattern(hp, c, 4));
    c.rope_local = c.rope;  // llama.cpp: the global base, no scaling, no YaRN
    c.rope_local.freq_scale = 1.0f;
    c.rope_local.ext_factor = 0.0f;
    c.rope_local.attn_factor = 1.0f;
  }
  return Status::Ok();
}

Status hf(const nlohmann::json& j, const std::string& src, Metadata& out) {
  return hf_common_metadata(j, "olmo2", src, out);
}

}  // namespace

extern const Family kOlmo2Family{
    .name = "olmo2",
    .gguf_archs = {"olmo2"},
    .hf_model_types = {"olmo2"},
    .models = "OLMo 2, OLMo 3",
    .load_hparams = load,
    .hf_metadata = hf,
    .hf_layer_names = {{"post_attention_layernorm.weight", "post_attention_norm.weight"},
                       {"post_feedforward_layernorm.weight", "post_ffw_norm.weight"},
                       {"self_attn.q_norm.weight", "attn_q_norm.weight"},
                       {"self_attn.k_norm.weight", "attn_k_norm.weight"}},
    .rope_style = kernels::RopeStyle::kNeox,
};

}  // namespace hinge
