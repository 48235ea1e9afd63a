// Template part of tensor_binding.h.
#pragma once

#include <fmt/format.h>

namespace hinge {

template <typename Find>
Status bind_llama_weights(LoadedModel& model, Find&& find, const std::string& source) {
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
  if (find(std::string("output.weight"))) {
    HINGE_ASSIGN_OR_RETURN(w.output, matrix("output.weight", c.n_vocab, c.dim));
    model.config.tied_output = false;
  } else {
    w.output = w.token_embd;
    model.config.tied_output = true;
  }
  return Status::Ok();
}

}  // namespace hinge
