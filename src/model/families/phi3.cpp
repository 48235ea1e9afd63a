// Phi-3 / Phi-3.5 / Phi-4-mini: llama.cpp's LLM_ARCH_PHI3 (src/models/phi3.cpp). NEOX RoPE,
// fused attn_qkv and fused [gate; up] ffn_up, LongRoPE: rope_factors_long/short.weight (long
// when the context exceeds rope.scaling.original_context_length) with the file's attention
// factor. Like llama.cpp, the sliding window some Phi-3 files declare is not applied.
#include "model/family.h"

namespace hinge {
namespace {

Status load(const HparamReader&, ModelConfig& c) {
  c.fused_gate_up = true;
  c.extras = kQkvBias | kQkvScale | kOutBias | kOutScale | kOutputBias;
  return Status::Ok();
}

}  // namespace

extern const Family kPhi3Family{
    .name = "phi3",
    .gguf_archs = {"phi3"},
    .hf_model_types = {},
    .models = "Phi-3, Phi-3.5, Phi-4-mini",
    .load_hparams = load,
    .hf_metadata = nullptr,
    .rope_style = kernels::RopeStyle::kNeox,
    .rope_factors = Family::RopeFactors::kLongShort,
};

}  // namespace hinge
