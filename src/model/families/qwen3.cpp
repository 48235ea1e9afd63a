// Qwen3 (dense): llama.cpp's LLM_ARCH_QWEN3 (src/models/qwen3.cpp). NEOX RoPE, per-head RMSNorm
// of Q and K before RoPE, head size from attention.key_length (n_heads x head_dim may differ
// from the embedding length).
#include <nlohmann/json.hpp>

#include "model/family.h"

namespace hinge {
namespace {

Status load(const HparamReader&, ModelConfig& c) {
  c.qk_norm = QkNorm::kPerHead;
  c.extras = kQkvBias | kQkvScale | kOutBias | kOutScale | kFfnScale;
  return Status::Ok();
}

Status hf(const nlohmann::json& j, const std::string& src, Metadata& out) {
  return hf_common_metadata(j, "qwen3", src, out);
}

}  // namespace

extern const Family kQwen3Family{
    .name = "qwen3",
    .gguf_archs = {"qwen3"},
    .hf_model_types = {"qwen3"},
    .models = "Qwen3",
    .load_hparams = load,
    .hf_metadata = hf,
    .hf_layer_names = {{"self_attn.q_norm.weight", "attn_q_norm.weight"},
                       {"self_attn.k_norm.weight", "attn_k_norm.weight"}},
    .rope_style = kernels::RopeStyle::kNeox,
};

}  // namespace hinge
