// Granite 3.x (dense): llama.cpp's LLM_ARCH_GRANITE (src/models/granite.cpp). Llama's block
// with embedding_scale (embeddings multiplied), residual_scale (each block's output multiplied
// before the residual add), attention.scale (score multiplier) and logit_scale (logits divided).
#include <nlohmann/json.hpp>

#include "model/family.h"

namespace hinge {
namespace {

Status load(const HparamReader& hp, ModelConfig& c) {
  c.extras = kQkvBias | kQkvScale | kOutBias | kOutScale | kFfnBias;
  auto logit = hp.get_float("logit_scale");
  if (!logit) return Status::Errorf("{}: missing metadata 'granite.logit_scale'", hp.source());
  c.logit_scale = static_cast<float>(*logit);
  c.residual_scale = static_cast<float>(hp.get_float("residual_scale").value_or(0.0));
  c.embed_scale = static_cast<float>(hp.get_float("embedding_scale").value_or(0.0));
  c.attn_scale = static_cast<float>(hp.get_float("attention.scale").value_or(0.0));
  return Status::Ok();
}

// config.json's multipliers as convert_hf_to_gguf.py names them.
Status hf(const nlohmann::json& j, const std::string& src, Metadata& out) {
  HINGE_RETURN_IF_ERROR(hf_common_metadata(j, "granite", src, out));
  const std::pair<const char*, const char*> keys[] = {
      {"embedding_multiplier", "granite.embedding_scale"},
      {"residual_multiplier", "granite.residual_scale"},
      {"attention_multiplier", "granite.attention.scale"},
      {"logits_scaling", "granite.logit_scale"}};
  for (const auto& [hf_key, key] : keys) {
    auto it = j.find(hf_key);
    if (it == j.end() || !it->is_number())
      return Status::Errorf("{}: missing or non-numeric '{}'", src, hf_key);
    out.emplace_back(key, gguf::Value::f32(it->get<float>()));
  }
  return Status::Ok();
}

}  // namespace

extern const Family kGraniteFamily{
    .name = "granite",
    .gguf_archs = {"granite"},
    .hf_model_types = {"granite"},
    .models = "Granite 3.x",
    .load_hparams = load,
    .hf_metadata = hf,
    .rope_factors = Family::RopeFactors::kFreqs,
};

}  // namespace hinge
