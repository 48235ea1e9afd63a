// Shared helpers of the loaders: turn a raw tensor (type, shape, bytes) into the views the
// forward pass uses, validating shape and type against what the config expects.
#pragma once

#include <string>
#include <vector>

#include "common/ggml_type.h"
#include "common/status.h"
#include "model/loaded_model.h"

namespace hinge {

struct RawTensor {
  std::string name;
  GgmlType type = GgmlType::F32;
  std::vector<uint64_t> ne;  // ggml order (ne[0] innermost)
  const uint8_t* data = nullptr;
  uint64_t num_bytes = 0;
};

// A [rows, cols] matrix (ne = {cols, rows}) of a type the kernels support.
StatusOr<kernels::MatrixView> bind_matrix(const RawTensor& t, int64_t rows, int64_t cols,
                                          const std::string& source);
// A [n] vector as f32; other float types are converted into a buffer owned by `model`.
StatusOr<const float*> bind_vector(const RawTensor& t, int64_t n, const std::string& source,
                                   LoadedModel& model);

// Fills model.weights from tensors named the GGUF way (every loader renames to GGUF names
// first) and records model.tensors. The output matrix falls back to the embedding (tied).
Status bind_model_weights(LoadedModel& model, const std::vector<RawTensor>& tensors,
                          const std::string& source);

}  // namespace hinge
