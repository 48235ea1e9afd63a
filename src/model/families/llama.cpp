// Llama 2/3, Mistral 7B, TinyLlama, SmolLM, DeepSeek-R1-Distill-Llama: llama.cpp's LLM_ARCH_LLAMA
// (src/models/llama.cpp). Interleaved RoPE in GGUF (convert permutes Q/K); rope_freqs.weight
// holds Llama 3's frequency divisors; biases and scales apply wherever the file has them.
#include <nlohmann/json.hpp>

#include "model/family.h"

namespace hinge {
namespace {

Status load(const HparamReader&, ModelConfig& c) {
  c.extras = kQkvBias | kQkvScale | kOutBias | kOutScale | kFfnBias | kFfnScale;
  return Status::Ok();
}

Status hf(const nlohmann::json& j, const std::string& src, Metadata& out) {
  return hf_common_metadata(j, "llama", src, out);
}

}  // namespace

extern const Family kLlamaFamily{
    .name = "llama",
    .gguf_archs = {"llama"},
    .hf_model_types = {"llama", "mistral"},
    .models = "Llama 2/3, Mistral 7B, TinyLlama, SmolLM",
    .load_hparams = load,
    .hf_metadata = hf,
    .rope_factors = Family::RopeFactors::kFreqs,
};

}  // namespace hinge
