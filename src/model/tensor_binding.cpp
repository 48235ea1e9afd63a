#include "model/tensor_binding.h"

#include <cstring>

#include "kernels/quant.h"

namespace hinge {

StatusOr<kernels::MatrixView> bind_matrix(const RawTensor& t, int64_t rows, int64_t cols,
                                          const std::string& source) {
  auto tr = ggml_type_traits(t.type);
  if (!tr || !tr->supported)
    return Status::Errorf("{}: tensor '{}' has type {}, which hinge cannot compute with "
                          "(supported: f32, f16, bf16, q8_0, q4_0, q4_K, q6_K)",
                          source, t.name, tr ? tr->name : "unknown");
  if (t.ne.size() != 2 || t.ne[0] != static_cast<uint64_t>(cols) ||
      t.ne[1] != static_cast<uint64_t>(rows))
    return Status::Errorf("{}: tensor '{}' has shape [{}], expected [{}, {}]", source, t.name,
                          fmt::join(t.ne, ", "), cols, rows);
  if (cols % tr->block_elems != 0)
    return Status::Errorf("{}: tensor '{}' row length {} is not a multiple of the {} block size {}",
                          source, t.name, cols, tr->name, tr->block_elems);
  kernels::MatrixView v;
  v.type = t.type;
  v.data = t.data;
  v.rows = rows;
  v.cols = cols;
  v.row_bytes = ggml_row_bytes(*tr, static_cast<uint64_t>(cols));
  if (v.row_bytes * static_cast<uint64_t>(rows) > t.num_bytes)
    return Status::Errorf("{}: tensor '{}' holds {} bytes, needs {}", source, t.name, t.num_bytes,
                          v.row_bytes * rows);
  return v;
}

StatusOr<const float*> bind_vector(const RawTensor& t, int64_t n, const std::string& source,
                                   LoadedModel& model) {
  uint64_t count = 1;
  for (uint64_t d : t.ne) count *= d;
  if (count != static_cast<uint64_t>(n) || (t.ne.size() != 1 && !(t.ne.size() == 2 && t.ne[1] == 1)))
    return Status::Errorf("{}: tensor '{}' has shape [{}], expected [{}]", source, t.name,
                          fmt::join(t.ne, ", "), n);
  if (t.type == GgmlType::F32) {
    if (t.num_bytes < n * sizeof(float))
      return Status::Errorf("{}: tensor '{}' is truncated", source, t.name);
    // Mapped f32 data may be unaligned only if the file is corrupt; copy to be safe.
    if (reinterpret_cast<uintptr_t>(t.data) % alignof(float) == 0)
      return reinterpret_cast<const float*>(t.data);
  } else if (t.type != GgmlType::F16 && t.type != GgmlType::BF16) {
    return Status::Errorf("{}: norm tensor '{}' must be f32, f16 or bf16, not {}", source, t.name,
                          ggml_type_name(t.type));
  }
  auto& buf = model.buffers.emplace_back(static_cast<size_t>(n) * sizeof(float));
  float* out = reinterpret_cast<float*>(buf.data());
  if (t.type == GgmlType::F32) {
    std::memcpy(out, t.data, n * sizeof(float));
  } else {
    if (t.num_bytes < static_cast<uint64_t>(n) * 2u) return Status::Errorf("{}: tensor '{}' is truncated", source, t.name);
    kernels::dequantize_row_ref(t.type, t.data, out, n);
  }
  return static_cast<const float*>(out);
}

}  // namespace hinge
