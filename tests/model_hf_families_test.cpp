// Hugging Face directories (issue 15, acceptance 2): the test writes a qwen2 / qwen3 / gemma2 /
// gemma3 / granite (Q/K rows in rotate-half order) / olmo2 checkpoint (config.json, model.safetensors with HF names,
// Gemma's norms stored as w - 1, the shared TinyStories tokenizer) from the weights of a
// `hinge synth --preset tiny-<family>` GGUF, then checks that hinge gives the same logits from
// the directory, from the GGUF `hinge convert` makes of it, and from the original GGUF.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "common/thread_pool.h"
#include "model/kv_cache.h"
#include "model/synth.h"
#include "model_test_util.h"

namespace hinge {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kVocab = 2048;  // the TinyStories-656K tokenizer's

// GGUF name -> Hugging Face name for `arch` ("" = not written).
std::string hf_name(const std::string& g, const std::string& arch) {
  const bool gemma = arch.rfind("gemma", 0) == 0;
  if (g == "token_embd.weight") return "model.embed_tokens.weight";
  if (g == "output_norm.weight") return "model.norm.weight";
  if (g == "output.weight") return "lm_head.weight";
  if (g.rfind("blk.", 0) != 0) return "";
  const size_t dot = g.find('.', 4);
  const std::string layer = g.substr(4, dot - 4), rest = g.substr(dot + 1);
  const std::pair<const char*, const char*> map[] = {
      {"attn_norm.weight", "input_layernorm.weight"},
      {"attn_q.weight", "self_attn.q_proj.weight"},
      {"attn_k.weight", "self_attn.k_proj.weight"},
      {"attn_v.weight", "self_attn.v_proj.weight"},
      {"attn_output.weight", "self_attn.o_proj.weight"},
      {"attn_q.bias", "self_attn.q_proj.bias"},
      {"attn_k.bias", "self_attn.k_proj.bias"},
      {"attn_v.bias", "self_attn.v_proj.bias"},
      {"attn_q_norm.weight", "self_attn.q_norm.weight"},
      {"attn_k_norm.weight", "self_attn.k_norm.weight"},
      {"ffn_norm.weight", gemma ? "pre_feedforward_layernorm.weight" : "post_attention_layernorm.weight"},
      {"post_attention_norm.weight", "post_attention_layernorm.weight"},
      {"post_ffw_norm.weight", "post_feedforward_layernorm.weight"},
      {"ffn_gate.weight", "mlp.gate_proj.weight"},
      {"ffn_up.weight", "mlp.up_proj.weight"},
      {"ffn_down.weight", "mlp.down_proj.weight"},
  };
  for (const auto& [from, to] : map)
    if (rest == from) return "model.layers." + layer + "." + to;
  return "";
}

nlohmann::json hf_config(const ModelConfig& c, const std::string& model_type) {
  nlohmann::json j = {{"model_type", model_type},
                      {"hidden_size", c.dim},
                      {"num_hidden_layers", c.n_layers},
                      {"num_attention_heads", c.n_heads},
                      {"num_key_value_heads", c.n_kv_heads},
                      {"head_dim", c.head_dim},
                      {"intermediate_size", c.ffn_dim},
                      {"vocab_size", c.n_vocab},
                      {"max_position_embeddings", c.context_length},
                      {"rms_norm_eps", c.rms_eps},
                      {"rope_theta", c.rope.theta},
                      {"tie_word_embeddings", c.tied_output},
                      {"torch_dtype", "float32"}};
  if (model_type == "qwen2") j["use_sliding_window"] = false;
  if (model_type == "granite") {
    j["embedding_multiplier"] = c.embed_scale;
    j["residual_multiplier"] = c.residual_scale;
    j["attention_multiplier"] = c.attn_scale;
    j["logits_scaling"] = c.logit_scale;
  }
  if (model_type == "gemma2") {
    j["sliding_window"] = c.sliding_window;
    j["attn_logit_softcapping"] = c.attn_softcap;
    j["final_logit_softcapping"] = c.final_softcap;
    j["query_pre_attn_scalar"] = c.head_dim;
  }
  if (model_type == "gemma3_text") {
    j["sliding_window"] = c.sliding_window;
    j["sliding_window_pattern"] = 6;
    j["rope_local_base_freq"] = c.rope_local.theta;
    j["final_logit_softcapping"] = nullptr;
    j["query_pre_attn_scalar"] = c.head_dim;
  }
  return j;
}

// Writes an HF directory of `g`'s weights; returns its path.
std::string write_hf_dir(const LoadedModel& g, const std::string& model_type) {
  const std::string dir = testing::temp_dir() + "/hf-" + model_type;
  fs::create_directories(dir);
  const bool gemma = model_type.rfind("gemma", 0) == 0;
  nlohmann::json header = nlohmann::json::object();
  std::string data;
  for (const NamedTensor& t : g.tensors) {
    const std::string name = hf_name(t.name, g.config.architecture);
    if (name.empty()) continue;
    EXPECT_EQ(t.view.type, GgmlType::F32) << t.name;
    const size_t bytes = static_cast<size_t>(t.view.rows) * t.view.row_bytes;
    std::string raw(static_cast<const char*>(t.view.data), bytes);
    // Interleaved-RoPE families (granite): GGUF Q/K rows -> Hugging Face's rotate-half order,
    // the inverse of convert's permutation (GGUF row 2i + j of a head is HF row j * half + i).
    const bool q = t.name.ends_with("attn_q.weight"), k = t.name.ends_with("attn_k.weight");
    if ((q || k) && g.config.rope.style == kernels::RopeStyle::kInterleaved) {
      const int64_t hd = g.config.head_dim, half = hd / 2, rb = static_cast<int64_t>(t.view.row_bytes);
      const int64_t heads = q ? g.config.n_heads : g.config.n_kv_heads;
      std::string out(raw.size(), '\0');
      for (int64_t h = 0; h < heads; ++h)
        for (int64_t i = 0; i < half; ++i)
          for (int64_t jj = 0; jj < 2; ++jj)
            std::memcpy(out.data() + (h * hd + jj * half + i) * rb,
                        raw.data() + (h * hd + 2 * i + jj) * rb, static_cast<size_t>(rb));
      raw = std::move(out);
    }
    if (gemma && name.find("norm.weight") != std::string::npos) {  // HF Gemma stores w - 1
      for (size_t i = 0; i < bytes / 4; ++i) {
        float x;
        std::memcpy(&x, raw.data() + 4 * i, 4);
        x -= 1.0f;
        std::memcpy(raw.data() + 4 * i, &x, 4);
      }
    }
    std::vector<uint64_t> shape(t.ne.rbegin(), t.ne.rend());  // safetensors: outermost first
    header[name] = {{"dtype", "F32"}, {"shape", shape}, {"data_offsets", {data.size(), data.size() + bytes}}};
    data += raw;
  }
  std::string h = header.dump();
  while ((h.size() + 8) % 8) h += ' ';
  std::ofstream st(dir + "/model.safetensors", std::ios::binary);
  const uint64_t n = h.size();
  st.write(reinterpret_cast<const char*>(&n), 8);
  st << h << data;
  st.close();
  std::ofstream(dir + "/config.json") << hf_config(g.config, model_type).dump(2);
  for (const char* f : {"tokenizer.json", "tokenizer_config.json"})
    fs::copy_file(testing::shared_path(std::string("models/tinystories-656k/") + f), dir + "/" + f,
                  fs::copy_options::overwrite_existing);
  return dir;
}

std::vector<float> logits_of(const LoadedModel& m, const std::vector<int32_t>& tokens) {
  ThreadPool pool(2);
  Transformer model(m.config, m.weights, pool, 64, m.file_mappings);
  KvCache cache(m.config, static_cast<int64_t>(tokens.size()));
  std::vector<float> out(tokens.size() * static_cast<size_t>(m.config.n_vocab));
  EXPECT_TRUE(model.forward(tokens, cache, out.data(), /*all_logits=*/true).ok());
  return out;
}

double rel_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double d = 0, mx = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    d = std::max(d, std::fabs(static_cast<double>(a[i]) - b[i]));
    mx = std::max(mx, std::fabs(static_cast<double>(b[i])));
  }
  return d / mx;
}

struct Case {
  const char* preset;
  const char* model_type;
};

class HfFamilies : public ::testing::TestWithParam<Case> {};

TEST_P(HfFamilies, DirectoryAndItsConvertedGgufGiveTheSameLogits) {
  const Case c = GetParam();
  SynthPreset preset = *find_synth_preset(c.preset);
  preset.config.n_vocab = kVocab;
  const std::string gguf = testing::temp_dir() + "/" + c.preset + ".hf-src.gguf";
  ThreadPool pool(2);
  ASSERT_TRUE(write_synth_model(preset, GgmlType::F32, 3, gguf, pool).ok());
  auto g = testing::load_or_die(gguf);
  ASSERT_TRUE(g);
  const std::string dir = write_hf_dir(*g, c.model_type);
  auto h = testing::load_or_die(dir);
  ASSERT_TRUE(h);
  EXPECT_EQ(h->config.architecture, g->config.architecture);
  EXPECT_EQ(h->config.layer_local, g->config.layer_local);
  EXPECT_EQ(h->config.sliding_window, g->config.sliding_window);
  const std::string converted = testing::temp_dir() + "/" + c.preset + ".converted.gguf";
  const auto r = testing::run_command(testing::hinge_binary() + " convert '" + dir + "' -o '" +
                                      converted + "' 2>&1");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  auto cv = testing::load_or_die(converted);
  ASSERT_TRUE(cv);
  std::vector<int32_t> tokens;
  for (int i = 0; i < 64; ++i) tokens.push_back(static_cast<int32_t>((i * 977 + 13) % kVocab));
  const auto want = logits_of(*g, tokens);
  EXPECT_LE(rel_diff(logits_of(*h, tokens), want), 1e-4) << "HF directory";
  EXPECT_LE(rel_diff(logits_of(*cv, tokens), want), 1e-4) << "converted GGUF";
}

INSTANTIATE_TEST_SUITE_P(Families, HfFamilies,
                         ::testing::Values(Case{"tiny-qwen2", "qwen2"}, Case{"tiny-qwen3", "qwen3"},
                                           Case{"tiny-gemma2", "gemma2"},
                                           Case{"tiny-gemma3", "gemma3_text"},
                                           Case{"tiny-granite", "granite"},
                                           Case{"tiny-olmo2", "olmo2"}),
                         [](const auto& info) { return std::string(info.param.model_type); });

}  // namespace
}  // namespace hinge
