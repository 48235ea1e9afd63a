#include "model/gguf_export.h"

#include <cstring>

#include "kernels/quant.h"
#include "model/family.h"
#include "tokenizer/vocab_gguf.h"

namespace hinge {

namespace {
// The layer period P with layer l local iff l % P < P - 1 (llama.cpp's set_swa_pattern), or 0.
int64_t swa_period(const ModelConfig& c) {
  for (int64_t p = 1; p <= c.n_layers + 1; ++p) {
    bool ok = true;
    for (int64_t l = 0; l < c.n_layers && ok; ++l) ok = c.is_local(l) == (l % p < p - 1);
    if (ok) return p;
  }
  return 0;
}
}  // namespace

void write_model_metadata(gguf::GgufWriter& w, const ModelConfig& c) {
  using gguf::Value;
  const std::string a = c.architecture + ".";
  auto u32 = [](int64_t v) { return Value::u32(static_cast<uint32_t>(v)); };
  w.set("general.architecture", Value::str(c.architecture));
  w.set("general.name", Value::str(c.name.empty() ? "hinge" : c.name));
  w.set("general.alignment", Value::u32(32));
  w.set(a + "vocab_size", u32(c.n_vocab));
  w.set(a + "context_length", u32(c.context_length));
  w.set(a + "embedding_length", u32(c.dim));
  w.set(a + "block_count", u32(c.n_layers));
  w.set(a + "feed_forward_length", u32(c.ffn_dim));
  w.set(a + "attention.head_count", u32(c.n_heads));
  w.set(a + "attention.head_count_kv", u32(c.n_kv_heads));
  w.set(a + "rope.dimension_count", u32(c.rope.n_rot));
  if (c.head_dim != c.dim / c.n_heads) {
    w.set(a + "attention.key_length", u32(c.head_dim));
    w.set(a + "attention.value_length", u32(c.head_dim));
  }
  w.set(a + "rope.freq_base", Value::f32(c.rope.theta));
  w.set(a + "attention.layer_norm_rms_epsilon", Value::f32(c.rms_eps));
  const RopeConfig& r = c.rope;
  if (r.ext_factor != 0.0f || r.freq_scale != 1.0f) {
    w.set(a + "rope.scaling.type", Value::str(r.ext_factor != 0.0f ? "yarn" : "linear"));
    w.set(a + "rope.scaling.factor", Value::f32(1.0f / r.freq_scale));
    if (r.ext_factor != 0.0f) {
      w.set(a + "rope.scaling.yarn_beta_fast", Value::f32(r.beta_fast));
      w.set(a + "rope.scaling.yarn_beta_slow", Value::f32(r.beta_slow));
      if (r.yarn_log_mul != 0.0f) w.set(a + "rope.scaling.yarn_log_multiplier", Value::f32(r.yarn_log_mul));
    }
  }
  if (r.n_ctx_orig != c.context_length) w.set(a + "rope.scaling.original_context_length", u32(r.n_ctx_orig));
  if (r.scaling_attn_factor != 1.0f) w.set(a + "rope.scaling.attn_factor", Value::f32(r.scaling_attn_factor));
  if (c.rope_local.n_rot != r.n_rot) w.set(a + "rope.dimension_count_swa", u32(c.rope_local.n_rot));
  if (c.num_local_layers() > 0) {
    w.set(a + "attention.sliding_window", u32(c.sliding_window));
    w.set(a + "rope.freq_base_swa", Value::f32(c.rope_local.theta));
    if (const int64_t p = swa_period(c)) {
      w.set(a + "attention.sliding_window_pattern", u32(p));
    } else {
      std::vector<Value> flags;
      for (int64_t l = 0; l < c.n_layers; ++l) flags.push_back(Value::boolean(c.is_local(l)));
      w.set(a + "attention.sliding_window_pattern",
            Value::make_array(gguf::ValueType::BOOL, std::move(flags)));
    }
  }
  // Written when set, and for gemma2 always (its loader defaults them to 50 / 30 when absent).
  if (c.attn_softcap != 0.0f || c.architecture == "gemma2")
    w.set(a + "attn_logit_softcapping", Value::f32(c.attn_softcap));
  if (c.final_softcap != 0.0f || c.architecture == "gemma2")
    w.set(a + "final_logit_softcapping", Value::f32(c.final_softcap));
  // Granite's scalars (the Gemma ones are derived from the shape and not written).
  if (c.architecture == "granite") {
    w.set(a + "logit_scale", Value::f32(c.logit_scale));
    w.set(a + "residual_scale", Value::f32(c.residual_scale));
    w.set(a + "embedding_scale", Value::f32(c.embed_scale));
    w.set(a + "attention.scale", Value::f32(c.attn_scale));
  }
  if (c.attn_temp_scale != 0.0f)
    w.set(a + "attention.temperature_scale", Value::f32(c.attn_temp_scale));
}

// Standard tokenizer.ggml.* keys plus hinge.tokenizer.* extensions; see tokenizer/vocab_gguf.h.
void write_vocab_metadata(gguf::GgufWriter& w, const VocabSpec& v) { write_vocab_gguf(w, v); }

StatusOr<std::vector<uint8_t>> convert_rows(GgmlType from, const void* data, int64_t rows,
                                            int64_t cols, GgmlType to) {
  auto ft = ggml_type_traits(from), tt = ggml_type_traits(to);
  if (!ft || !tt) return Status::Error("convert: unknown tensor type");
  const size_t in_row = ggml_row_bytes(*ft, static_cast<uint64_t>(cols));
  const size_t out_row = ggml_row_bytes(*tt, static_cast<uint64_t>(cols));
  std::vector<uint8_t> out(out_row * static_cast<size_t>(rows));
  if (from == to) {
    std::memcpy(out.data(), data, out.size());
    return out;
  }
  std::vector<float> tmp(static_cast<size_t>(cols));
  for (int64_t r = 0; r < rows; ++r) {
    const auto* src = static_cast<const uint8_t*>(data) + r * in_row;
    if (!kernels::dequantize_row_ref(from, src, tmp.data(), cols))
      return Status::Errorf("convert: cannot read {} tensors", ft->name);
    if (!kernels::quantize_row_ref(to, tmp.data(), out.data() + r * out_row, cols))
      return Status::Errorf("convert: cannot write {} tensors", tt->name);
  }
  return out;
}

GgmlType fallback_matrix_type(GgmlType wanted, int64_t row_elems) {
  auto fits = [row_elems](GgmlType t) {
    auto tr = ggml_type_traits(t);
    return tr && row_elems % tr->block_elems == 0;
  };
  if (fits(wanted)) return wanted;
  GgmlType next = GgmlType::F16;
  if (wanted == GgmlType::Q4_K) next = GgmlType::Q4_0;
  if (wanted == GgmlType::Q5_K) next = GgmlType::Q8_0;
  if (wanted == GgmlType::Q6_K) next = GgmlType::Q8_0;
  return fits(next) ? next : GgmlType::F16;
}

namespace {

// Hugging Face rotate-half row order -> GGUF interleaved: within each head, new row 2i is old
// row i and new row 2i+1 is old row i + head_dim/2.
std::vector<uint8_t> permute_rope_rows(const kernels::MatrixView& m, int64_t n_heads,
                                       int64_t head_dim) {
  std::vector<uint8_t> out(m.row_bytes * static_cast<size_t>(m.rows));
  const auto* src = static_cast<const uint8_t*>(m.data);
  const int64_t half = head_dim / 2;
  for (int64_t h = 0; h < n_heads; ++h)
    for (int64_t i = 0; i < half; ++i)
      for (int64_t j = 0; j < 2; ++j) {
        const int64_t new_row = h * head_dim + 2 * i + j;
        const int64_t old_row = h * head_dim + j * half + i;
        std::memcpy(out.data() + new_row * m.row_bytes, src + old_row * m.row_bytes, m.row_bytes);
      }
  return out;
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

Status export_gguf(const LoadedModel& model, const std::string& out_path,
                   const ExportOptions& options) {
  gguf::GgufWriter w;
  write_model_metadata(w, model.config);
  write_vocab_metadata(w, model.vocab);
  const ModelConfig& c = model.config;
  // Q/K rows in Hugging Face's rotate-half order go to a family whose GGUF rotates interleaved
  // pairs (llama): permute them as convert_hf_to_gguf.py does.
  const kernels::RopeStyle file_style =
      c.family ? c.family->rope_style : kernels::RopeStyle::kInterleaved;
  const bool permute = c.rope.style != file_style;
  bool has_factors = false;
  for (const NamedTensor& t : model.tensors)
    has_factors |= t.name == "rope_freqs.weight" || t.name.rfind("rope_factors_", 0) == 0;
  if (!c.rope.freq_factors.empty() && !has_factors) {
    HINGE_RETURN_IF_ERROR(w.add_tensor("rope_freqs.weight", GgmlType::F32,
                                       {static_cast<uint64_t>(c.rope.freq_factors.size())},
                                       c.rope.freq_factors.data(),
                                       c.rope.freq_factors.size() * sizeof(float)));
  }
  for (const NamedTensor& t : model.tensors) {
    const kernels::MatrixView& m = t.view;
    std::vector<uint8_t> permuted;
    const void* data = m.data;
    if (permute && (ends_with(t.name, "attn_q.weight") || ends_with(t.name, "attn_k.weight"))) {
      const int64_t heads = ends_with(t.name, "attn_q.weight") ? c.n_heads : c.n_kv_heads;
      permuted = permute_rope_rows(m, heads, c.head_dim);
      data = permuted.data();
    } else if (permute && (ends_with(t.name, "attn_q.bias") || ends_with(t.name, "attn_k.bias"))) {
      // A bias is one row of per-output values: permute its elements as the rows above.
      const int64_t heads = ends_with(t.name, "attn_q.bias") ? c.n_heads : c.n_kv_heads;
      kernels::MatrixView col = m;
      col.rows = m.cols;
      col.cols = 1;
      col.row_bytes = m.row_bytes / static_cast<size_t>(m.cols);
      permuted = permute_rope_rows(col, heads, c.head_dim);
      data = permuted.data();
    }
    GgmlType to = m.type;
    const bool is_matrix = t.ne.size() == 2 && t.ne[1] > 1;
    if (is_matrix && options.matrix_type) {
      to = *options.matrix_type;
      if ((t.name == "output.weight" || (t.name == "token_embd.weight" && c.tied_output)) &&
          options.output_type)
        to = *options.output_type;
      const GgmlType wanted = to;
      to = fallback_matrix_type(wanted, m.cols);
      if (to != wanted && options.on_fallback) options.on_fallback({t.name, t.ne, wanted, to});
    }
    if (!is_matrix) to = GgmlType::F32;  // norms and other vectors stay f32
    HINGE_ASSIGN_OR_RETURN(auto bytes, convert_rows(m.type, data, m.rows, m.cols, to));
    HINGE_RETURN_IF_ERROR(w.add_tensor(t.name, to, t.ne, bytes.data(), bytes.size()));
  }
  return w.write(out_path);
}

}  // namespace hinge
