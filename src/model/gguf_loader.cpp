// Loads a model of any supported family (model/family.h) from a GGUF file (zero-copy over the mapping).
#include <fmt/format.h>

#include "format/gguf.h"
#include "format/error_text.h"
#include "model/family.h"
#include "model/loaded_model.h"
#include "model/tensor_binding.h"

namespace hinge {
namespace {

StatusOr<ModelConfig> config_from_gguf(const gguf::GgufFile& f) {
  const std::string& src = f.path();
  ModelConfig c;
  auto arch = f.get_string("general.architecture");
  if (!arch) return Status::Error(src + ": missing general.architecture (is this a model file?)");
  const Family* family = find_family_by_arch(*arch);
  if (!family)
    return Status::Errorf("{}: architecture '{}' is not supported (hinge runs {})", src,
                          format_internal::one_line(*arch, 100), supported_architectures());
  c.family = family;
  c.name = f.get_string("general.name").value_or("");
  const HparamReader hp(f.metadata(), *arch, src);
  HINGE_RETURN_IF_ERROR(load_common_hparams(hp, c));
  HINGE_RETURN_IF_ERROR(family->load_hparams(hp, c));
  if (auto v = hp.get_int("vocab_size")) {
    c.n_vocab = *v;
  } else if (const auto* t = f.find_tensor("token_embd.weight"); t && t->ne.size() == 2) {
    c.n_vocab = static_cast<int64_t>(t->ne[1]);
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
  // "no_vocab" (llama.cpp's test models): token ids in, logits out; nothing to tokenize.
  const bool no_vocab = file->get_string("tokenizer.ggml.model").value_or("") == "no_vocab";
  if (!no_vocab) {
    HINGE_ASSIGN_OR_RETURN(model->vocab, Tokenizer::spec_from_gguf(*file));
  }
  model->chat_template = file->get_string("tokenizer.chat_template").value_or("");
  if (!no_vocab && static_cast<int64_t>(model->vocab.tokens.size()) != model->config.n_vocab)
    return Status::Errorf("{}: tokenizer has {} tokens but the model's vocabulary is {}", path,
                          model->vocab.tokens.size(), model->config.n_vocab);

  std::vector<RawTensor> raws;
  raws.reserve(file->tensors().size());
  for (const auto& t : file->tensors()) raws.push_back(raw_from(t));
  HINGE_RETURN_IF_ERROR(bind_model_weights(*model, raws, path));
  HINGE_RETURN_IF_ERROR(model->config.validate(path));
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
