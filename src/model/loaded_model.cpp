#include "model/loaded_model.h"

#include <sys/stat.h>

#include <cstdio>
#include <cstring>

#include "format/gguf.h"

namespace hinge {

const char* model_format_name(ModelFormat f) {
  switch (f) {
    case ModelFormat::kGguf: return "gguf";
    case ModelFormat::kHuggingFace: return "huggingface";
    case ModelFormat::kLlama2c: return "llama2.c";
  }
  return "unknown";
}

uint64_t LoadedModel::num_parameters() const {
  uint64_t n = 0;
  for (const auto& t : tensors) {
    uint64_t c = 1;
    for (uint64_t d : t.ne) c *= d;
    n += c;
  }
  return n;
}

namespace {
bool is_directory(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}
bool has_gguf_magic(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return false;
  char magic[4] = {};
  const size_t n = std::fread(magic, 1, 4, f);
  std::fclose(f);
  return n == 4 && std::memcmp(magic, "GGUF", 4) == 0;
}
}  // namespace

StatusOr<std::unique_ptr<LoadedModel>> load_model(const std::string& path,
                                                  const LoadOptions& options) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    return Status::Errorf("{}: no such file or directory", path);
  if (is_directory(path)) return load_hf_model(path, options);
  if (has_gguf_magic(path)) return load_gguf_model(path, options);
  if (path.size() >= 4 && path.compare(path.size() - 4, 4, ".bin") == 0)
    return load_llama2c_model(path, options);
  return Status::Errorf("{}: not a GGUF file (bad magic), a Hugging Face model directory, or a "
                        "llama2.c checkpoint (.bin)", path);
}

StatusOr<VocabSpec> load_vocab(const std::string& path, const std::string& tokenizer_path) {
  if (is_directory(path)) {
    HINGE_ASSIGN_OR_RETURN(auto m, load_hf_model(path, {}));
    return m->vocab;
  }
  if (has_gguf_magic(path)) {
    // Vocab-only GGUF files have no weights: read the tokenizer metadata alone.
    HINGE_ASSIGN_OR_RETURN(auto file, gguf::GgufFile::open(path));
    return Tokenizer::spec_from_gguf(*file);
  }
  if (!tokenizer_path.empty()) {
    HINGE_ASSIGN_OR_RETURN(auto m, load_llama2c_model(path, LoadOptions{tokenizer_path, true, {}}));
    return m->vocab;
  }
  return Status::Errorf("{}: cannot find a tokenizer (pass --tokenizer for llama2.c checkpoints)",
                        path);
}

}  // namespace hinge
