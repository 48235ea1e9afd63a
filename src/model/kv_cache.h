// KvCache: a contiguous single-sequence KV cache — a private paged KvArena whose block table is
// the identity (block i holds positions [16 i, 16 i + 16)), so the model runs the same paged
// attention code for `hinge`'s reference paths (tests, teacher-forced evaluation) as for the
// engine. Any KV dtype; f32 by default (exact).
#pragma once

#include <cstdint>
#include <vector>

#include "kv/kv_arena.h"
#include "model/model_config.h"

namespace hinge {

// The KV spec of a model: its layers, KV heads and head size with the given storage dtypes.
kv::KvSpec kv_spec_for(const ModelConfig& config, kv::KvDtype k_dtype, kv::KvDtype v_dtype,
                       int32_t block_size_tokens = 16);
// The same with the layers split into kv_groups consecutive KV groups (kv::KvSpec::split_layers),
// as the engine makes them (Engine::create, hinge run's sizing). Error when kv_groups is not in
// [1, n_layers]. A model with sliding-window layers gets window_groups() instead (kv_groups
// must then be 1).
// Groups of one layer kind each: the full-attention layers, then the local ones (window set),
// in groups of the smaller kind's layer count (gemma3-1b: 4 global layers -> 1 group of 4,
// 22 local -> 6 groups of at most 4).
std::vector<kv::KvGroup> window_groups(const ModelConfig& config);
StatusOr<kv::KvSpec> kv_spec_for(const ModelConfig& config, kv::KvDtype k_dtype,
                                 kv::KvDtype v_dtype, int32_t block_size_tokens,
                                 int32_t kv_groups);

class KvCache {
 public:
  KvCache(const ModelConfig& config, int64_t max_tokens, kv::KvDtype k_dtype = kv::KvDtype::kF32,
          kv::KvDtype v_dtype = kv::KvDtype::kF32);

  int64_t max_tokens() const { return max_tokens_; }
  int64_t num_tokens() const { return num_tokens_; }
  void set_num_tokens(int64_t n) { num_tokens_ = n; }
  void clear() { num_tokens_ = 0; }
  uint64_t bytes() const { return static_cast<uint64_t>(arena_.bytes()); }

  kv::KvArena& arena() { return arena_; }
  const std::vector<int32_t>& block_table() const { return table_; }

 private:
  int64_t max_tokens_;
  int64_t num_tokens_ = 0;
  kv::KvArena arena_;
  std::vector<int32_t> table_;
};

}  // namespace hinge
