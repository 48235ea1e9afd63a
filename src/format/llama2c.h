// llama2.c legacy checkpoints (run.c's format, e.g. stories260K.bin) and llama2.c tokenizer
// files (tok512.bin). Reference: karpathy/llama2.c run.c, memory_map_weights().
//
// Checkpoint layout (little-endian):
//   | 7 x i32: dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, seq_len |
//   | f32 arrays, row-major, outermost dimension first:                            |
//   token_embedding [vocab, dim] | rms_att [layers, dim] | wq [layers, n_heads*hs, dim] |
//   wk [layers, kv_dim, dim] | wv [layers, kv_dim, dim] | wo [layers, dim, n_heads*hs] |
//   rms_ffn [layers, dim] | w1 [layers, hidden, dim] | w2 [layers, dim, hidden] |
//   w3 [layers, hidden, dim] | rms_final [dim] | freq_cis_real, freq_cis_imag [seq_len, hs/2] |
//   wcls [vocab, dim] (only when vocab_size < 0 in the header, i.e. not shared)
// (hs = head_size = dim / n_heads, kv_dim = n_kv_heads * hs; "[out, in]" matrices as run.c's
// matmul reads them.) A row-major [a, b] array is the same memory as a ggml tensor with
// ne = {b, a}; tensors() presents the weights that way under GGUF llama names, and for
// stories260K they are byte-identical to stories260K.gguf's.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace hinge::llama2c {

struct Config {
  int32_t dim = 0;
  int32_t hidden_dim = 0;
  int32_t n_layers = 0;
  int32_t n_heads = 0;
  int32_t n_kv_heads = 0;
  int32_t vocab_size = 0;  // always positive here; the header's sign is in shared_classifier
  int32_t seq_len = 0;
  bool shared_classifier = true;  // wcls == token_embedding
  int32_t head_size() const { return dim / n_heads; }
  int32_t kv_dim() const { return n_kv_heads * head_size(); }
};

// Pointers into the file; per-layer arrays are contiguous, layer l at base + l * (per-layer
// elements), e.g. wq + l * (n_heads * hs * dim). All f32, 4-byte aligned.
struct Weights {
  const float* token_embedding = nullptr;  // [vocab, dim]
  const float* rms_att = nullptr;          // [layers, dim]
  const float* wq = nullptr;               // [layers, n_heads * hs, dim]
  const float* wk = nullptr;               // [layers, kv_dim, dim]
  const float* wv = nullptr;               // [layers, kv_dim, dim]
  const float* wo = nullptr;               // [layers, dim, n_heads * hs]
  const float* rms_ffn = nullptr;          // [layers, dim]
  const float* w1 = nullptr;               // [layers, hidden, dim]  (gate)
  const float* w2 = nullptr;               // [layers, dim, hidden]  (down)
  const float* w3 = nullptr;               // [layers, hidden, dim]  (up)
  const float* rms_final = nullptr;        // [dim]
  const float* wcls = nullptr;             // [vocab, dim]; == token_embedding when shared
};

// One weight in ggml terms: ne[0] innermost; f32.
struct Tensor {
  std::string name;          // GGUF llama name: "token_embd.weight", "blk.3.ffn_down.weight"
  std::vector<uint64_t> ne;  // e.g. token_embd.weight {dim, vocab}
  const float* data = nullptr;
  uint64_t num_elements() const;
};

class Checkpoint {
 public:
  static StatusOr<std::unique_ptr<Checkpoint>> open(const std::string& path);
  // Caller-owned memory, 4-byte aligned, kept alive for the object's lifetime.
  static StatusOr<std::unique_ptr<Checkpoint>> from_memory(const uint8_t* data, size_t size,
                                                           std::string name);
  ~Checkpoint();
  Checkpoint(const Checkpoint&) = delete;
  Checkpoint& operator=(const Checkpoint&) = delete;

  const std::string& path() const { return path_; }
  uint64_t file_size() const { return size_; }
  const Config& config() const { return config_; }
  const Weights& weights() const { return weights_; }
  // token_embd, output_norm, output (only when not shared: like a tied GGUF model, use
  // token_embd.weight when output.weight is absent), then per layer attn_norm, attn_q, attn_k,
  // attn_v, attn_output, ffn_norm, ffn_gate, ffn_down, ffn_up.
  const std::vector<Tensor>& tensors() const { return tensors_; }
  const Tensor* find_tensor(std::string_view name) const;

 private:
  Checkpoint() = default;
  Status parse();

  std::string path_;
  const uint8_t* base_ = nullptr;
  uint64_t size_ = 0;
  bool owns_mapping_ = false;
  Config config_;
  Weights weights_;
  std::vector<Tensor> tensors_;
  std::map<std::string, size_t, std::less<>> index_;
};

// llama2.c tokenizer file: i32 max_token_length, then per token f32 score, i32 length, bytes.
// The file does not store the vocabulary size: it comes from the checkpoint header.
struct Vocab {
  int32_t max_token_length = 0;
  std::vector<std::string> pieces;  // raw bytes, e.g. pieces[1] == "\n<s>\n" in tok512.bin
  std::vector<float> scores;
};
StatusOr<Vocab> read_tokenizer(const std::string& path, int32_t vocab_size);
StatusOr<Vocab> parse_tokenizer(const uint8_t* data, size_t size, int32_t vocab_size,
                                const std::string& name);

}  // namespace hinge::llama2c
