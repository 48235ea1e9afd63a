#include "model/llama_model.h"

#include <algorithm>
#include <cmath>

#include "kernels/ops.h"
#include "kernels/quant.h"

namespace hinge {

LlamaModel::LlamaModel(const LlamaConfig& config, const LlamaWeights& weights, ThreadPool& pool,
                       int64_t max_batch_tokens)
    : config_(config), weights_(weights), pool_(pool), max_batch_(std::max<int64_t>(1, max_batch_tokens)) {
  const auto& c = config_;
  inv_freq_.resize(static_cast<size_t>(c.head_dim / 2));
  kernels::rope_inv_freq(inv_freq_.data(), c.head_dim, c.rope_theta,
                         c.rope_freq_factors.empty() ? nullptr : c.rope_freq_factors.data());
  auto sz = [&](int64_t per_token) { return static_cast<size_t>(max_batch_ * per_token); };
  x_.resize(sz(c.dim));
  xb_.resize(sz(c.dim));
  q_.resize(sz(c.q_dim()));
  k_.resize(sz(c.kv_dim()));
  v_.resize(sz(c.kv_dim()));
  att_out_.resize(sz(c.q_dim()));
  proj_.resize(sz(c.dim));
  gate_.resize(sz(c.ffn_dim));
  up_.resize(sz(c.ffn_dim));
  scores_.resize(static_cast<size_t>(pool_.size() * c.context_length));
}

Status LlamaModel::forward(std::span<const int32_t> tokens, KvCache& cache, float* logits,
                           bool all_logits) {
  const int64_t n = static_cast<int64_t>(tokens.size());
  if (n == 0) return Status::Error("forward: no tokens");
  for (int32_t t : tokens)
    if (t < 0 || t >= config_.n_vocab)
      return Status::Errorf("token id {} is out of range [0, {})", t, config_.n_vocab);
  const int64_t limit = std::min(cache.max_tokens(), config_.context_length);
  if (cache.num_tokens() + n > limit)
    return Status::Errorf("sequence of {} tokens exceeds the context size {}",
                          cache.num_tokens() + n, limit);
  for (int64_t start = 0; start < n; start += max_batch_) {
    const int64_t len = std::min(max_batch_, n - start);
    const bool last = start + len == n;
    float* out = nullptr;
    if (all_logits) out = logits + start * config_.n_vocab;
    else if (last) out = logits;
    forward_chunk(tokens.data() + start, len, cache, out, all_logits);
  }
  return Status::Ok();
}

void LlamaModel::forward_chunk(const int32_t* tokens, int64_t n, KvCache& cache, float* logits,
                               bool all_logits) {
  const auto& c = config_;
  const int64_t dim = c.dim, q_dim = c.q_dim(), kv_dim = c.kv_dim(), ffn = c.ffn_dim;
  const int64_t pos0 = cache.num_tokens();

  for (int64_t t = 0; t < n; ++t) {
    const auto& e = weights_.token_embd;
    kernels::dequantize_row(e.type, static_cast<const uint8_t*>(e.data) + tokens[t] * e.row_bytes,
                            &x_[t * dim], dim);
  }

  for (int64_t l = 0; l < c.n_layers; ++l) {
    const LayerWeights& w = weights_.layers[l];
    // Attention block.
    for (int64_t t = 0; t < n; ++t)
      kernels::rmsnorm(&xb_[t * dim], &x_[t * dim], w.attn_norm, dim, c.rms_eps);
    kernels::matmul(w.wq, xb_.data(), n, q_.data(), pool_, mm_scratch_);
    kernels::matmul(w.wk, xb_.data(), n, k_.data(), pool_, mm_scratch_);
    kernels::matmul(w.wv, xb_.data(), n, v_.data(), pool_, mm_scratch_);
    for (int64_t t = 0; t < n; ++t) {
      kernels::rope(&q_[t * q_dim], c.n_heads, c.head_dim, pos0 + t, inv_freq_.data(),
                    c.rope_style);
      kernels::rope(&k_[t * kv_dim], c.n_kv_heads, c.head_dim, pos0 + t, inv_freq_.data(),
                    c.rope_style);
      std::copy_n(&k_[t * kv_dim], kv_dim, cache.k(l, pos0 + t));
      std::copy_n(&v_[t * kv_dim], kv_dim, cache.v(l, pos0 + t));
    }
    attention(l, n, pos0, cache);
    kernels::matmul(w.wo, att_out_.data(), n, proj_.data(), pool_, mm_scratch_);
    kernels::add_inplace(x_.data(), proj_.data(), n * dim);

    // Feed-forward block (SwiGLU).
    for (int64_t t = 0; t < n; ++t)
      kernels::rmsnorm(&xb_[t * dim], &x_[t * dim], w.ffn_norm, dim, c.rms_eps);
    kernels::matmul(w.w_gate, xb_.data(), n, gate_.data(), pool_, mm_scratch_);
    kernels::matmul(w.w_up, xb_.data(), n, up_.data(), pool_, mm_scratch_);
    kernels::swiglu(gate_.data(), up_.data(), n * ffn);
    kernels::matmul(w.w_down, gate_.data(), n, proj_.data(), pool_, mm_scratch_);
    kernels::add_inplace(x_.data(), proj_.data(), n * dim);
  }
  cache.set_num_tokens(pos0 + n);

  if (!logits) return;
  const int64_t first = all_logits ? 0 : n - 1;
  for (int64_t t = first; t < n; ++t)
    kernels::rmsnorm(&xb_[(t - first) * dim], &x_[t * dim], weights_.output_norm, dim, c.rms_eps);
  kernels::matmul(weights_.output, xb_.data(), n - first, logits, pool_, mm_scratch_);
}

// Grouped-query attention of the chunk's n tokens against the cache (which already holds their
// own K/V). Query head h reads KV head h / (n_heads / n_kv_heads).
void LlamaModel::attention(int64_t layer, int64_t n, int64_t pos0, KvCache& cache) {
  const auto& c = config_;
  const int64_t head_dim = c.head_dim, q_dim = c.q_dim();
  const int64_t group = c.n_heads / c.n_kv_heads;
  // Divide (not multiply by the inverse) as llama2.c does, so f32 scores match it exactly.
  const float sqrt_head_dim = std::sqrt(static_cast<float>(head_dim));
  const int64_t units = n * c.n_heads;
  auto body = [&](int tid, int nt) {
    float* scores = &scores_[static_cast<size_t>(tid) * c.context_length];
    for (int64_t u = tid; u < units; u += nt) {
      const int64_t t = u / c.n_heads, h = u % c.n_heads;
      const int64_t kvh = h / group;
      const int64_t len = pos0 + t + 1;  // causal: positions 0 .. pos0 + t
      const float* q = &q_[t * q_dim + h * head_dim];
      for (int64_t p = 0; p < len; ++p)
        scores[p] = kernels::dot_f32(q, cache.k(layer, p) + kvh * head_dim, head_dim) / sqrt_head_dim;
      kernels::softmax(scores, len);
      float* out = &att_out_[t * q_dim + h * head_dim];
      std::fill_n(out, head_dim, 0.0f);
      for (int64_t p = 0; p < len; ++p)
        kernels::axpy_f32(out, scores[p], cache.v(layer, p) + kvh * head_dim, head_dim);
    }
  };
  // Waking the workers costs microseconds; below ~64K multiply-adds (tiny models, short
  // contexts) the calling thread alone is faster.
  const int64_t work = units * (pos0 + n) * head_dim * 2;
  if (work < (int64_t{1} << 16)) {
    body(0, 1);
  } else {
    pool_.run(body);
  }
}

}  // namespace hinge
