// safetensors reader (over mmap or caller memory) and a Hugging Face model folder
// (config.json + model.safetensors or shards listed in model.safetensors.index.json).
// Spec: https://github.com/huggingface/safetensors (format section).
//
// File layout: | u64 LE header_len | JSON header (header_len bytes) | data buffer |
// The header maps tensor name -> {"dtype", "shape", "data_offsets": [begin, end]} with offsets
// relative to the data buffer; "__metadata__" maps string -> string.
// Every offset and shape is validated against the file; a corrupt file yields a Status naming
// the file and the problem. Tensor data is NOT guaranteed to be aligned to its element size
// (the format only pads the header to 8 bytes by convention): read through memcpy or check.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/ggml_type.h"
#include "common/status.h"

namespace hinge {

struct SafetensorsTensor {
  std::string name;
  std::string dtype;              // as in the file: "F32", "F16", "BF16"
  GgmlType type = GgmlType::F32;  // the same element type in ggml terms
  std::vector<uint64_t> shape;    // file order: outermost first (PyTorch order)
  std::vector<uint64_t> ne;       // ggml order: shape reversed, ne[0] innermost
  uint64_t offset = 0;            // begin, relative to the data buffer
  uint64_t num_bytes = 0;         // end - begin == prod(shape) * element size
  const uint8_t* data = nullptr;  // points into the mapping / caller memory
  uint64_t num_elements() const;
};

class SafetensorsFile {
 public:
  static StatusOr<std::unique_ptr<SafetensorsFile>> open(const std::string& path);
  // Parses caller-owned memory (kept alive by the caller for the object's lifetime).
  static StatusOr<std::unique_ptr<SafetensorsFile>> from_memory(const uint8_t* data, size_t size,
                                                                std::string name);
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::string& path() const { return path_; }
  uint64_t file_size() const { return size_; }
  uint64_t data_offset() const { return data_offset_; }  // 8 + header length
  // "__metadata__" entries with string values (others are ignored).
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  // Tensors sorted by data offset (file order of the data).
  const std::vector<SafetensorsTensor>& tensors() const { return tensors_; }
  const SafetensorsTensor* find(std::string_view name) const;

 private:
  SafetensorsFile() = default;
  Status parse();

  std::string path_;
  const uint8_t* base_ = nullptr;
  uint64_t size_ = 0;
  bool owns_mapping_ = false;
  uint64_t data_offset_ = 0;
  std::map<std::string, std::string> metadata_;
  std::vector<SafetensorsTensor> tensors_;
  std::map<std::string, size_t, std::less<>> index_;
};

// A Hugging Face model folder. Owns the mapped shard files; tensor pointers stay valid for its
// lifetime.
class HfModelDir {
 public:
  // Reads dir/config.json (required), then dir/model.safetensors.index.json and its shards if
  // present, else dir/model.safetensors. A tensor may appear in only one shard; every
  // weight_map entry must exist in the shard it names.
  static StatusOr<std::unique_ptr<HfModelDir>> open(const std::string& dir);

  const std::string& dir() const { return dir_; }
  const nlohmann::json& config() const { return config_; }
  const std::vector<std::unique_ptr<SafetensorsFile>>& shards() const { return shards_; }
  // Also resolves tied-weight aliases recorded in a shard's __metadata__ as "dropped": "kept"
  // (the safetensors torch helper's convention), e.g. model.embed_tokens.weight ->
  // lm_head.weight in tinystories-656k.
  const SafetensorsTensor* find_tensor(std::string_view name) const;
  std::vector<std::string> tensor_names() const;  // sorted, stored tensors only (no aliases)
  size_t num_tensors() const { return index_.size(); }

  // Paths of optional files, when present as regular files.
  const std::optional<std::string>& tokenizer_json_path() const { return tokenizer_json_; }
  const std::optional<std::string>& tokenizer_config_path() const { return tokenizer_config_; }
  // dir/name when it is a regular file (e.g. "generation_config.json").
  std::optional<std::string> find_file(std::string_view name) const;

 private:
  HfModelDir() = default;
  static StatusOr<std::unique_ptr<HfModelDir>> open_impl(const std::string& dir);
  std::string dir_;
  nlohmann::json config_;
  std::vector<std::unique_ptr<SafetensorsFile>> shards_;
  std::map<std::string, const SafetensorsTensor*, std::less<>> index_;
  std::map<std::string, std::string, std::less<>> aliases_;  // dropped name -> stored name
  std::optional<std::string> tokenizer_json_;
  std::optional<std::string> tokenizer_config_;
};

// Reads and parses a JSON file (exceptions caught). Errors name the file.
StatusOr<nlohmann::json> read_json_file(const std::string& path);

}  // namespace hinge
