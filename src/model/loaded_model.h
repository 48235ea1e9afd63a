// A model loaded from any supported source, in one shape: hyper-parameters, weight views, the
// tokenizer description, and the objects that own the memory the views point into.
//
// Sources: a GGUF file, a Hugging Face directory (config.json + safetensors + tokenizer.json),
// or a llama2.c checkpoint (.bin) with its tokenizer (.bin).
#pragma once

#include <any>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "common/status.h"
#include "model/model_config.h"
#include "model/model_weights.h"
#include "tokenizer/tokenizer.h"

namespace hinge {

namespace gguf { class GgufFile; }

enum class ModelFormat { kGguf, kHuggingFace, kLlama2c };
const char* model_format_name(ModelFormat f);

// A named tensor as the loader saw it (for `hinge info` and `hinge convert`).
struct NamedTensor {
  std::string name;           // GGUF naming (token_embd.weight, blk.N.attn_q.weight, ...)
  kernels::MatrixView view;   // rows = product of outer dims, cols = ne[0]
  std::vector<uint64_t> ne;   // ggml order
};

struct LoadedModel {
  std::string path;
  ModelFormat format = ModelFormat::kGguf;
  uint64_t file_bytes = 0;
  ModelConfig config;
  ModelWeights weights;
  VocabSpec vocab;
  // tokenizer.chat_template (GGUF) or tokenizer_config.json's chat_template (HF; the "default"
  // one of a named list); empty when the model has none.
  std::string chat_template;
  // Every weight tensor under its GGUF name, in GGUF order; data in the layout GGUF expects
  // (Q/K rows permuted for interleaved RoPE when the source was a Hugging Face checkpoint and
  // `permute_for_gguf` was requested).
  std::vector<NamedTensor> tensors;

  // Read-only private file mappings some views point into (GGUF): their pages can be dropped
  // once a packed copy exists (Transformer), and are read back from the file if touched again.
  std::vector<std::span<const uint8_t>> file_mappings;
  // Owners of the memory behind the views (mapped files, converted buffers).
  std::vector<std::shared_ptr<void>> owners;
  std::vector<std::vector<uint8_t>> buffers;

  uint64_t num_parameters() const;
};

struct LoadOptions {
  std::string tokenizer_path;  // llama2.c tokenizer .bin (required for llama2.c checkpoints)
  // False: a llama2.c checkpoint without tokenizer_path loads with an empty vocabulary (enough
  // for `hinge info`); everything that tokenizes keeps the default.
  bool require_vocab = true;
  // Progress callback (fraction 0..1) for the loading bar; may be empty.
  std::function<void(double)> progress;
};

// Detects the format from the path (directory -> Hugging Face; GGUF magic; else llama2.c).
StatusOr<std::unique_ptr<LoadedModel>> load_model(const std::string& path,
                                                  const LoadOptions& options = {});

StatusOr<std::unique_ptr<LoadedModel>> load_gguf_model(const std::string& path,
                                                       const LoadOptions& options);
StatusOr<std::unique_ptr<LoadedModel>> load_hf_model(const std::string& dir,
                                                     const LoadOptions& options);
StatusOr<std::unique_ptr<LoadedModel>> load_llama2c_model(const std::string& path,
                                                          const LoadOptions& options);

// Loads only the tokenizer (vocab-only GGUF files, tokenizer.json, or a model of any format).
StatusOr<VocabSpec> load_vocab(const std::string& path, const std::string& tokenizer_path);

}  // namespace hinge
