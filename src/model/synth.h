// Random-weight (seeded) GGUF models of real shapes, for benchmarks: same bytes to stream as
// the real model, so speed measurements mean something, with a valid SentencePiece-style
// vocabulary in the metadata so llama.cpp's tools load the files too.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/ggml_type.h"
#include "common/status.h"
#include "common/thread_pool.h"
#include "model/family.h"
#include "model/model_config.h"

namespace hinge {

struct SynthPreset {
  std::string name;
  std::string description;
  ModelConfig config;
  bool tied = false;          // no output.weight: the embedding is the output matrix
  bool qkv_bias = false;      // attn_q/k/v.bias (qwen2)
  bool random_norms = false;  // norms 1 +- 0.25 instead of ones (test presets)
};

// A model's shape and its family's keys, read back through the family exactly as a loader
// would: the config a file with these keys describes. HINGE_CHECK: a known architecture and a
// valid shape.
struct SynthShape {
  const char* arch;
  int64_t layers, dim, ffn, heads, kv_heads, head_dim, vocab, ctx;
  float theta, eps;
  Metadata extra;  // family keys (sliding window, soft-caps, scales)
};
ModelConfig synth_config(const SynthShape& shape, const char* name);

const std::vector<SynthPreset>& synth_presets();
const SynthPreset* find_synth_preset(const std::string& name);

// Writes the model. Matrices use `type` (the output matrix uses Q6_K when type is Q4_K, as in
// Q4_K_M files); norms are f32 ones; weights ~ N(0, 0.02^2) approximately. Deterministic in seed.
// layers > 0 keeps only the first `layers` layers (fast tests of a real shape).
Status write_synth_model(const SynthPreset& preset, GgmlType type, uint64_t seed,
                         const std::string& path, ThreadPool& pool, int64_t layers = 0);

}  // namespace hinge
