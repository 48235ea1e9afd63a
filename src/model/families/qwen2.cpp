// Qwen2, Qwen2.5 (and the DeepSeek-R1-Distill-Qwen models): llama.cpp's LLM_ARCH_QWEN2
// (src/models/qwen2.cpp). NEOX RoPE, Q/K/V biases, no FFN extras, optional output bias.
#include <nlohmann/json.hpp>

#include "model/family.h"

namespace hinge {
namespace {

Status load(const HparamReader&, ModelConfig& c) {
  c.extras = kQkvBias | kQkvScale | kOutBias | kOutScale | kOutputBias;
  return Status::Ok();
}

Status hf(const nlohmann::json& j, const std::string& src, Metadata& out) {
  return hf_common_metadata(j, "qwen2", src, out);
}

}  // namespace

extern const Family kQwen2Family{
    .name = "qwen2",
    .gguf_archs = {"qwen2"},
    .hf_model_types = {"qwen2"},
    .models = "Qwen2, Qwen2.5, DeepSeek-R1-Distill-Qwen",
    .load_hparams = load,
    .hf_metadata = hf,
    .rope_style = kernels::RopeStyle::kNeox,
};

}  // namespace hinge
