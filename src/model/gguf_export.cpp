#include "model/gguf_export.h"

#include <cstring>

#include "kernels/quant.h"
#include "tokenizer/vocab_gguf.h"

namespace hinge {

void write_llama_metadata(gguf::GgufWriter& w, const LlamaConfig& c) {
  using gguf::Value;
  w.set("general.architecture", Value::str("llama"));
  w.set("general.name", Value::str(c.name.empty() ? "hinge" : c.name));
  w.set("general.alignment", Value::u32(32));
  w.set("llama.vocab_size", Value::u32(static_cast<uint32_t>(c.n_vocab)));
  w.set("llama.context_length", Value::u32(static_cast<uint32_t>(c.context_length)));
  w.set("llama.embedding_length", Value::u32(static_cast<uint32_t>(c.dim)));
  w.set("llama.block_count", Value::u32(static_cast<uint32_t>(c.n_layers)));
  w.set("llama.feed_forward_length", Value::u32(static_cast<uint32_t>(c.ffn_dim)));
  w.set("llama.attention.head_count", Value::u32(static_cast<uint32_t>(c.n_heads)));
  w.set("llama.attention.head_count_kv", Value::u32(static_cast<uint32_t>(c.n_kv_heads)));
  w.set("llama.rope.dimension_count", Value::u32(static_cast<uint32_t>(c.head_dim)));
  if (c.head_dim != c.dim / c.n_heads) {
    w.set("llama.attention.key_length", Value::u32(static_cast<uint32_t>(c.head_dim)));
    w.set("llama.attention.value_length", Value::u32(static_cast<uint32_t>(c.head_dim)));
  }
  w.set("llama.rope.freq_base", Value::f32(c.rope_theta));
  w.set("llama.attention.layer_norm_rms_epsilon", Value::f32(c.rms_eps));
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
  write_llama_metadata(w, model.config);
  write_vocab_metadata(w, model.vocab);
  const LlamaConfig& c = model.config;
  const bool permute = c.rope_style == kernels::RopeStyle::kNeox;
  if (!c.rope_freq_factors.empty()) {
    HINGE_RETURN_IF_ERROR(w.add_tensor("rope_freqs.weight", GgmlType::F32,
                                       {static_cast<uint64_t>(c.rope_freq_factors.size())},
                                       c.rope_freq_factors.data(),
                                       c.rope_freq_factors.size() * sizeof(float)));
  }
  for (const NamedTensor& t : model.tensors) {
    const kernels::MatrixView& m = t.view;
    std::vector<uint8_t> permuted;
    const void* data = m.data;
    if (permute && (ends_with(t.name, "attn_q.weight") || ends_with(t.name, "attn_k.weight"))) {
      const int64_t heads = ends_with(t.name, "attn_q.weight") ? c.n_heads : c.n_kv_heads;
      permuted = permute_rope_rows(m, heads, c.head_dim);
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
