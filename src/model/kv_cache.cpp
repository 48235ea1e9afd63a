#include "model/kv_cache.h"

namespace hinge {

KvCache::KvCache(const LlamaConfig& config, int64_t max_tokens)
    : kv_dim_(config.kv_dim()), max_tokens_(max_tokens) {
  const size_t n = static_cast<size_t>(config.n_layers * max_tokens * kv_dim_);
  k_.assign(n, 0.0f);
  v_.assign(n, 0.0f);
}

}  // namespace hinge
