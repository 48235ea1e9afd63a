// Hyper-parameters of a Llama-family model (Llama 2/3, Mistral, TinyLlama, SmolLM), independent
// of the file format it came from.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "kernels/ops.h"

namespace hinge {

struct LlamaConfig {
  std::string architecture = "llama";
  std::string name;
  int64_t n_vocab = 0;
  int64_t dim = 0;             // embedding length
  int64_t n_layers = 0;
  int64_t n_heads = 0;
  int64_t n_kv_heads = 0;
  int64_t head_dim = 0;        // dim / n_heads unless the file says otherwise
  int64_t ffn_dim = 0;
  int64_t context_length = 2048;
  float rms_eps = 1e-5f;
  float rope_theta = 10000.0f;
  kernels::RopeStyle rope_style = kernels::RopeStyle::kInterleaved;
  // Per-pair rope frequency divisors (Llama 3 rope_scaling); empty = none.
  std::vector<float> rope_freq_factors;
  bool tied_output = false;    // output matrix is the token embedding

  int64_t q_dim() const { return n_heads * head_dim; }
  int64_t kv_dim() const { return n_kv_heads * head_dim; }
  // KV bytes per token: 2 (K and V) x layers x kv_heads x head_dim x bytes per element.
  int64_t kv_bytes_per_token(int64_t bytes_per_element) const {
    return 2 * n_layers * n_kv_heads * head_dim * bytes_per_element;
  }
  // Checks that the numbers are sane and consistent (hostile metadata must not reach the
  // forward pass). `source` names the file in the message.
  Status validate(const std::string& source) const;
};

}  // namespace hinge
