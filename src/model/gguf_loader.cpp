// Loads a Llama-family model from a GGUF file (zero-copy over the mapping).
#include <fmt/format.h>

#include "format/gguf.h"
#include "model/loaded_model.h"
#include "model/tensor_binding.h"

namespace hinge {
namespace {

StatusOr<LlamaConfig> config_from_gguf(const gguf::GgufFile& f) {
  const std::string& src = f.path();
  LlamaConfig c;
  auto arch = f.get_string("general.architecture");
  if (!arch) return Status::Error(src + ": missing general.architecture (is this a model file?)");
  if (*arch != "llama")
    return Status::Errorf("{}: architecture '{}' is not supported (hinge runs 'llama': Llama 2/3, "
                          "Mistral, TinyLlama, SmolLM)", src, *arch);
  c.architecture = *arch;
  c.name = f.get_string("general.name").value_or("");
  auto need_int = [&](const std::string& key) -> StatusOr<int64_t> {
    auto v = f.get_int(*arch + "." + key);
    if (!v) return Status::Errorf("{}: missing or non-integer metadata '{}.{}'", src, *arch, key);
    return *v;
  };
  HINGE_ASSIGN_OR_RETURN(c.dim, need_int("embedding_length"));
  HINGE_ASSIGN_OR_RETURN(c.n_layers, need_int("block_count"));
  HINGE_ASSIGN_OR_RETURN(c.n_heads, need_int("attention.head_count"));
  HINGE_ASSIGN_OR_RETURN(c.ffn_dim, need_int("feed_forward_length"));
  c.n_kv_heads = f.get_int(*arch + ".attention.head_count_kv").value_or(c.n_heads);
  c.context_length = f.get_int(*arch + ".context_length").value_or(2048);
  if (c.n_heads <= 0) return Status::Errorf("{}: head count {} is invalid", src, c.n_heads);
  c.head_dim = f.get_int(*arch + ".attention.key_length").value_or(c.dim / c.n_heads);
  c.rms_eps = static_cast<float>(
      f.get_float(*arch + ".attention.layer_norm_rms_epsilon").value_or(1e-5));
  c.rope_theta = static_cast<float>(f.get_float(*arch + ".rope.freq_base").value_or(10000.0));
  c.rope_style = kernels::RopeStyle::kInterleaved;
  if (auto v = f.get_int(*arch + ".vocab_size")) {
    c.n_vocab = *v;
  } else if (const auto* t = f.find_tensor("token_embd.weight"); t && t->ne.size() == 2) {
    c.n_vocab = static_cast<int64_t>(t->ne[1]);
  }
  if (const auto* t = f.find_tensor("rope_freqs.weight")) {
    if (t->type != GgmlType::F32 || t->ne.size() != 1 ||
        t->ne[0] != static_cast<uint64_t>(c.head_dim / 2))
      return Status::Error(src + ": tensor 'rope_freqs.weight' must be f32 [head_dim / 2]");
    const float* p = reinterpret_cast<const float*>(t->data);
    c.rope_freq_factors.assign(p, p + t->ne[0]);
  }
  HINGE_RETURN_IF_ERROR(c.validate(src));
  return c;
}

RawTensor raw_from(const gguf::TensorInfo& t) {
  return RawTensor{t.name, t.type, t.ne, t.data, t.num_bytes};
}

}  // namespace

StatusOr<std::unique_ptr<LoadedModel>> load_gguf_model(const std::string& path,
                                                       const LoadOptions& options) {
  HINGE_ASSIGN_OR_RETURN(std::unique_ptr<gguf::GgufFile> file, gguf::GgufFile::open(path));
  auto model = std::make_unique<LoadedModel>();
  model->path = path;
  model->format = ModelFormat::kGguf;
  model->file_bytes = file->file_size();
  HINGE_ASSIGN_OR_RETURN(model->config, config_from_gguf(*file));
  HINGE_ASSIGN_OR_RETURN(model->vocab, Tokenizer::spec_from_gguf(*file));
  model->chat_template = file->get_string("tokenizer.chat_template").value_or("");
  if (static_cast<int64_t>(model->vocab.tokens.size()) != model->config.n_vocab)
    return Status::Errorf("{}: tokenizer has {} tokens but the model's vocabulary is {}", path,
                          model->vocab.tokens.size(), model->config.n_vocab);

  std::vector<RawTensor> raws;
  raws.reserve(file->tensors().size());
  for (const auto& t : file->tensors()) raws.push_back(raw_from(t));
  HINGE_RETURN_IF_ERROR(bind_llama_weights(*model, raws, path));
  // Touch the mapping page by page so the loading bar reflects real I/O.
  if (options.progress) {
    const auto& ts = file->tensors();
    volatile uint8_t sink = 0;
    for (size_t i = 0; i < ts.size(); ++i) {
      for (uint64_t o = 0; o < ts[i].num_bytes; o += 4096) sink = sink + ts[i].data[o];
      options.progress(static_cast<double>(i + 1) / static_cast<double>(ts.size()));
    }
    (void)sink;
  }
  if (!file->file_mapping().empty()) model->file_mappings.push_back(file->file_mapping());
  model->owners.push_back(std::shared_ptr<gguf::GgufFile>(std::move(file)));
  return model;
}

}  // namespace hinge
