// Mistral 3 (Ministral 3B/8B/14B text): llama.cpp's LLM_ARCH_MISTRAL3 (src/models/mistral3.cpp).
// Llama's block with YaRN RoPE (rope.scaling.*) and Llama-4 attention temperature tuning:
// queries at position p multiplied by log(floor(p / n_ctx_orig) + 1) * temperature_scale + 1.
#include "model/family.h"

namespace hinge {
namespace {

Status load(const HparamReader& hp, ModelConfig& c) {
  c.extras = kQkvBias | kQkvScale | kOutBias | kOutScale | kFfnBias | kFfnScale;
  // YaRN's betas and log multiplier are read for this family only (as llama.cpp does).
  c.rope.beta_fast = static_cast<float>(hp.get_float("rope.scaling.yarn_beta_fast").value_or(32.0));
  c.rope.beta_slow = static_cast<float>(hp.get_float("rope.scaling.yarn_beta_slow").value_or(1.0));
  c.rope.yarn_log_mul = static_cast<float>(hp.get_float("rope.scaling.yarn_log_multiplier").value_or(0.0));
  finish_rope_attn_factor(c.rope);
  c.rope_local = c.rope;
  c.attn_temp_scale = static_cast<float>(hp.get_float("attention.temperature_scale").value_or(0.0));
  if (c.attn_temp_scale != 0.0f) {
    c.attn_temp_floor = c.rope.n_ctx_orig;
    if (c.attn_temp_floor <= 0)
      return Status::Errorf("{}: attention temperature scaling needs "
                            "rope.scaling.original_context_length", hp.source());
  }
  return Status::Ok();
}

}  // namespace

extern const Family kMistral3Family{
    .name = "mistral3",
    .gguf_archs = {"mistral3"},
    .hf_model_types = {},
    .models = "Ministral 3",
    .load_hparams = load,
    .hf_metadata = nullptr,
    .rope_factors = Family::RopeFactors::kFreqs,
};

}  // namespace hinge
