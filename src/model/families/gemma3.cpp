// Gemma 3 (text): llama.cpp's LLM_ARCH_GEMMA3 (src/models/gemma3.cpp). Gemma 2's block with
// per-head Q/K RMSNorm instead of attention soft-capping; 5 local : 1 global layers
// (sliding_window_pattern 6) when attention.sliding_window is set; local layers rotate with
// rope.freq_base_swa (10000) and no scaling, global layers with rope.freq_base and the linear
// rope.scaling.factor. Optional final soft-capping.
#include <cmath>

#include <nlohmann/json.hpp>

#include "model/family.h"

namespace hinge {

extern const std::vector<HfTensorName> kGemmaHfLayerNames;

namespace {

Status load(const HparamReader& hp, ModelConfig& c) {
  c.post_norms = true;
  c.qk_norm = QkNorm::kPerHead;
  c.activation = Activation::kGeluTanh;
  c.extras = kQkvBias | kQkvScale | kOutScale;
  c.embed_scale = std::sqrt(static_cast<float>(c.dim));
  HINGE_ASSIGN_OR_RETURN(const int32_t swa, read_sliding_window(hp, 0));
  if (swa > 0) {
    c.sliding_window = swa;
    HINGE_RETURN_IF_ERROR(set_swa_pattern(hp, c, 6));
    c.rope_local.theta = static_cast<float>(hp.get_float("rope.freq_base_swa").value_or(10000.0));
  }
  c.final_softcap = static_cast<float>(hp.get_float("final_logit_softcapping").value_or(0.0));
  c.attn_scale = c.n_layers == 62 ? 1.0f / std::sqrt(static_cast<float>(c.dim / c.n_heads))
                                  : 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  return Status::Ok();
}

Status hf(const nlohmann::json& j, const std::string& src, Metadata& out) {
  HINGE_RETURN_IF_ERROR(hf_common_metadata(j, "gemma3", src, out));
  if (j.contains("rope_local_base_freq") && j["rope_local_base_freq"].is_number())
    out.emplace_back("gemma3.rope.freq_base_swa",
                     gguf::Value::f32(j["rope_local_base_freq"].get<float>()));
  if (j.contains("final_logit_softcapping") && j["final_logit_softcapping"].is_number())
    out.emplace_back("gemma3.final_logit_softcapping",
                     gguf::Value::f32(j["final_logit_softcapping"].get<float>()));
  // layer_types (transformers >= 4.53) or sliding_window_pattern (a period).
  if (j.contains("layer_types") && j["layer_types"].is_array()) {
    std::vector<gguf::Value> flags;
    for (const auto& t : j["layer_types"])
      flags.push_back(gguf::Value::boolean(t.is_string() && t.get<std::string>() == "sliding_attention"));
    out.emplace_back("gemma3.attention.sliding_window_pattern",
                     gguf::Value::make_array(gguf::ValueType::BOOL, std::move(flags)));
  } else if (j.contains("sliding_window_pattern") && j["sliding_window_pattern"].is_number_integer()) {
    out.emplace_back("gemma3.attention.sliding_window_pattern",
                     gguf::Value::u32(j["sliding_window_pattern"].get<uint32_t>()));
  }
  return Status::Ok();
}

}  // namespace

extern const Family kGemma3Family{
    .name = "gemma3",
    .gguf_archs = {"gemma3"},
    .hf_model_types = {"gemma3_text", "gemma3"},
    .models = "Gemma 3",
    .load_hparams = load,
    .hf_metadata = hf,
    .hf_layer_names = kGemmaHfLayerNames,
    .hf_norm_plus_one = true,
    .rope_style = kernels::RopeStyle::kNeox,
};

}  // namespace hinge
