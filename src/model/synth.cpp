#include "model/synth.h"

#include <fmt/format.h>

#include "common/status.h"
#include "format/gguf.h"
#include "kernels/quant.h"
#include "model/family.h"
#include "model/gguf_export.h"
#include "tokenizer/tokenizer.h"

namespace hinge {

ModelConfig synth_config(const SynthShape& sh, const char* name) {
  const std::string a = std::string(sh.arch) + ".";
  Metadata md = sh.extra;
  auto u32 = [](int64_t v) { return gguf::Value::u32(static_cast<uint32_t>(v)); };
  md.emplace_back(a + "block_count", u32(sh.layers));
  md.emplace_back(a + "embedding_length", u32(sh.dim));
  md.emplace_back(a + "feed_forward_length", u32(sh.ffn));
  md.emplace_back(a + "attention.head_count", u32(sh.heads));
  md.emplace_back(a + "attention.head_count_kv", u32(sh.kv_heads));
  md.emplace_back(a + "attention.key_length", u32(sh.head_dim));
  md.emplace_back(a + "attention.value_length", u32(sh.head_dim));
  md.emplace_back(a + "context_length", u32(sh.ctx));
  md.emplace_back(a + "vocab_size", u32(sh.vocab));
  md.emplace_back(a + "rope.freq_base", gguf::Value::f32(sh.theta));
  md.emplace_back(a + "attention.layer_norm_rms_epsilon", gguf::Value::f32(sh.eps));
  ModelConfig c;
  c.family = find_family_by_arch(sh.arch);
  HINGE_CHECK_MSG(c.family != nullptr, "synth preset of unknown architecture {}", sh.arch);
  const HparamReader hp(md, sh.arch, name);
  HINGE_CHECK(load_common_hparams(hp, c).ok());
  HINGE_CHECK(c.family->load_hparams(hp, c).ok());
  c.name = name;
  c.n_vocab = sh.vocab;
  HINGE_CHECK_MSG(c.validate(name).ok(), "synth preset {}", name);
  return c;
}

namespace {

ModelConfig config_for(const SynthShape& sh, const char* name) { return synth_config(sh, name); }

ModelConfig make_config(int64_t layers, int64_t dim, int64_t ffn, int64_t heads, int64_t kv_heads,
                        int64_t vocab, int64_t ctx, float theta, const char* name) {
  return config_for({"llama", layers, dim, ffn, heads, kv_heads, dim / heads, vocab, ctx, theta,
                     1e-5f, {}}, name);
}

gguf::Value f32v(float v) { return gguf::Value::f32(v); }
gguf::Value u32v(uint32_t v) { return gguf::Value::u32(v); }

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
  // Real shapes (benchmarks) and tiny-<family> test shapes (parity tests: every recipe feature of
  // the family, small enough to commit llama.cpp's logits for them).
  static const std::vector<SynthPreset> kPresets = {
      {"smollm-135m", "SmolLM-135M shape: 30 layers, dim 576, ffn 1536, 9/3 heads, vocab 49152, tied",
       make_config(30, 576, 1536, 9, 3, 49152, 2048, 10000.0f, "synth-smollm-135m"), true},
      {"llama-1b", "Llama-1B shape: 16 layers, dim 2048, ffn 8192, 32/8 heads, vocab 32000",
       make_config(16, 2048, 8192, 32, 8, 32000, 2048, 10000.0f, "synth-llama-1b"), false},
      {"vocab-128k", "Llama 3 vocabulary on a small body: 8 layers, dim 576, ffn 1536, 9/3 heads, "
                     "vocab 128256, tied (sampling and the output matrix dominate)",
       make_config(8, 576, 1536, 9, 3, 128256, 2048, 500000.0f, "synth-vocab-128k"), true},
      {"tiny", "Test shape: 2 layers, dim 256, ffn 512, 8/4 heads, vocab 512",
       make_config(2, 256, 512, 8, 4, 512, 512, 10000.0f, "synth-tiny"), false},
      {"qwen2.5-0.5b", "Qwen2.5-0.5B shape (qwen2): 24 layers, dim 896, ffn 4864, 14/2 heads of 64, "
                       "Q/K/V biases, vocab 151936, tied",
       config_for({"qwen2", 24, 896, 4864, 14, 2, 64, 151936, 32768, 1e6f, 1e-6f, {}},
                  "synth-qwen2.5-0.5b"), true, true},
      {"qwen3-0.6b", "Qwen3-0.6B shape (qwen3): 28 layers, dim 1024, ffn 3072, 16/8 heads of 128, "
                     "Q/K norms, vocab 151936, tied",
       config_for({"qwen3", 28, 1024, 3072, 16, 8, 128, 151936, 40960, 1e6f, 1e-6f, {}},
                  "synth-qwen3-0.6b"), true},
      {"gemma3-1b", "Gemma-3-1B shape (gemma3): 26 layers, dim 1152, ffn 6912, 4/1 heads of 256, "
                    "5 local (window 512) : 1 global, vocab 262144, tied",
       config_for({"gemma3", 26, 1152, 6912, 4, 1, 256, 262144, 32768, 1e6f, 1e-6f,
                   {{"gemma3.attention.sliding_window", u32v(512)},
                    {"gemma3.rope.freq_base_swa", f32v(10000.0f)}}},
                  "synth-gemma3-1b"), true},
      {"gemma2-2b", "Gemma-2-2B shape (gemma2): 26 layers, dim 2304, ffn 9216, 8/4 heads of 256, "
                    "alternating window 4096, soft-capping 50/30, vocab 256000, tied",
       config_for({"gemma2", 26, 2304, 9216, 8, 4, 256, 256000, 8192, 10000.0f, 1e-6f,
                   {{"gemma2.attention.sliding_window", u32v(4096)},
                    {"gemma2.attn_logit_softcapping", f32v(50.0f)},
                    {"gemma2.final_logit_softcapping", f32v(30.0f)}}},
                  "synth-gemma2-2b"), true},
      {"phi3-mini", "Phi-3-mini shape (phi3): 32 layers, dim 3072, ffn 8192, 32/32 heads of 96, "
                    "fused QKV and gate/up, vocab 32064",
       config_for({"phi3", 32, 3072, 8192, 32, 32, 96, 32064, 4096, 10000.0f, 1e-5f, {}},
                  "synth-phi3-mini"), false},
      // Test shapes: 4 layers, dim 256, 4/2 heads of 64 (qwen3: 128, n_heads x head_dim != dim).
      {"tiny-llama", "Test shape (llama): 4 layers, dim 256, 4/2 heads, vocab 320",
       config_for({"llama", 4, 256, 512, 4, 2, 64, 320, 512, 10000.0f, 1e-5f, {}}, "tiny-llama"),
       false, false, true},
      {"tiny-qwen2", "Test shape (qwen2): 4 layers, dim 256, 4/2 heads, Q/K/V biases, vocab 320, tied",
       config_for({"qwen2", 4, 256, 512, 4, 2, 64, 320, 512, 1e6f, 1e-6f, {}}, "tiny-qwen2"),
       true, true, true},
      {"tiny-qwen3", "Test shape (qwen3): 4 layers, dim 256, 4/2 heads of 128, Q/K norms, vocab 320",
       config_for({"qwen3", 4, 256, 512, 4, 2, 128, 320, 512, 1e6f, 1e-6f, {}}, "tiny-qwen3"),
       false, false, true},
      {"tiny-gemma2", "Test shape (gemma2): 4 layers, dim 256, 4/2 heads, window 16 alternating, "
                      "soft-capping, vocab 320, tied",
       config_for({"gemma2", 4, 256, 512, 4, 2, 64, 320, 512, 10000.0f, 1e-6f,
                   {{"gemma2.attention.sliding_window", u32v(16)},
                    {"gemma2.attn_logit_softcapping", f32v(50.0f)},
                    {"gemma2.final_logit_softcapping", f32v(30.0f)}}},
                  "tiny-gemma2"), true, false, true},
      {"tiny-gemma3", "Test shape (gemma3): 6 layers, dim 256, 4/2 heads, window 16 (5 local : 1 "
                      "global), Q/K norms, vocab 320, tied",
       config_for({"gemma3", 6, 256, 512, 4, 2, 64, 320, 512, 1e6f, 1e-6f,
                   {{"gemma3.attention.sliding_window", u32v(16)},
                    {"gemma3.rope.freq_base_swa", f32v(10000.0f)}}},
                  "tiny-gemma3"), true, false, true},
      {"tiny-phi3", "Test shape (phi3): 4 layers, dim 256, 4/4 heads, fused QKV and gate/up, vocab 320",
       config_for({"phi3", 4, 256, 512, 4, 4, 64, 320, 512, 10000.0f, 1e-5f, {}}, "tiny-phi3"),
       false, false, true},
      {"tiny-granite", "Test shape (granite): 4 layers, dim 256, 4/2 heads, embedding/residual/"
                       "attention/logit scales, vocab 320",
       config_for({"granite", 4, 256, 512, 4, 2, 64, 320, 512, 10000.0f, 1e-5f,
                   {{"granite.logit_scale", f32v(4.0f)},
                    {"granite.residual_scale", f32v(0.22f)},
                    {"granite.embedding_scale", f32v(12.0f)},
                    {"granite.attention.scale", f32v(0.0078125f)}}},
                  "tiny-granite"), false, false, true},
      {"tiny-olmo2", "Test shape (olmo2): 4 layers, dim 256, 4/2 heads, post-norms, whole-projection "
                     "Q/K norms, vocab 320",
       config_for({"olmo2", 4, 256, 512, 4, 2, 64, 320, 512, 500000.0f, 1e-6f, {}}, "tiny-olmo2"),
       false, false, true},
      {"tiny-mistral3", "Test shape (mistral3): 4 layers, dim 256, 4/2 heads, YaRN x4, attention "
                        "temperature, vocab 320",
       config_for({"mistral3", 4, 256, 512, 4, 2, 64, 320, 512, 1e6f, 1e-5f,
                   {{"mistral3.rope.scaling.type", gguf::Value::str("yarn")},
                    {"mistral3.rope.scaling.factor", f32v(4.0f)},
                    {"mistral3.rope.scaling.original_context_length", u32v(64)},
                    {"mistral3.rope.scaling.yarn_beta_fast", f32v(32.0f)},
                    {"mistral3.rope.scaling.yarn_beta_slow", f32v(1.0f)},
                    {"mistral3.attention.temperature_scale", f32v(0.1f)}}},
                  "tiny-mistral3"), false, false, true},
  };
  return kPresets;
}

const SynthPreset* find_synth_preset(const std::string& name) {
  for (const auto& p : synth_presets())
    if (p.name == name) return &p;
  return nullptr;
}

Status write_synth_model(const SynthPreset& preset, GgmlType type, uint64_t seed,
                         const std::string& path, ThreadPool& pool, int64_t layers) {
  ModelConfig c = preset.config;
  if (layers > 0) {
    if (layers > c.n_layers)
      return Status::Errorf("--layers {}: the preset has {} layers", layers, c.n_layers);
    c.n_layers = layers;
    if (!c.layer_local.empty()) c.layer_local.resize(static_cast<size_t>(layers));
    c.layer_kind.resize(static_cast<size_t>(layers));
  }
  const bool tied = preset.tied;
  gguf::GgufWriter w;
  write_model_metadata(w, c);
  VocabSpec vocab = synth_vocab(c.n_vocab);
  if (c.architecture == "phi3") {  // llama.cpp's loader looks this token up in Phi-3 files
    vocab.tokens.back() = "<|endoftext|>";
    vocab.token_types.back() = 3;
  }
  write_vocab_metadata(w, vocab);
  // Q4_K_M / Q5_K_M files keep the output matrix in Q6_K.
  const GgmlType out_type =
      type == GgmlType::Q4_K || type == GgmlType::Q5_K ? GgmlType::Q6_K : type;
  uint64_t tensor_seed = seed;
  auto add_matrix = [&](const std::string& name, int64_t rows, int64_t cols, GgmlType t) {
    auto bytes = random_matrix(rows, cols, t, ++tensor_seed, pool);
    return w.add_tensor(name, t, {static_cast<uint64_t>(cols), static_cast<uint64_t>(rows)},
                        bytes.data(), bytes.size());
  };
  // Norms: ones for the benchmark presets, 1 +- 0.25 noise for the test ones (a norm applied
  // to the wrong values must show); biases ~ +-0.1.
  auto add_vector = [&](const std::string& name, int64_t n, float center, float spread) {
    std::vector<float> v(static_cast<size_t>(n), center);
    if (preset.random_norms || center == 0.0f) {
      uint64_t s = ++tensor_seed * 0x9E3779B97F4A7C15ull;
      for (float& x : v) x = center + spread * (static_cast<float>(splitmix64(s) >> 40) / 8388608.0f - 1.0f);
    }
    return w.add_tensor(name, GgmlType::F32, {static_cast<uint64_t>(n)}, v.data(), v.size() * sizeof(float));
  };
  auto add_norm = [&](const std::string& name, int64_t n) { return add_vector(name, n, 1.0f, 0.25f); };
  const int64_t q_dim = c.q_dim(), kv_dim = c.kv_dim();
  HINGE_RETURN_IF_ERROR(add_matrix("token_embd.weight", c.n_vocab, c.dim, tied ? out_type : type));
  for (int64_t l = 0; l < c.n_layers; ++l) {
    const std::string p = fmt::format("blk.{}.", l);
    if (c.pre_norms) HINGE_RETURN_IF_ERROR(add_norm(p + "attn_norm.weight", c.dim));
    if (c.fused_gate_up) {  // phi3 files fuse Q/K/V too
      HINGE_RETURN_IF_ERROR(add_matrix(p + "attn_qkv.weight", q_dim + 2 * kv_dim, c.dim, type));
    } else {
      HINGE_RETURN_IF_ERROR(add_matrix(p + "attn_q.weight", q_dim, c.dim, type));
      HINGE_RETURN_IF_ERROR(add_matrix(p + "attn_k.weight", kv_dim, c.dim, type));
      HINGE_RETURN_IF_ERROR(add_matrix(p + "attn_v.weight", kv_dim, c.dim, type));
    }
    if (preset.qkv_bias) {
      HINGE_RETURN_IF_ERROR(add_vector(p + "attn_q.bias", q_dim, 0.0f, 0.1f));
      HINGE_RETURN_IF_ERROR(add_vector(p + "attn_k.bias", kv_dim, 0.0f, 0.1f));
      HINGE_RETURN_IF_ERROR(add_vector(p + "attn_v.bias", kv_dim, 0.0f, 0.1f));
    }
    HINGE_RETURN_IF_ERROR(add_matrix(p + "attn_output.weight", c.dim, q_dim, type));
    if (c.qk_norm != QkNorm::kNone) {
      const bool full = c.qk_norm == QkNorm::kFull;
      HINGE_RETURN_IF_ERROR(add_norm(p + "attn_q_norm.weight", full ? q_dim : c.head_dim));
      HINGE_RETURN_IF_ERROR(add_norm(p + "attn_k_norm.weight", full ? kv_dim : c.head_dim));
    }
    if (c.post_norms) {
      HINGE_RETURN_IF_ERROR(add_norm(p + "post_attention_norm.weight", c.dim));
      HINGE_RETURN_IF_ERROR(add_norm(p + "post_ffw_norm.weight", c.dim));
    }
    if (c.pre_norms) HINGE_RETURN_IF_ERROR(add_norm(p + "ffn_norm.weight", c.dim));
    if (c.fused_gate_up) {
      HINGE_RETURN_IF_ERROR(add_matrix(p + "ffn_up.weight", 2 * c.ffn_dim, c.dim, type));
    } else {
      HINGE_RETURN_IF_ERROR(add_matrix(p + "ffn_gate.weight", c.ffn_dim, c.dim, type));
      HINGE_RETURN_IF_ERROR(add_matrix(p + "ffn_up.weight", c.ffn_dim, c.dim, type));
    }
    HINGE_RETURN_IF_ERROR(add_matrix(p + "ffn_down.weight", c.dim, c.ffn_dim, type));
  }
  HINGE_RETURN_IF_ERROR(add_norm("output_norm.weight", c.dim));
  if (!tied) HINGE_RETURN_IF_ERROR(add_matrix("output.weight", c.n_vocab, c.dim, out_type));
  return w.write(path);
}

}  // namespace hinge
