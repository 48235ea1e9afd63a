// A contiguous per-sequence KV cache (f32): the simplest correct cache, used by `hinge run` and
// as the reference the paged cache is tested against.
//
//   k_[layer][pos][n_kv_heads * head_dim], same for v_.
#pragma once

#include <cstdint>
#include <vector>

#include "model/llama_config.h"

namespace hinge {

class KvCache {
 public:
  KvCache(const LlamaConfig& config, int64_t max_tokens);

  int64_t max_tokens() const { return max_tokens_; }
  int64_t num_tokens() const { return num_tokens_; }
  void set_num_tokens(int64_t n) { num_tokens_ = n; }
  void clear() { num_tokens_ = 0; }
  uint64_t bytes() const { return (k_.size() + v_.size()) * sizeof(float); }
  int64_t kv_dim() const { return kv_dim_; }

  float* k(int64_t layer, int64_t pos) { return &k_[offset(layer, pos)]; }
  float* v(int64_t layer, int64_t pos) { return &v_[offset(layer, pos)]; }
  const float* k(int64_t layer, int64_t pos) const { return &k_[offset(layer, pos)]; }
  const float* v(int64_t layer, int64_t pos) const { return &v_[offset(layer, pos)]; }

 private:
  size_t offset(int64_t layer, int64_t pos) const {
    return static_cast<size_t>((layer * max_tokens_ + pos) * kv_dim_);
  }
  int64_t kv_dim_;
  int64_t max_tokens_;
  int64_t num_tokens_ = 0;
  std::vector<float> k_;
  std::vector<float> v_;
};

}  // namespace hinge
