#include "model/tensor_binding.h"

#include <cmath>
#include <cstring>
#include <string_view>
#include <unordered_map>

#include <fmt/format.h>

#include "kernels/quant.h"
#include "model/family.h"

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

Status bind_model_weights(LoadedModel& model, const std::vector<RawTensor>& tensors,
                          const std::string& source) {
  std::unordered_map<std::string_view, const RawTensor*> by_name;
  by_name.reserve(tensors.size());
  for (const RawTensor& t : tensors) by_name.emplace(t.name, &t);
  auto find = [&](std::string_view name) -> const RawTensor* {
    auto it = by_name.find(name);
    return it == by_name.end() ? nullptr : it->second;
  };
  ModelConfig& c = model.config;
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
  // Optional extras the family applies: bias [rows] and a one-element scale.
  // llama.cpp adds an FFN bias before the FFN's scale and an attention bias after its scale.
  auto extras = [&](const std::string& base, int64_t rows, uint32_t bias_bit, uint32_t scale_bit,
                    LinearExtras& x) -> Status {
    x.bias_first = (bias_bit & kFfnBias) != 0;
    if ((c.extras & bias_bit) && find(base + ".bias")) {
      HINGE_ASSIGN_OR_RETURN(x.bias, vec(base + ".bias", rows));
    }
    if ((c.extras & scale_bit) && find(base + ".scale")) {
      HINGE_ASSIGN_OR_RETURN(const float* s, vec(base + ".scale", 1));
      if (!std::isfinite(*s)) return Status::Errorf("{}: tensor '{}.scale' is not finite", source, base);
      x.scale = *s;
    }
    return Status::Ok();
  };
  // Rows [begin, begin + n) of a bound matrix as its own view.
  auto rows_of = [](const kernels::MatrixView& m, int64_t begin, int64_t n) {
    kernels::MatrixView v = m;
    v.data = static_cast<const uint8_t*>(m.data) + begin * m.row_bytes;
    v.rows = n;
    return v;
  };

  ModelWeights& w = model.weights;
  HINGE_ASSIGN_OR_RETURN(w.token_embd, matrix("token_embd.weight", c.n_vocab, c.dim));
  w.layers.resize(static_cast<size_t>(c.n_layers));
  const int64_t q_dim = c.q_dim(), kv_dim = c.kv_dim();
  for (int64_t l = 0; l < c.n_layers; ++l) {
    LayerWeights& L = w.layers[static_cast<size_t>(l)];
    const std::string p = fmt::format("blk.{}.", l);
    if (c.pre_norms) {
      HINGE_ASSIGN_OR_RETURN(L.attn_norm, vec(p + "attn_norm.weight", c.dim));
    }
    if (find(p + "attn_qkv.weight")) {  // fused [q; k; v] (phi3)
      HINGE_ASSIGN_OR_RETURN(auto qkv, matrix(p + "attn_qkv.weight", q_dim + 2 * kv_dim, c.dim));
      L.wq = rows_of(qkv, 0, q_dim);
      L.wk = rows_of(qkv, q_dim, kv_dim);
      L.wv = rows_of(qkv, q_dim + kv_dim, kv_dim);
      LinearExtras x;
      HINGE_RETURN_IF_ERROR(extras(p + "attn_qkv", q_dim + 2 * kv_dim, kQkvBias, kQkvScale, x));
      L.xq = L.xk = L.xv = x;
      if (x.bias) {
        L.xk.bias = x.bias + q_dim;
        L.xv.bias = x.bias + q_dim + kv_dim;
      }
    } else {
      HINGE_ASSIGN_OR_RETURN(L.wq, matrix(p + "attn_q.weight", q_dim, c.dim));
      HINGE_ASSIGN_OR_RETURN(L.wk, matrix(p + "attn_k.weight", kv_dim, c.dim));
      HINGE_ASSIGN_OR_RETURN(L.wv, matrix(p + "attn_v.weight", kv_dim, c.dim));
      HINGE_RETURN_IF_ERROR(extras(p + "attn_q", q_dim, kQkvBias, kQkvScale, L.xq));
      HINGE_RETURN_IF_ERROR(extras(p + "attn_k", kv_dim, kQkvBias, kQkvScale, L.xk));
      HINGE_RETURN_IF_ERROR(extras(p + "attn_v", kv_dim, kQkvBias, kQkvScale, L.xv));
    }
    HINGE_ASSIGN_OR_RETURN(L.wo, matrix(p + "attn_output.weight", c.dim, q_dim));
    HINGE_RETURN_IF_ERROR(extras(p + "attn_output", c.dim, kOutBias, kOutScale, L.xo));
    if (c.qk_norm == QkNorm::kPerHead) {
      HINGE_ASSIGN_OR_RETURN(L.q_norm, vec(p + "attn_q_norm.weight", c.head_dim));
      HINGE_ASSIGN_OR_RETURN(L.k_norm, vec(p + "attn_k_norm.weight", c.head_dim));
    } else if (c.qk_norm == QkNorm::kFull) {
      HINGE_ASSIGN_OR_RETURN(L.q_norm, vec(p + "attn_q_norm.weight", q_dim));
      HINGE_ASSIGN_OR_RETURN(L.k_norm, vec(p + "attn_k_norm.weight", kv_dim));
    }
    if (c.post_norms) {
      HINGE_ASSIGN_OR_RETURN(L.post_attn_norm, vec(p + "post_attention_norm.weight", c.dim));
      HINGE_ASSIGN_OR_RETURN(L.post_ffn_norm, vec(p + "post_ffw_norm.weight", c.dim));
    }
    if (c.pre_norms) {
      HINGE_ASSIGN_OR_RETURN(L.ffn_norm, vec(p + "ffn_norm.weight", c.dim));
    }
    if (c.fused_gate_up) {  // ffn_up = [gate; up] (phi3)
      HINGE_ASSIGN_OR_RETURN(auto gu, matrix(p + "ffn_up.weight", 2 * c.ffn_dim, c.dim));
      L.w_gate = rows_of(gu, 0, c.ffn_dim);
      L.w_up = rows_of(gu, c.ffn_dim, c.ffn_dim);
    } else {
      HINGE_ASSIGN_OR_RETURN(L.w_gate, matrix(p + "ffn_gate.weight", c.ffn_dim, c.dim));
      HINGE_ASSIGN_OR_RETURN(L.w_up, matrix(p + "ffn_up.weight", c.ffn_dim, c.dim));
      HINGE_RETURN_IF_ERROR(extras(p + "ffn_gate", c.ffn_dim, kFfnBias, kFfnScale, L.x_gate));
      HINGE_RETURN_IF_ERROR(extras(p + "ffn_up", c.ffn_dim, kFfnBias, kFfnScale, L.x_up));
    }
    HINGE_ASSIGN_OR_RETURN(L.w_down, matrix(p + "ffn_down.weight", c.dim, c.ffn_dim));
    HINGE_RETURN_IF_ERROR(extras(p + "ffn_down", c.dim, kFfnBias, kFfnScale, L.x_down));
  }
  HINGE_ASSIGN_OR_RETURN(w.output_norm, vec("output_norm.weight", c.dim));
  if (find("output.weight")) {
    HINGE_ASSIGN_OR_RETURN(w.output, matrix("output.weight", c.n_vocab, c.dim));
    c.tied_output = false;
  } else {
    w.output = w.token_embd;
    c.tied_output = true;
  }
  if ((c.extras & kOutputBias) && find("output.bias")) {
    HINGE_ASSIGN_OR_RETURN(w.output_bias, vec("output.bias", c.n_vocab));
  }

  // Global RoPE frequency factors (the file's, when the family reads them).
  const Family::RopeFactors rf = c.family ? c.family->rope_factors : Family::RopeFactors::kFreqs;
  const char* factors = nullptr;
  if (rf == Family::RopeFactors::kFreqs && find("rope_freqs.weight")) {
    factors = "rope_freqs.weight";
  } else if (rf == Family::RopeFactors::kLongShort) {
    const bool long_ctx = c.context_length > c.rope.n_ctx_orig;
    const char* name = long_ctx ? "rope_factors_long.weight" : "rope_factors_short.weight";
    const char* other = long_ctx ? "rope_factors_short.weight" : "rope_factors_long.weight";
    if (find(other)) HINGE_RETURN_IF_ERROR(vec(other, c.rope.n_rot / 2).status());  // kept for export
    if (find(name)) factors = name;
  }
  if (factors) {
    const int64_t n = c.rope.n_rot / 2;
    HINGE_ASSIGN_OR_RETURN(const float* f, vec(factors, n));
    c.rope.freq_factors.assign(f, f + n);
    for (float x : c.rope.freq_factors)
      if (!std::isfinite(x) || std::fabs(x) < 1e-30f || std::fabs(x) > 1e30f)
        return Status::Errorf("{}: tensor '{}' holds a factor out of range", source, factors);
  }
  return Status::Ok();
}

}  // namespace hinge
