// Writes a LoadedModel (from any source) as a GGUF file that hinge and llama.cpp both load:
// llama.* hyper-parameters, tokenizer.ggml.* vocabulary, and the weights under GGUF names.
// Hugging Face checkpoints store Q/K for rotate-half RoPE; GGUF's llama expects interleaved
// pairs, so their rows are permuted here (the reverse of llama.cpp's convert_hf_to_gguf.py).
#pragma once

#include <optional>
#include <string>

#include "common/ggml_type.h"
#include "common/status.h"
#include "format/gguf.h"
#include "model/loaded_model.h"

namespace hinge {

struct ExportOptions {
  // Type for the 2-D weight matrices; nullopt keeps each tensor's type. Matrices whose row
  // length is not a multiple of the block size stay f32 (as llama.cpp does).
  std::optional<GgmlType> matrix_type;
  // Type for the output / embedding matrix when matrix_type is set (Q4_K files use Q6_K there,
  // like llama.cpp's Q4_K_M); nullopt = matrix_type.
  std::optional<GgmlType> output_type;
};

void write_llama_metadata(gguf::GgufWriter& w, const LlamaConfig& config);
void write_vocab_metadata(gguf::GgufWriter& w, const VocabSpec& vocab);

// Converts rows of one tensor to `type` (through f32). `data` holds rows x cols of `from`.
StatusOr<std::vector<uint8_t>> convert_rows(GgmlType from, const void* data, int64_t rows,
                                            int64_t cols, GgmlType to);

Status export_gguf(const LoadedModel& model, const std::string& out_path,
                   const ExportOptions& options = {});

}  // namespace hinge
