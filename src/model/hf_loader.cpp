// Loads a Hugging Face directory of any family with a config.json mapping (model/family.h): config.json + safetensors (+ shards) +
// tokenizer.json. Tensors are renamed to GGUF names and used in place (rotate-half RoPE).
#include <fmt/format.h>

#include <fstream>

#include <nlohmann/json.hpp>

#include "format/safetensors.h"
#include "format/error_text.h"
#include "kernels/quant.h"
#include "model/family.h"
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

StatusOr<ModelConfig> config_from_hf(const nlohmann::json& j, const std::string& src) {
  const std::string model_type = j.value("model_type", std::string());
  const Family* family = find_family_by_hf_type(model_type);
  if (!family) {
    std::string types;
    for (const Family* f : all_families())
      if (f->hf_metadata)
        for (std::string_view t : f->hf_model_types) types += (types.empty() ? "" : ", ") + std::string(t);
    return Status::Errorf("{}: model_type '{}' is not supported (hinge reads Hugging Face "
                          "checkpoints of model_type {})", src,
                          format_internal::one_line(model_type, 100), types);
  }
  const std::string arch(family->gguf_archs.front());
  Metadata md;
  HINGE_RETURN_IF_ERROR(family->hf_metadata(j, src, md));
  ModelConfig c;
  c.family = family;
  const HparamReader hp(md, arch, src);
  HINGE_RETURN_IF_ERROR(load_common_hparams(hp, c));
  HINGE_RETURN_IF_ERROR(family->load_hparams(hp, c));
  // Hugging Face checkpoints rotate halves (rotate_half): native for the NEOX families; the
  // llama-like ones run so here and are permuted when written to GGUF (hinge convert).
  c.rope.style = c.rope_local.style = kernels::RopeStyle::kNeox;
  c.n_vocab = hp.get_int("vocab_size").value_or(0);
  c.tied_output = j.value("tie_word_embeddings", false);
  auto f = [&](const char* key) {
    for (const auto& [k, v] : md)
      if (k == key) return static_cast<float>(v.as_float().value_or(0.0));
    return 0.0f;
  };
  HINGE_RETURN_IF_ERROR(c.validate(src));  // bounds n_rot before the factors are sized by it
  if (f("hinge.llama3.factor") > 0.0f) {  // Llama 3 rope_scaling: per-pair divisors
    c.rope.freq_factors.resize(static_cast<size_t>(std::max<int64_t>(c.rope.n_rot / 2, 0)));
    kernels::llama3_freq_factors(c.rope.freq_factors.data(), c.rope.n_rot, c.rope.theta,
                                 f("hinge.llama3.factor"), f("hinge.llama3.low_freq_factor"),
                                 f("hinge.llama3.high_freq_factor"),
                                 f("hinge.llama3.original_context"));
  }
  HINGE_RETURN_IF_ERROR(c.validate(src));
  return c;
}

// Hugging Face name -> GGUF name ("" when the tensor is not a weight hinge uses); the family's
// own per-layer names first.
std::string gguf_name(const std::string& hf, const Family& family) {
  static const std::pair<const char*, const char*> kLayer[] = {
      {"input_layernorm.weight", "attn_norm.weight"},
      {"self_attn.q_proj.weight", "attn_q.weight"},
      {"self_attn.k_proj.weight", "attn_k.weight"},
      {"self_attn.v_proj.weight", "attn_v.weight"},
      {"self_attn.o_proj.weight", "attn_output.weight"},
      {"self_attn.q_proj.bias", "attn_q.bias"},
      {"self_attn.k_proj.bias", "attn_k.bias"},
      {"self_attn.v_proj.bias", "attn_v.bias"},
      {"self_attn.o_proj.bias", "attn_output.bias"},
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
  for (const HfTensorName& n : family.hf_layer_names)
    if (rest == n.hf) return "blk." + layer + "." + n.gguf;
  for (const auto& [from, to] : kLayer)
    if (rest == from) return "blk." + layer + "." + to;
  return "";
}

bool is_norm(const std::string& gguf) {
  return gguf.size() > 11 && gguf.compare(gguf.size() - 11, 11, "norm.weight") == 0;
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
  const Family& family = *model->config.family;
  Status bad = Status::Ok();
  auto add = [&](const std::string& hf_name) {
    const std::string name = gguf_name(hf_name, family);
    if (name.empty()) return;
    if (name == "output.weight" && model->config.tied_output) return;
    const SafetensorsTensor* t = hf->find_tensor(hf_name);
    if (!t) return;
    RawTensor raw{name, t->type, t->ne, t->data, t->num_bytes};
    if (family.hf_norm_plus_one && is_norm(name)) {  // Gemma stores w - 1
      uint64_t n = 1;
      for (uint64_t d : t->ne) n *= d;
      auto tr = ggml_type_traits(t->type);
      if (!tr || t->ne.size() != 1 || n > (1u << 20) ||
          t->num_bytes < ggml_row_bytes(*tr, n)) {
        bad = Status::Errorf("{}: norm tensor '{}' has an unexpected shape or type", dir, hf_name);
        return;
      }
      auto& buf = model->buffers.emplace_back(n * sizeof(float));
      float* out = reinterpret_cast<float*>(buf.data());
      if (!kernels::dequantize_row_ref(t->type, t->data, out, static_cast<int64_t>(n))) {
        bad = Status::Errorf("{}: norm tensor '{}' has type {}, which hinge cannot read", dir,
                             hf_name, tr->name);
        return;
      }
      for (uint64_t i = 0; i < n; ++i) out[i] += 1.0f;
      raw = RawTensor{name, GgmlType::F32, t->ne, buf.data(), n * sizeof(float)};
    }
    raws.push_back(std::move(raw));
  };
  // No lm_head: tied, whatever the config says.
  if (!hf->find_tensor("lm_head.weight")) model->config.tied_output = true;
  add("model.embed_tokens.weight");
  for (const auto& n : hf->tensor_names())
    if (n != "model.embed_tokens.weight") add(n);
  HINGE_RETURN_IF_ERROR(bad);
  HINGE_RETURN_IF_ERROR(bind_model_weights(*model, raws, dir));
  HINGE_RETURN_IF_ERROR(model->config.validate(dir));
  // safetensors data may be unaligned for its element type; the kernels read f32 rows with
  // unaligned-safe loads, but norms are bound as float pointers: bind_vector copies those.
  if (options.progress) options.progress(1.0);
  model->owners.push_back(std::shared_ptr<HfModelDir>(std::move(hf)));
  return model;
}

}  // namespace hinge
