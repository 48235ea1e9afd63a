#include "model/transplant.h"

#include <cmath>
#include <cstring>

#include <fmt/format.h>

#include "format/gguf.h"
#include "model/gguf_export.h"
#include "model/synth.h"

namespace hinge {
namespace {

int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

// A rows x cols f32 matrix (row-major: rows = output features).
struct Mat {
  int64_t rows = 0, cols = 0;
  std::vector<float> v;
  float& at(int64_t r, int64_t c) { return v[static_cast<size_t>(r * cols + c)]; }
  float at(int64_t r, int64_t c) const { return v[static_cast<size_t>(r * cols + c)]; }
};

StatusOr<Mat> source_tensor(const LoadedModel& m, const std::string& name) {
  for (const NamedTensor& t : m.tensors) {
    if (t.name != name) continue;
    HINGE_ASSIGN_OR_RETURN(auto bytes, convert_rows(t.view.type, t.view.data, t.view.rows,
                                                    t.view.cols, GgmlType::F32));
    Mat out{t.view.rows, t.view.cols, std::vector<float>(bytes.size() / sizeof(float))};
    std::memcpy(out.v.data(), bytes.data(), bytes.size());
    return out;
  }
  return Status::Errorf("{}: no tensor {}", m.path, name);
}

// `a` in the top-left corner of a rows x cols zero matrix, times `scale`.
Mat widen(const Mat& a, int64_t rows, int64_t cols, float scale = 1.0f) {
  Mat out{rows, cols, std::vector<float>(static_cast<size_t>(rows * cols), 0.0f)};
  for (int64_t r = 0; r < a.rows; ++r)
    for (int64_t c = 0; c < a.cols; ++c) out.at(r, c) = a.at(r, c) * scale;
  return out;
}

// Interleaved-pair rows (GGUF llama) to rotate-half order within each head of head_dim rows.
Mat to_rotate_half(const Mat& a, int64_t head_dim) {
  Mat out = a;
  const int64_t half = head_dim / 2;
  for (int64_t h = 0; h < a.rows / head_dim; ++h)
    for (int64_t j = 0; j < half; ++j)
      for (int64_t c = 0; c < a.cols; ++c) {
        out.at(h * head_dim + j, c) = a.at(h * head_dim + 2 * j, c);
        out.at(h * head_dim + half + j, c) = a.at(h * head_dim + 2 * j + 1, c);
      }
  return out;
}

Mat stack(std::initializer_list<const Mat*> parts) {
  Mat out{0, (*parts.begin())->cols, {}};
  for (const Mat* p : parts) {
    out.rows += p->rows;
    out.v.insert(out.v.end(), p->v.begin(), p->v.end());
  }
  return out;
}

}  // namespace

const std::vector<std::string>& transplant_families() {
  static const std::vector<std::string> kFamilies = {"llama", "qwen2", "phi3", "granite",
                                                     "mistral3"};
  return kFamilies;
}

Status write_transplanted_model(const LoadedModel& source, const std::string& family,
                                GgmlType type, const std::string& path, int64_t min_width) {
  const ModelConfig& s = source.config;
  bool known = false;
  for (const std::string& f : transplant_families()) known = known || f == family;
  if (!known)
    return Status::Errorf("cannot transplant into '{}' without changing the function (families: "
                          "llama, qwen2, phi3, granite, mistral3)", family);
  bool extra_tensors = false;  // biases, one-element scales
  for (const NamedTensor& t : source.tensors)
    extra_tensors = extra_tensors || t.name.ends_with(".bias") || t.name.ends_with(".scale");
  const char* why = s.architecture != "llama"                            ? "architecture"
                    : extra_tensors                                      ? "biases or scales"
                    : s.qk_norm != QkNorm::kNone                         ? "Q/K norms"
                    : !s.pre_norms || s.post_norms                       ? "norm placement"
                    : s.activation != Activation::kSilu                  ? "activation"
                    : s.rope.style != kernels::RopeStyle::kInterleaved   ? "RoPE style"
                    : (s.rope.n_rot != 0 && s.rope.n_rot != s.head_dim)  ? "partial rotary"
                    : !s.rope.freq_factors.empty() || s.rope.freq_scale != 1.0f ? "RoPE scaling"
                    : s.n_kv_heads <= 0 || s.n_heads % s.n_kv_heads != 0 ? "head counts"
                                                                         : nullptr;
  if (why)
    return Status::Errorf("{}: not a plain llama model ({}); transplant needs one", source.path,
                          why);
  const int64_t d = s.head_dim, group = s.n_heads / s.n_kv_heads;
  const int64_t dim = round_up(std::max(s.dim, min_width), 256);
  // Attention output rows of a multiple of 256 values, whole KV groups.
  int64_t heads = s.n_heads;
  while ((heads * d) % 256 != 0 || heads % group != 0) ++heads;
  const int64_t kv_heads = heads / group;
  const int64_t ffn = round_up(min_width > 0 ? s.ffn_dim * dim / s.dim : s.ffn_dim, 256);
  const float norm_scale = std::sqrt(static_cast<float>(s.dim) / static_cast<float>(dim));
  const float eps = s.rms_eps * static_cast<float>(s.dim) / static_cast<float>(dim);
  Metadata extra;
  if (family == "granite") {
    extra.emplace_back("granite.embedding_scale", gguf::Value::f32(1.0f));
    extra.emplace_back("granite.residual_scale", gguf::Value::f32(1.0f));
    extra.emplace_back("granite.logit_scale", gguf::Value::f32(1.0f));
    extra.emplace_back("granite.attention.scale",
                       gguf::Value::f32(1.0f / std::sqrt(static_cast<float>(d))));
  }
  const std::string name = fmt::format("{} as {}", s.name.empty() ? "model" : s.name, family);
  const ModelConfig c = synth_config({family.c_str(), s.n_layers, dim, ffn, heads, kv_heads, d,
                                      s.n_vocab, s.context_length, s.rope.theta, eps, extra},
                                     name.c_str());
  const bool neox = c.rope.style != kernels::RopeStyle::kInterleaved;
  // Q4_K_M / Q5_K_M files keep the output matrix in Q6_K.
  const GgmlType out_type =
      type == GgmlType::Q4_K || type == GgmlType::Q5_K ? GgmlType::Q6_K : type;

  gguf::GgufWriter w;
  write_model_metadata(w, c);
  VocabSpec vocab = source.vocab;
  if (family == "phi3" && vocab.tokens.size() > 3) {  // llama.cpp looks this token up in Phi-3
    vocab.tokens.back() = "<|endoftext|>";
    if (!vocab.token_types.empty()) vocab.token_types.back() = 3;
  }
  write_vocab_metadata(w, vocab);
  auto add = [&](const std::string& tname, const Mat& m, GgmlType t) -> Status {
    const bool vector = m.rows == 1;
    const GgmlType to = vector ? GgmlType::F32 : t;
    HINGE_ASSIGN_OR_RETURN(auto bytes, convert_rows(GgmlType::F32, m.v.data(), m.rows, m.cols, to));
    std::vector<uint64_t> ne = {static_cast<uint64_t>(m.cols)};
    if (!vector) ne.push_back(static_cast<uint64_t>(m.rows));
    return w.add_tensor(tname, to, ne, bytes.data(), bytes.size());
  };
  auto norm = [&](const std::string& tname) -> StatusOr<Mat> {
    HINGE_ASSIGN_OR_RETURN(Mat n, source_tensor(source, tname));
    n.cols = n.rows * n.cols;
    n.rows = 1;
    return widen(n, 1, dim, norm_scale);
  };
  auto zeros = [](int64_t n) { return Mat{1, n, std::vector<float>(static_cast<size_t>(n), 0.0f)}; };

  HINGE_ASSIGN_OR_RETURN(Mat embd, source_tensor(source, "token_embd.weight"));
  HINGE_RETURN_IF_ERROR(add("token_embd.weight", widen(embd, s.n_vocab, dim),
                            s.tied_output ? out_type : type));
  for (int64_t l = 0; l < s.n_layers; ++l) {
    const std::string p = fmt::format("blk.{}.", l);
    HINGE_ASSIGN_OR_RETURN(Mat attn_norm, norm(p + "attn_norm.weight"));
    HINGE_RETURN_IF_ERROR(add(p + "attn_norm.weight", attn_norm, type));
    HINGE_ASSIGN_OR_RETURN(Mat q, source_tensor(source, p + "attn_q.weight"));
    HINGE_ASSIGN_OR_RETURN(Mat k, source_tensor(source, p + "attn_k.weight"));
    HINGE_ASSIGN_OR_RETURN(Mat v, source_tensor(source, p + "attn_v.weight"));
    q = widen(q, heads * d, dim);
    k = widen(k, kv_heads * d, dim);
    v = widen(v, kv_heads * d, dim);
    if (neox) {
      q = to_rotate_half(q, d);
      k = to_rotate_half(k, d);
    }
    if (family == "phi3") {
      HINGE_RETURN_IF_ERROR(add(p + "attn_qkv.weight", stack({&q, &k, &v}), type));
    } else {
      HINGE_RETURN_IF_ERROR(add(p + "attn_q.weight", q, type));
      HINGE_RETURN_IF_ERROR(add(p + "attn_k.weight", k, type));
      HINGE_RETURN_IF_ERROR(add(p + "attn_v.weight", v, type));
    }
    if (family == "qwen2") {
      HINGE_RETURN_IF_ERROR(add(p + "attn_q.bias", zeros(heads * d), type));
      HINGE_RETURN_IF_ERROR(add(p + "attn_k.bias", zeros(kv_heads * d), type));
      HINGE_RETURN_IF_ERROR(add(p + "attn_v.bias", zeros(kv_heads * d), type));
    }
    HINGE_ASSIGN_OR_RETURN(Mat o, source_tensor(source, p + "attn_output.weight"));
    HINGE_RETURN_IF_ERROR(add(p + "attn_output.weight", widen(o, dim, heads * d), type));
    HINGE_ASSIGN_OR_RETURN(Mat ffn_norm, norm(p + "ffn_norm.weight"));
    HINGE_RETURN_IF_ERROR(add(p + "ffn_norm.weight", ffn_norm, type));
    HINGE_ASSIGN_OR_RETURN(Mat gate, source_tensor(source, p + "ffn_gate.weight"));
    HINGE_ASSIGN_OR_RETURN(Mat up, source_tensor(source, p + "ffn_up.weight"));
    gate = widen(gate, ffn, dim);
    up = widen(up, ffn, dim);
    if (family == "phi3") {
      HINGE_RETURN_IF_ERROR(add(p + "ffn_up.weight", stack({&gate, &up}), type));
    } else {
      HINGE_RETURN_IF_ERROR(add(p + "ffn_gate.weight", gate, type));
      HINGE_RETURN_IF_ERROR(add(p + "ffn_up.weight", up, type));
    }
    HINGE_ASSIGN_OR_RETURN(Mat down, source_tensor(source, p + "ffn_down.weight"));
    HINGE_RETURN_IF_ERROR(add(p + "ffn_down.weight", widen(down, dim, ffn), type));
  }
  HINGE_ASSIGN_OR_RETURN(Mat out_norm, norm("output_norm.weight"));
  HINGE_RETURN_IF_ERROR(add("output_norm.weight", out_norm, type));
  if (!s.tied_output) {
    HINGE_ASSIGN_OR_RETURN(Mat out, source_tensor(source, "output.weight"));
    HINGE_RETURN_IF_ERROR(add("output.weight", widen(out, s.n_vocab, dim), out_type));
  }
  return w.write(path);
}

}  // namespace hinge
