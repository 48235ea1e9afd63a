// A model family: how one architecture's GGUF metadata becomes a ModelConfig, and how its
// Hugging Face config.json and tensor names map onto GGUF's. One file per family under
// model/families/ (named after it) defines a `Family` and registers it in families/registry.cpp;
// the forward pass (model/transformer.h) is shared and reads only the ModelConfig.
//
// Loading order (model/gguf_loader.cpp, model/hf_loader.cpp): the common GGUF keys
// (load_common_hparams), then the family's load_hparams, which sets the block recipe and reads
// its own keys exactly as llama.cpp's load_arch_hparams does, then ModelConfig::validate().
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "common/status.h"
#include "format/gguf.h"
#include "model/model_config.h"

namespace hinge {

using Metadata = std::vector<std::pair<std::string, gguf::Value>>;

// Typed lookups of `{arch}.{key}` in GGUF-style metadata.
class HparamReader {
 public:
  HparamReader(const Metadata& md, std::string arch, std::string source)
      : md_(md), arch_(std::move(arch)), source_(std::move(source)) {}
  const std::string& arch() const { return arch_; }
  const std::string& source() const { return source_; }
  const gguf::Value* find(std::string_view key) const;  // key without the arch prefix
  std::optional<int64_t> get_int(std::string_view key) const;
  std::optional<double> get_float(std::string_view key) const;
  std::optional<std::string> get_string(std::string_view key) const;
  std::optional<bool> get_bool(std::string_view key) const;
  // A required integer: an error naming the key when missing.
  StatusOr<int64_t> need_int(std::string_view key) const;

 private:
  const Metadata& md_;
  std::string arch_, source_;
};

// A Hugging Face tensor name rule: `hf` under model.layers.N. (or at the top level when
// `top`) becomes `gguf`.
struct HfTensorName {
  const char* hf;
  const char* gguf;
};

struct Family {
  const char* name;                          // "qwen2"
  std::vector<std::string_view> gguf_archs;  // general.architecture values
  std::vector<std::string_view> hf_model_types;  // config.json model_type values
  const char* models;                        // what people run with it, for messages
  // Reads the family's own keys and sets its recipe; the common keys are already in `c`.
  Status (*load_hparams)(const HparamReader& hp, ModelConfig& c);
  // config.json -> GGUF metadata (arch keys) as convert_hf_to_gguf.py writes them; nullptr when
  // hinge reads no Hugging Face checkpoint of this family.
  Status (*hf_metadata)(const nlohmann::json& config, const std::string& source, Metadata& out);
  // Per-layer tensor names that differ from the common ones (hf_loader.cpp), or empty.
  std::vector<HfTensorName> hf_layer_names;
  // Hugging Face RMSNorm weights are stored as w - 1 (Gemma: x * (1 + w)); GGUF holds w.
  bool hf_norm_plus_one = false;
  // RoPE pair layout of the family's GGUF files (llama.cpp's llama_model_rope_type): NEOX for
  // the families whose GGUF keeps Hugging Face's rotate-half order, interleaved for llama-like
  // ones (convert permutes their Q/K rows).
  kernels::RopeStyle rope_style = kernels::RopeStyle::kInterleaved;
  // Global frequency-factor tensors the family reads: rope_freqs.weight (llama-like) or
  // rope_factors_long/short.weight (phi3 LongRoPE).
  enum class RopeFactors : uint8_t { kNone, kFreqs, kLongShort } rope_factors = RopeFactors::kNone;
};

// The family of a GGUF architecture / HF model_type, or nullptr.
const Family* find_family_by_arch(std::string_view arch);
const Family* find_family_by_hf_type(std::string_view model_type);
std::span<const Family* const> all_families();
// "llama, qwen2, ..." for error messages.
std::string supported_architectures();

// The keys every family shares (llama.cpp's load_hparams before load_arch_hparams), into `c`.
Status load_common_hparams(const HparamReader& hp, ModelConfig& c);
// Sets layer_local from attention.sliding_window_pattern (a period P: layer l is local unless
// l % P == P - 1, or with dense_first unless l % P == 0; or an array of per-layer flags) with
// `default_period` when the key is absent.
Status set_swa_pattern(const HparamReader& hp, ModelConfig& c, int64_t default_period,
                       bool dense_first = false);
// RopeConfig::attn_factor from its YaRN settings and the file's rope.scaling.attn_factor.
void finish_rope_attn_factor(RopeConfig& r);
// attention.sliding_window, range-checked (0 when absent).
StatusOr<int32_t> read_sliding_window(const HparamReader& hp, int64_t default_window);
// config.json keys every family shares (hidden_size, num_hidden_layers, ...) as GGUF keys.
Status hf_common_metadata(const nlohmann::json& j, const std::string& arch,
                          const std::string& source, Metadata& out);
// config.json's rope_scaling (linear, yarn, llama3) as GGUF keys; llama3 factors go into
// `freq_factors` (the rope_freqs tensor).
Status hf_rope_scaling(const nlohmann::json& j, const std::string& arch, const std::string& source,
                       Metadata& out);

}  // namespace hinge
