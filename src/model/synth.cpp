#include "model/synth.h"

#include <fmt/format.h>

#include "format/gguf.h"
#include "kernels/quant.h"
#include "model/family.h"
#include "model/gguf_export.h"
#include "tokenizer/tokenizer.h"

namespace hinge {
namespace {

ModelConfig make_config(int64_t layers, int64_t dim, int64_t ffn, int64_t heads, int64_t kv_heads,
                        int64_t vocab, int64_t ctx, float theta, const char* name) {
  ModelConfig c;
  c.name = name;
  c.n_layers = layers;
  c.dim = dim;
  c.ffn_dim = ffn;
  c.n_heads = heads;
  c.n_kv_heads = kv_heads;
  c.head_dim = dim / heads;
  c.n_vocab = vocab;
  c.context_length = ctx;
  c.family = find_family_by_arch("llama");
  c.rope.theta = theta;
  c.rope.n_rot = c.head_dim;
  c.rope_local = c.rope;
  c.layer_kind.assign(static_cast<size_t>(layers), LayerKind::kAttention);
  c.rms_eps = 1e-5f;
  return c;
}

uint64_t splitmix64(uint64_t& s) {
  uint64_t z = (s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// A SentencePiece-style vocabulary: <unk> <s> </s>, the 256 byte tokens, then unique pieces.
VocabSpec synth_vocab(int64_t n_vocab) {
  VocabSpec v;
  v.model = "llama";
  v.tokens = {"<unk>", "<s>", "</s>"};
  v.token_types = {2, 3, 3};
  for (int b = 0; b < 256; ++b) {
    v.tokens.push_back(fmt::format("<0x{:02X}>", b));
    v.token_types.push_back(6);
  }
  for (int64_t i = static_cast<int64_t>(v.tokens.size()); i < n_vocab; ++i) {
    std::string piece = "\xE2\x96\x81";  // U+2581, SentencePiece's word boundary
    int64_t k = i;
    do {
      piece += static_cast<char>('a' + k % 26);
      k /= 26;
    } while (k > 0);
    v.tokens.push_back(piece);
    v.token_types.push_back(1);
  }
  v.tokens.resize(static_cast<size_t>(n_vocab));
  v.token_types.resize(static_cast<size_t>(n_vocab));
  v.scores.resize(static_cast<size_t>(n_vocab));
  for (int64_t i = 0; i < n_vocab; ++i) v.scores[static_cast<size_t>(i)] = -static_cast<float>(i);
  v.bos = 1;
  v.eos = 2;
  v.unk = 0;
  v.add_bos = true;
  return v;
}

// Random rows, quantized in parallel; each row has its own seed, so the output does not depend
// on the thread count.
std::vector<uint8_t> random_matrix(int64_t rows, int64_t cols, GgmlType type, uint64_t seed,
                                   ThreadPool& pool) {
  const auto tr = *ggml_type_traits(type);
  const size_t row_bytes = ggml_row_bytes(tr, static_cast<uint64_t>(cols));
  std::vector<uint8_t> out(row_bytes * static_cast<size_t>(rows));
  pool.run([&](int tid, int nt) {
    std::vector<float> row(static_cast<size_t>(cols));
    for (int64_t r = tid; r < rows; r += nt) {
      uint64_t s = seed * 0x100000001B3ull + static_cast<uint64_t>(r);
      for (int64_t c = 0; c < cols; ++c) {
        // Irwin-Hall(4): approximately normal, mean 0, sd 0.02.
        const uint64_t z = splitmix64(s);
        float sum = 0;
        for (int k = 0; k < 4; ++k) sum += static_cast<float>((z >> (16 * k)) & 0xFFFF) / 65535.0f;
        row[static_cast<size_t>(c)] = (sum - 2.0f) * 0.0346f;
      }
      kernels::quantize_row_ref(type, row.data(), out.data() + r * row_bytes, cols);
    }
  });
  return out;
}

}  // namespace

const std::vector<SynthPreset>& synth_presets() {
  static const std::vector<SynthPreset> kPresets = {
      {"smollm-135m", "SmolLM-135M shape: 30 layers, dim 576, ffn 1536, 9/3 heads, vocab 49152, tied",
       make_config(30, 576, 1536, 9, 3, 49152, 2048, 10000.0f, "synth-smollm-135m")},
      {"llama-1b", "Llama-1B shape: 16 layers, dim 2048, ffn 8192, 32/8 heads, vocab 32000",
       make_config(16, 2048, 8192, 32, 8, 32000, 2048, 10000.0f, "synth-llama-1b")},
      {"vocab-128k", "Llama 3 vocabulary on a small body: 8 layers, dim 576, ffn 1536, 9/3 heads, "
                     "vocab 128256, tied (sampling and the output matrix dominate)",
       make_config(8, 576, 1536, 9, 3, 128256, 2048, 500000.0f, "synth-vocab-128k")},
      {"tiny", "Test shape: 2 layers, dim 256, ffn 512, 8/4 heads, vocab 512",
       make_config(2, 256, 512, 8, 4, 512, 512, 10000.0f, "synth-tiny")},
  };
  return kPresets;
}

const SynthPreset* find_synth_preset(const std::string& name) {
  for (const auto& p : synth_presets())
    if (p.name == name) return &p;
  return nullptr;
}

Status write_synth_model(const SynthPreset& preset, GgmlType type, uint64_t seed,
                         const std::string& path, ThreadPool& pool) {
  const ModelConfig& c = preset.config;
  const bool tied = preset.name == "smollm-135m" || preset.name == "vocab-128k";
  gguf::GgufWriter w;
  write_model_metadata(w, c);
  write_vocab_metadata(w, synth_vocab(c.n_vocab));
  const GgmlType out_type = type == GgmlType::Q4_K ? GgmlType::Q6_K : type;
  uint64_t tensor_seed = seed;
  auto add_matrix = [&](const std::string& name, int64_t rows, int64_t cols, GgmlType t) {
    auto bytes = random_matrix(rows, cols, t, ++tensor_seed, pool);
    return w.add_tensor(name, t, {static_cast<uint64_t>(cols), static_cast<uint64_t>(rows)},
                        bytes.data(), bytes.size());
  };
  const std::vector<float> ones(static_cast<size_t>(c.dim), 1.0f);
  auto add_norm = [&](const std::string& name) {
    return w.add_tensor(name, GgmlType::F32, {static_cast<uint64_t>(c.dim)}, ones.data(),
                        ones.size() * sizeof(float));
  };
  HINGE_RETURN_IF_ERROR(add_matrix("token_embd.weight", c.n_vocab, c.dim, tied ? out_type : type));
  for (int64_t l = 0; l < c.n_layers; ++l) {
    const std::string p = fmt::format("blk.{}.", l);
    HINGE_RETURN_IF_ERROR(add_norm(p + "attn_norm.weight"));
    HINGE_RETURN_IF_ERROR(add_matrix(p + "attn_q.weight", c.q_dim(), c.dim, type));
    HINGE_RETURN_IF_ERROR(add_matrix(p + "attn_k.weight", c.kv_dim(), c.dim, type));
    HINGE_RETURN_IF_ERROR(add_matrix(p + "attn_v.weight", c.kv_dim(), c.dim, type));
    HINGE_RETURN_IF_ERROR(add_matrix(p + "attn_output.weight", c.dim, c.q_dim(), type));
    HINGE_RETURN_IF_ERROR(add_norm(p + "ffn_norm.weight"));
    HINGE_RETURN_IF_ERROR(add_matrix(p + "ffn_gate.weight", c.ffn_dim, c.dim, type));
    HINGE_RETURN_IF_ERROR(add_matrix(p + "ffn_up.weight", c.ffn_dim, c.dim, type));
    HINGE_RETURN_IF_ERROR(add_matrix(p + "ffn_down.weight", c.dim, c.ffn_dim, type));
  }
  HINGE_RETURN_IF_ERROR(add_norm("output_norm.weight"));
  if (!tied) HINGE_RETURN_IF_ERROR(add_matrix("output.weight", c.n_vocab, c.dim, out_type));
  return w.write(path);
}

}  // namespace hinge
