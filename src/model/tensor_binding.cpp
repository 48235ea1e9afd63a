#include "model/tensor_binding.h"

#include <cstring>
#include <string_view>
#include <unordered_map>

#include <fmt/format.h>

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

Status bind_llama_weights(LoadedModel& model, const std::vector<RawTensor>& tensors,
                          const std::string& source) {
  std::unordered_map<std::string_view, const RawTensor*> by_name;
  by_name.reserve(tensors.size());
  for (const RawTensor& t : tensors) by_name.emplace(t.name, &t);
  auto find = [&](std::string_view name) -> const RawTensor* {
    auto it = by_name.find(name);
    return it == by_name.end() ? nullptr : it->second;
  };
  const LlamaConfig& c = model.config;
  auto need = [&](const std::string& name) -> StatusOr<const RawTensor*> {
    const RawTensor* t = find(name);
    if (!t) return Status::Error(source + ": missing tensor '" + name + "'");
    return t;
  };
  auto record = [&](const RawTensor& t, const kernels::MatrixView& v) {
    model.tensors.push_back(NamedTensor{t.name, v, t.ne});
  };
  auto matrix = [&](const std::string& name, int64_t rows,
                    int64_t cols) -> StatusOr<kernels::MatrixView> {
    HINGE_ASSIGN_OR_RETURN(const RawTensor* t, need(name));
    HINGE_ASSIGN_OR_RETURN(auto v, bind_matrix(*t, rows, cols, source));
    record(*t, v);
    return v;
  };
  auto vec = [&](const std::string& name, int64_t n) -> StatusOr<const float*> {
    HINGE_ASSIGN_OR_RETURN(const RawTensor* t, need(name));
    HINGE_ASSIGN_OR_RETURN(const float* p, bind_vector(*t, n, source, model));
    kernels::MatrixView v{GgmlType::F32, p, 1, n, static_cast<size_t>(n) * sizeof(float)};
    record(*t, v);
    return p;
  };

  LlamaWeights& w = model.weights;
  HINGE_ASSIGN_OR_RETURN(w.token_embd, matrix("token_embd.weight", c.n_vocab, c.dim));
  w.layers.resize(static_cast<size_t>(c.n_layers));
  for (int64_t l = 0; l < c.n_layers; ++l) {
    LayerWeights& L = w.layers[static_cast<size_t>(l)];
    const std::string p = fmt::format("blk.{}.", l);
    HINGE_ASSIGN_OR_RETURN(L.attn_norm, vec(p + "attn_norm.weight", c.dim));
    HINGE_ASSIGN_OR_RETURN(L.wq, matrix(p + "attn_q.weight", c.q_dim(), c.dim));
    HINGE_ASSIGN_OR_RETURN(L.wk, matrix(p + "attn_k.weight", c.kv_dim(), c.dim));
    HINGE_ASSIGN_OR_RETURN(L.wv, matrix(p + "attn_v.weight", c.kv_dim(), c.dim));
    HINGE_ASSIGN_OR_RETURN(L.wo, matrix(p + "attn_output.weight", c.dim, c.q_dim()));
    HINGE_ASSIGN_OR_RETURN(L.ffn_norm, vec(p + "ffn_norm.weight", c.dim));
    HINGE_ASSIGN_OR_RETURN(L.w_gate, matrix(p + "ffn_gate.weight", c.ffn_dim, c.dim));
    HINGE_ASSIGN_OR_RETURN(L.w_up, matrix(p + "ffn_up.weight", c.ffn_dim, c.dim));
    HINGE_ASSIGN_OR_RETURN(L.w_down, matrix(p + "ffn_down.weight", c.dim, c.ffn_dim));
  }
  HINGE_ASSIGN_OR_RETURN(w.output_norm, vec("output_norm.weight", c.dim));
  if (find("output.weight")) {
    HINGE_ASSIGN_OR_RETURN(w.output, matrix("output.weight", c.n_vocab, c.dim));
    model.config.tied_output = false;
  } else {
    w.output = w.token_embd;
    model.config.tied_output = true;
  }
  return Status::Ok();
}

}  // namespace hinge
