// Loads a Llama-family Hugging Face directory: config.json + safetensors (+ shards) +
// tokenizer.json. Tensors are renamed to GGUF names and used in place (rotate-half RoPE).
#include <fmt/format.h>

#include <fstream>

#include <nlohmann/json.hpp>

#include "format/safetensors.h"
#include "model/loaded_model.h"
#include "model/tensor_binding.h"

namespace hinge {
namespace {

// tokenizer_config.json's chat_template: a string, or a list of {"name", "template"} (the
// "default" one). Anything unreadable means "no template" (the tokenizer reader reports real
// errors in the same file).
std::string chat_template_from(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return {};
  const nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return {};
  auto it = j.find("chat_template");
  if (it == j.end()) return {};
  if (it->is_string()) return it->get<std::string>();
  if (it->is_array())
    for (const auto& e : *it)
      if (e.is_object() && e.value("name", std::string()) == "default" &&
          e.contains("template") && e["template"].is_string())
        return e["template"].get<std::string>();
  return {};
}

StatusOr<LlamaConfig> config_from_hf(const nlohmann::json& j, const std::string& src) {
  LlamaConfig c;
  c.rope_style = kernels::RopeStyle::kNeox;
  auto model_type = j.value("model_type", std::string());
  if (model_type != "llama" && model_type != "mistral")
    return Status::Errorf("{}: model_type '{}' is not supported (hinge runs llama and mistral "
                          "checkpoints)", src, model_type);
  c.architecture = "llama";
  auto get_int = [&](const char* key) -> StatusOr<int64_t> {
    auto it = j.find(key);
    if (it == j.end() || !it->is_number_integer())
      return Status::Errorf("{}: missing or non-integer '{}'", src, key);
    return it->get<int64_t>();
  };
  HINGE_ASSIGN_OR_RETURN(c.dim, get_int("hidden_size"));
  HINGE_ASSIGN_OR_RETURN(c.n_layers, get_int("num_hidden_layers"));
  HINGE_ASSIGN_OR_RETURN(c.n_heads, get_int("num_attention_heads"));
  HINGE_ASSIGN_OR_RETURN(c.ffn_dim, get_int("intermediate_size"));
  HINGE_ASSIGN_OR_RETURN(c.n_vocab, get_int("vocab_size"));
  c.n_kv_heads = j.contains("num_key_value_heads") && j["num_key_value_heads"].is_number_integer()
                     ? j["num_key_value_heads"].get<int64_t>()
                     : c.n_heads;
  if (c.n_heads <= 0) return Status::Errorf("{}: num_attention_heads {} is invalid", src, c.n_heads);
  c.head_dim = j.contains("head_dim") && j["head_dim"].is_number_integer()
                   ? j["head_dim"].get<int64_t>()
                   : c.dim / c.n_heads;
  if (j.contains("max_position_embeddings") && j["max_position_embeddings"].is_number_integer())
    c.context_length = j["max_position_embeddings"].get<int64_t>();
  if (j.contains("rms_norm_eps") && j["rms_norm_eps"].is_number())
    c.rms_eps = j["rms_norm_eps"].get<float>();
  if (j.contains("rope_theta") && j["rope_theta"].is_number())
    c.rope_theta = j["rope_theta"].get<float>();
  c.tied_output = j.value("tie_word_embeddings", false);
  if (j.contains("rope_scaling") && j["rope_scaling"].is_object()) {
    const auto& rs = j["rope_scaling"];
    const std::string type = rs.value("rope_type", rs.value("type", std::string()));
    if (type == "llama3") {
      c.rope_freq_factors.resize(static_cast<size_t>(std::max<int64_t>(c.head_dim / 2, 0)));
      kernels::llama3_freq_factors(c.rope_freq_factors.data(), c.head_dim, c.rope_theta,
                                   rs.value("factor", 8.0f), rs.value("low_freq_factor", 1.0f),
                                   rs.value("high_freq_factor", 4.0f),
                                   rs.value("original_max_position_embeddings", 8192.0f));
    } else if (!type.empty() && type != "default") {
      return Status::Errorf("{}: rope_scaling type '{}' is not supported (llama3 is)", src, type);
    }
  }
  HINGE_RETURN_IF_ERROR(c.validate(src));
  return c;
}

// Hugging Face name -> GGUF name ("" when the tensor is not a weight hinge uses).
std::string gguf_name(const std::string& hf) {
  static const std::pair<const char*, const char*> kLayer[] = {
      {"input_layernorm.weight", "attn_norm.weight"},
      {"self_attn.q_proj.weight", "attn_q.weight"},
      {"self_attn.k_proj.weight", "attn_k.weight"},
      {"self_attn.v_proj.weight", "attn_v.weight"},
      {"self_attn.o_proj.weight", "attn_output.weight"},
      {"post_attention_layernorm.weight", "ffn_norm.weight"},
      {"mlp.gate_proj.weight", "ffn_gate.weight"},
      {"mlp.up_proj.weight", "ffn_up.weight"},
      {"mlp.down_proj.weight", "ffn_down.weight"},
  };
  if (hf == "model.embed_tokens.weight") return "token_embd.weight";
  if (hf == "model.norm.weight") return "output_norm.weight";
  if (hf == "lm_head.weight") return "output.weight";
  const std::string prefix = "model.layers.";
  if (hf.rfind(prefix, 0) != 0) return "";
  const size_t dot = hf.find('.', prefix.size());
  if (dot == std::string::npos) return "";
  const std::string layer = hf.substr(prefix.size(), dot - prefix.size());
  const std::string rest = hf.substr(dot + 1);
  for (const auto& [from, to] : kLayer)
    if (rest == from) return "blk." + layer + "." + to;
  return "";
}

}  // namespace

StatusOr<std::unique_ptr<LoadedModel>> load_hf_model(const std::string& dir,
                                                     const LoadOptions& options) {
  HINGE_ASSIGN_OR_RETURN(std::unique_ptr<HfModelDir> hf, HfModelDir::open(dir));
  auto model = std::make_unique<LoadedModel>();
  model->path = dir;
  model->format = ModelFormat::kHuggingFace;
  for (const auto& s : hf->shards()) model->file_bytes += s->file_size();
  const std::string config_path = dir + "/config.json";
  HINGE_ASSIGN_OR_RETURN(model->config, config_from_hf(hf->config(), config_path));
  if (!hf->tokenizer_json_path())
    return Status::Errorf("{}: no tokenizer.json in the model directory", dir);
  HINGE_ASSIGN_OR_RETURN(model->vocab,
                         Tokenizer::spec_from_hf(*hf->tokenizer_json_path(),
                                                 hf->tokenizer_config_path().value_or("")));
  if (auto cfg = hf->tokenizer_config_path()) model->chat_template = chat_template_from(*cfg);
  if (static_cast<int64_t>(model->vocab.tokens.size()) > model->config.n_vocab)
    return Status::Errorf("{}: tokenizer has {} tokens but vocab_size is {}", dir,
                          model->vocab.tokens.size(), model->config.n_vocab);

  // Build GGUF-named raw tensors over the shards (aliases resolved by HfModelDir).
  std::vector<RawTensor> raws;
  auto add = [&](const std::string& hf_name) {
    const std::string name = gguf_name(hf_name);
    if (name.empty()) return;
    if (name == "output.weight" && model->config.tied_output) return;
    const SafetensorsTensor* t = hf->find_tensor(hf_name);
    if (!t) return;
    raws.push_back(RawTensor{name, t->type, t->ne, t->data, t->num_bytes});
  };
  add("model.embed_tokens.weight");
  for (const auto& n : hf->tensor_names())
    if (n != "model.embed_tokens.weight") add(n);
  HINGE_RETURN_IF_ERROR(bind_llama_weights(*model, raws, dir));
  // safetensors data may be unaligned for its element type; the kernels read f32 rows with
  // unaligned-safe loads, but norms are bound as float pointers: bind_vector copies those.
  if (options.progress) options.progress(1.0);
  model->owners.push_back(std::shared_ptr<HfModelDir>(std::move(hf)));
  return model;
}

}  // namespace hinge
