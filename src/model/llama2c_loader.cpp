// Loads a llama2.c checkpoint (run.c's .bin) and its tokenizer .bin. The checkpoint's arrays
// are already in GGUF's row-major [out, in] layout, so the weights are used in place.
#include "format/llama2c.h"
#include "model/family.h"
#include "model/loaded_model.h"
#include "model/tensor_binding.h"

namespace hinge {

StatusOr<std::unique_ptr<LoadedModel>> load_llama2c_model(const std::string& path,
                                                          const LoadOptions& options) {
  if (options.tokenizer_path.empty() && options.require_vocab)
    return Status::Errorf("{}: llama2.c checkpoints need their tokenizer: pass --tokenizer "
                          "tokenizer.bin", path);
  HINGE_ASSIGN_OR_RETURN(std::unique_ptr<llama2c::Checkpoint> ckpt, llama2c::Checkpoint::open(path));
  const llama2c::Config& lc = ckpt->config();
  auto model = std::make_unique<LoadedModel>();
  model->path = path;
  model->format = ModelFormat::kLlama2c;
  model->file_bytes = ckpt->file_size();
  ModelConfig& c = model->config;
  c.name = "llama2.c";
  c.n_vocab = lc.vocab_size;
  c.dim = lc.dim;
  c.n_layers = lc.n_layers;
  c.n_heads = lc.n_heads;
  c.n_kv_heads = lc.n_kv_heads;
  c.head_dim = lc.head_size();
  c.ffn_dim = lc.hidden_dim;
  c.context_length = lc.seq_len;
  c.rms_eps = 1e-5f;        // run.c's rmsnorm
  c.family = find_family_by_arch("llama");
  c.rope.theta = 10000.0f;  // run.c's RoPE
  c.rope.style = kernels::RopeStyle::kInterleaved;
  c.rope.n_rot = c.head_dim;
  c.rope_local = c.rope;
  HINGE_RETURN_IF_ERROR(c.validate(path));
  if (!options.tokenizer_path.empty()) {
    HINGE_ASSIGN_OR_RETURN(model->vocab,
                           Tokenizer::spec_from_llama2c(options.tokenizer_path, lc.vocab_size));
  }

  std::vector<RawTensor> raws;
  for (const auto& t : ckpt->tensors()) {
    uint64_t bytes = t.num_elements() * sizeof(float);
    raws.push_back(RawTensor{t.name, GgmlType::F32, t.ne,
                             reinterpret_cast<const uint8_t*>(t.data), bytes});
  }
  HINGE_RETURN_IF_ERROR(bind_model_weights(*model, raws, path));
  if (options.progress) options.progress(1.0);
  model->owners.push_back(std::shared_ptr<llama2c::Checkpoint>(std::move(ckpt)));
  return model;
}

}  // namespace hinge
