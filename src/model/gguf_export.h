// Writes a LoadedModel (from any source) as a GGUF file that hinge and llama.cpp both load:
// llama.* hyper-parameters, tokenizer.ggml.* vocabulary, and the weights under GGUF names.
// Hugging Face checkpoints store Q/K for rotate-half RoPE; GGUF's llama expects interleaved
// pairs, so their rows are permuted here (the reverse of llama.cpp's convert_hf_to_gguf.py).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "common/ggml_type.h"
#include "common/status.h"
#include "format/gguf.h"
#include "model/loaded_model.h"

namespace hinge {

// A matrix written in another type than the one asked for, because its rows (ne[0] values) do
// not split into whole blocks of the asked type.
struct TypeFallback {
  std::string name;          // GGUF tensor name
  std::vector<uint64_t> ne;  // shape, ggml order (ne[0] = row length)
  GgmlType wanted;           // the type asked for (matrix_type or output_type)
  GgmlType used;             // fallback_matrix_type(wanted, ne[0])
};

struct ExportOptions {
  // Type for the 2-D weight matrices; nullopt keeps each tensor's type. A matrix whose row
  // length is not a multiple of the type's block size gets fallback_matrix_type() instead.
  std::optional<GgmlType> matrix_type;
  // Type for the output / embedding matrix when matrix_type is set (Q4_K files use Q6_K there,
  // like llama.cpp's Q4_K_M); nullopt = matrix_type.
  std::optional<GgmlType> output_type;
  // Called once per matrix that falls back, in file order, before it is written (e.g. to warn).
  std::function<void(const TypeFallback&)> on_fallback;
};

// The type a matrix with rows of `row_elems` values gets when `wanted` is asked for: `wanted`
// itself when the rows split into its blocks, else the closest type hinge computes that fits,
// after llama.cpp's quantizer (llama_tensor_get_type): Q4_K -> Q4_0 (llama.cpp uses Q5_0, which
// hinge does not compute; Q4_0 keeps the size), Q5_K and Q6_K -> Q8_0, and F16 when rows are not a
// multiple of 32 either.
GgmlType fallback_matrix_type(GgmlType wanted, int64_t row_elems);

// The architecture keys of `config` (what the family loaders read back; llama.cpp reads them too).
void write_model_metadata(gguf::GgufWriter& w, const ModelConfig& config);
void write_vocab_metadata(gguf::GgufWriter& w, const VocabSpec& vocab);

// Converts rows of one tensor to `type` (through f32). `data` holds rows x cols of `from`.
StatusOr<std::vector<uint8_t>> convert_rows(GgmlType from, const void* data, int64_t rows,
                                            int64_t cols, GgmlType to);

Status export_gguf(const LoadedModel& model, const std::string& out_path,
                   const ExportOptions& options = {});

}  // namespace hinge
