#include "model/transformer.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <string_view>

#include <sys/mman.h>
#include <unistd.h>

#include "common/elapsed.h"
#include "kernels/kv_quant.h"
#include "kernels/ops.h"
#include "kernels/quant.h"

namespace hinge {
namespace {
// Adds the time since the last lap to phase p of `prof` (if any) with the weight bytes (their
// GGUF size; packed copies hold as many) of the matrices its matmuls read and their
// multiply-adds over `rows` activation rows.
void lap_matmul(StepProfile* prof, StepProfile::Phase p, int64_t rows,
                std::initializer_list<const kernels::MatrixView*> ws) {
  if (prof == nullptr) return;
  int64_t bytes = 0, elems = 0;
  for (const kernels::MatrixView* w : ws) {
    bytes += w->rows * static_cast<int64_t>(w->row_bytes);
    elems += w->rows * w->cols;
  }
  prof->lap(p, bytes, elems * rows);
}

// Batches of at least this many tokens split their element-wise work over the pool.
constexpr int64_t kParallelTokens = 16;
}  // namespace

Transformer::Transformer(const ModelConfig& config, const ModelWeights& weights, ThreadPool& pool,
                       int64_t max_batch_tokens,
                       std::span<const std::span<const uint8_t>> file_mappings)
    : config_(config), weights_(weights), pool_(pool), max_batch_(std::max<int64_t>(1, max_batch_tokens)) {
  const auto& c = config_;
  rope_global_ = make_rope(c.rope);
  rope_local_ = make_rope(c.rope_local);
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
  positions_.resize(sz(1));
  slots_.resize(sz(1));
  rows_.resize(sz(1));
  pack_weights(file_mappings);
}

void Transformer::pack_weights(std::span<const std::span<const uint8_t>> file_mappings) {
  const char* off = std::getenv("HINGE_DISABLE_PACKING");
  if (off && std::string_view(off) == "1") return;
  AddElapsed timed(&pack_seconds_);
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  // Whether [b, b + n) lies in a file mapping.
  auto in_mapping = [&](const uint8_t* b, size_t n) {
    for (const auto& f : file_mappings)
      if (b >= f.data() && b + n <= f.data() + f.size()) return true;
    return false;
  };
  auto pack = [&](kernels::MatrixView& m, bool still_read) {
    const auto* b = static_cast<const uint8_t*>(m.data);
    const size_t n = static_cast<size_t>(m.rows) * m.row_bytes;
    const bool in_file = b != nullptr && in_mapping(b, n);
    if (auto p = kernels::pack_matrix(m, pool_)) {
      m.packed = p.get();
      packed_.push_back(std::move(p));
    } else if (!still_read && in_file) {
      // No packed layout for it: the GGUF layout, copied onto huge pages. Read from the file
      // mapping's 4 KiB pages, decode takes a TLB miss every 4 KiB (smollm-135m q8_0 in the
      // GGUF layout on Zen 3: 95.1 -> 98.7 tok/s with the copy, 8 of 10 interleaved rounds).
      auto copy = kernels::allocate_packed_bytes(n);
      uint8_t* dst = copy.get();
      // On the pool: the page faults and the zeroing of fresh pages are most of the cost.
      pool_.parallel_for(static_cast<int64_t>(n), int64_t{1} << 20, [&](int64_t lo, int64_t hi) {
        std::memcpy(dst + lo, b + lo, static_cast<size_t>(hi - lo));
      });
      m.data = copy.get();
      copies_.push_back(std::move(copy));
      copied_bytes_ += static_cast<int64_t>(n);
    } else {
      return;
    }
    // The GGUF copy in the file is no longer read by the matmul: drop its whole pages (never
    // for heap buffers, whose pages would come back as zeros).
    if (still_read || !in_file) return;
    const uintptr_t lo = (reinterpret_cast<uintptr_t>(b) + page - 1) / page * page;
    const uintptr_t hi = (reinterpret_cast<uintptr_t>(b) + n) / page * page;
    if (hi > lo && madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_DONTNEED) == 0)
      dropped_file_bytes_ += static_cast<int64_t>(hi - lo);
  };
  for (auto& l : weights_.layers)
    for (kernels::MatrixView* m : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down})
      pack(*m, false);
  // A tied output is token_embd, whose GGUF rows the embedding lookups keep reading: its pages
  // stay mapped (and counted by the memory budget as weights kept).
  pack(weights_.output, weights_.output.data == weights_.token_embd.data);
}

kernels::RopeTable Transformer::make_rope(const RopeConfig& r) {
  kernels::RopeSpec s;
  s.style = r.style;
  s.n_rot = r.n_rot;
  s.theta = r.theta;
  s.freq_scale = r.freq_scale;
  s.ext_factor = r.ext_factor;
  s.attn_factor = r.attn_factor;
  s.beta_fast = r.beta_fast;
  s.beta_slow = r.beta_slow;
  s.n_ctx_orig = r.n_ctx_orig;
  s.freq_factors = r.freq_factors.empty() ? nullptr : r.freq_factors.data();
  return kernels::make_rope_table(s);
}

kernels::PagedKvLayer Transformer::layer_view(kv::KvArena& arena, int32_t layer) const {
  const kv::KvSpec& s = arena.spec();
  kernels::PagedKvLayer v;
  v.base = arena.base();
  v.block_stride = arena.bytes_per_block();
  v.block_size = s.block_size_tokens;
  v.n_kv_heads = s.n_kv_heads;
  v.head_dim = s.head_dim;
  v.k_dtype = s.k_dtype;
  v.v_dtype = s.v_dtype;
  v.k_offset = arena.k_offset(layer);
  v.v_offset = arena.v_offset(layer);
  v.k_token_stride = arena.k_token_stride();
  v.v_token_stride = arena.v_token_stride();
  v.k_row_bytes = arena.k_row_bytes();
  v.v_row_bytes = arena.v_row_bytes();
  v.k_scale = arena.k_scale(layer) > 0 ? arena.k_scale(layer) : 1.0f;
  v.v_scale = arena.v_scale(layer) > 0 ? arena.v_scale(layer) : 1.0f;
  // Rotated blocks (the shift context policy) correct their scores for the stored K shift, and
  // undo the Hadamard transform of quantized K (forward_batch) around the query rotation.
  v.hadamard = kv::kv_dtype_is_quantized(s.k_dtype) && (s.head_dim & (s.head_dim - 1)) == 0;
  if (arena.k_shift_ready(layer)) {
    const size_t kv_dim = static_cast<size_t>(s.n_kv_heads) * s.head_dim;
    if (k_shift_stored_.size() < static_cast<size_t>(s.n_layers) * kv_dim)
      k_shift_stored_.resize(static_cast<size_t>(s.n_layers) * kv_dim);
    float* h = &k_shift_stored_[static_cast<size_t>(layer) * kv_dim];
    std::copy_n(arena.k_shift(layer), kv_dim, h);
    if (v.hadamard) kernels::hadamard_inplace(h, s.n_kv_heads, s.head_dim);
    v.k_shift = h;
  }
  return v;
}

Status Transformer::forward_batch(const ForwardBatch& b, kv::KvArena& arena, float* logits) {
  const auto& c = config_;
  const int64_t n = static_cast<int64_t>(b.token_ids.size());
  if (n == 0) return Status::Error("forward: no tokens");
  if (n > max_batch_)
    return Status::Errorf("forward: {} tokens exceed the batch capacity {}", n, max_batch_);
  const kv::KvSpec& s = arena.spec();
  const int64_t groups = s.num_groups();
  if (static_cast<int64_t>(b.slot_mapping.size()) != n * groups)
    return Status::Error("forward: slot_mapping size differs from tokens x KV groups");
  if (b.seqs.empty() || b.seqs.size() % static_cast<size_t>(groups) != 0)
    return Status::Error("forward: sequences are not given once per KV group");
  const size_t num_seqs = b.seqs.size() / static_cast<size_t>(groups);
  if (s.n_layers != c.n_layers || s.n_kv_heads != c.n_kv_heads || s.head_dim != c.head_dim)
    return Status::Error("forward: KV arena shape does not match the model");
  // A group may release blocks behind a window only if every layer in it has that window.
  group_window_.assign(static_cast<size_t>(groups), 0);
  for (size_t g = 0; g < s.groups.size(); ++g) {
    group_window_[g] = s.groups[g].window;
    for (int32_t l : s.groups[g].layers)
      if (s.groups[g].window != 0 && c.window_of(l) != s.groups[g].window)
        return Status::Errorf("forward: KV group {} has window {} but layer {} attends over {}", g,
                              s.groups[g].window, l, c.window_of(l));
  }
  for (int32_t t : b.token_ids)
    if (t < 0 || t >= c.n_vocab)
      return Status::Errorf("forward: a token id is out of range [0, {})", c.n_vocab);
  const int64_t total_slots = arena.num_blocks() * s.block_size_tokens;
  for (int64_t slot : b.slot_mapping)
    if (slot < 0 || slot >= total_slots)
      return Status::Errorf("forward: KV slot {} outside the arena", slot);
  for (size_t i = num_seqs; i < b.seqs.size(); ++i) {
    const kernels::AttentionSeq &a = b.seqs[i], &first = b.seqs[i % num_seqs];
    if (a.query_begin != first.query_begin || a.num_queries != first.num_queries ||
        a.first_position != first.first_position || a.num_blocks != first.num_blocks)
      return Status::Error("forward: the KV groups' sequences differ but for their block tables");
  }
  for (size_t i = 0; i < b.seqs.size(); ++i) {
    const kernels::AttentionSeq& seq = b.seqs[i];
    if (int64_t{seq.num_blocks} * s.block_size_tokens < int64_t{seq.first_position} + seq.num_queries)
      return Status::Error("forward: block table too short for the sequence");
    // Attention reads whole blocks through the table: an id outside the arena would read (and
    // the K/V of this step be read back from) memory that is not the arena's.
    if (seq.num_blocks > 0 && seq.block_table == nullptr)
      return Status::Error("forward: sequence without a block table");
    // A sliding-window group's entries wholly before its first query's window may be released
    // (-1): attention never reads them.
    const int32_t window = group_window_[i / num_seqs];
    const int64_t released_ok =
        window > 0 ? kernels::attention_first_key(seq.first_position, window) / s.block_size_tokens : 0;
    for (int32_t j = 0; j < seq.num_blocks; ++j)
      if (!(j < released_ok && seq.block_table[j] == -1) &&
          (seq.block_table[j] < 0 || seq.block_table[j] >= arena.num_blocks()))
        return Status::Errorf("forward: block id {} (entry {} of a block table) outside the arena "
                              "of {} blocks", seq.block_table[j], j, arena.num_blocks());
  }
  int64_t row = 0;
  for (const auto& seq : b.seqs.first(num_seqs)) {
    if (seq.query_begin != row || seq.num_queries < 1 || row + seq.num_queries > n)
      return Status::Error("forward: sequences must cover the batch rows in order");
    const int64_t end = int64_t{seq.first_position} + seq.num_queries;
    if (seq.first_position < 0 || end > c.context_length)
      return Status::Errorf("forward: position {} beyond the context size {}", end - 1,
                            c.context_length);
    for (int32_t j = 0; j < seq.num_queries; ++j)
      positions_[static_cast<size_t>(row + j)] = seq.first_position + j;
    row += seq.num_queries;
  }
  if (row != n) return Status::Error("forward: sequences must cover the batch rows in order");
  int32_t prev = -1;
  for (int32_t r : b.logit_rows) {
    if (r <= prev || r >= n) return Status::Error("forward: logit rows must ascend within the batch");
    prev = r;
  }

  // Decode steps (one token per sequence) and the others go to their own profiles, if any.
  prof_ = static_cast<size_t>(n) == num_seqs ? profile_ : prefill_profile_;
  if (prof_) prof_->begin_step(n);
  for (int64_t t = 0; t < n; ++t) {
    const auto& e = weights_.token_embd;
    float* x = &x_[t * c.dim];
    kernels::dequantize_row(e.type, static_cast<const uint8_t*>(e.data) + b.token_ids[t] * e.row_bytes,
                            x, c.dim);
    if (c.embed_scale != 0.0f)
      for (int64_t i = 0; i < c.dim; ++i) x[i] *= c.embed_scale;
  }
  if (prof_) prof_->lap(StepProfile::kEmbed);
  run_layers(b, arena);

  if (b.logit_rows.empty()) return Status::Ok();
  const int64_t m = static_cast<int64_t>(b.logit_rows.size());
  for (int64_t i = 0; i < m; ++i)
    kernels::rmsnorm(&xb_[i * c.dim], &x_[b.logit_rows[i] * c.dim], weights_.output_norm, c.dim,
                     c.rms_eps);
  kernels::matmul(weights_.output, xb_.data(), m, logits, pool_, mm_scratch_);
  if (weights_.output_bias || c.logit_scale != 0.0f) {
    const float inv_scale = c.logit_scale != 0.0f ? 1.0f / c.logit_scale : 1.0f;
    for (int64_t i = 0; i < m; ++i) {
      float* row = logits + i * c.n_vocab;
      for (int64_t v = 0; v < c.n_vocab; ++v) {
        float y = row[v];
        if (weights_.output_bias) y += weights_.output_bias[v];
        row[v] = y * inv_scale;
      }
    }
  }
  if (c.final_softcap != 0.0f) kernels::softcap_inplace(logits, m * c.n_vocab, c.final_softcap);
  lap_matmul(prof_, StepProfile::kOutput, m, {&weights_.output});
  return Status::Ok();
}

namespace {
// y = y * scale + bias over rows of `n` values (LinearExtras).
void apply_extras(float* y, int64_t n, const LinearExtras& x) {
  if (x.bias && x.bias_first)
    for (int64_t i = 0; i < n; ++i) y[i] += x.bias[i];
  if (x.scale != 1.0f)
    for (int64_t i = 0; i < n; ++i) y[i] *= x.scale;
  if (x.bias && !x.bias_first)
    for (int64_t i = 0; i < n; ++i) y[i] += x.bias[i];
}
}  // namespace

void Transformer::run_layers(const ForwardBatch& b, kv::KvArena& arena) {
  const auto& c = config_;
  const int64_t n = static_cast<int64_t>(b.token_ids.size());
  const int64_t dim = c.dim, q_dim = c.q_dim(), kv_dim = c.kv_dim(), ffn = c.ffn_dim;
  const int64_t hd = c.head_dim;
  const kv::KvSpec& s = arena.spec();
  const bool k_shift = kv::kv_dtype_is_quantized(s.k_dtype);
  // Per-token element-wise work (norms, RoPE, KV writes, activations, residual adds) runs on the
  // pool for prefill-sized batches: on one thread it would leave the others idle between
  // matmuls. Each token's values are computed by the same code either way.
  const bool split = n >= kParallelTokens && pool_.size() > 1;
  auto for_tokens = [&](auto&& fn) {
    if (split)
      pool_.parallel_for(n, 1, fn);
    else
      fn(int64_t{0}, n);
  };
  // A block's output [n, dim] in proj_: post-norm, residual scale, then added to x_.
  auto residual_add = [&](const float* post_norm) {
    for_tokens([&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t) {
        float* p = &proj_[t * dim];
        if (post_norm) kernels::rmsnorm(p, p, post_norm, dim, c.rms_eps);
        if (c.residual_scale != 0.0f)
          for (int64_t i = 0; i < dim; ++i) p[i] *= c.residual_scale;
      }
      kernels::add_inplace(&x_[t0 * dim], &proj_[t0 * dim], (t1 - t0) * dim);
    });
  };

  auto lap = [&](StepProfile::Phase p) {
    if (prof_) prof_->lap(p);
  };
  for (int32_t l = 0; l < static_cast<int32_t>(c.n_layers); ++l) {
    const LayerWeights& w = weights_.layers[static_cast<size_t>(l)];
    const kernels::RopeTable& rope = c.is_local(l) ? rope_local_ : rope_global_;
    const kernels::AttentionShape shape{.n_heads = static_cast<int32_t>(c.n_heads),
                                        .n_kv_heads = static_cast<int32_t>(c.n_kv_heads),
                                        .head_dim = static_cast<int32_t>(hd),
                                        .window = c.window_of(l),
                                        .scale = c.attn_scale,
                                        .softcap = c.attn_softcap,
                                        .rope_style = rope.style,
                                        .n_rot = static_cast<int32_t>(rope.n_rot)};
    // Attention block: the RMSNorm (if any) runs inside the QKV matmul's activation pass.
    const kernels::MatmulNorm attn_norm{w.attn_norm, c.rms_eps};
    const kernels::MatmulOut qkv[] = {{&w.wq, q_.data()}, {&w.wk, k_.data()}, {&w.wv, v_.data()}};
    kernels::matmul_shared_input(qkv, x_.data(), n, pool_, mm_scratch_,
                                 w.attn_norm ? &attn_norm : nullptr);
    lap_matmul(prof_, StepProfile::kQkv, n, {&w.wq, &w.wk, &w.wv});
    for_tokens([&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t) {
        float* q = &q_[t * q_dim];
        float* k = &k_[t * kv_dim];
        apply_extras(q, q_dim, w.xq);
        apply_extras(k, kv_dim, w.xk);
        apply_extras(&v_[t * kv_dim], kv_dim, w.xv);
        if (c.qk_norm == QkNorm::kPerHead) {
          for (int64_t h = 0; h < c.n_heads; ++h) kernels::rmsnorm(q + h * hd, q + h * hd, w.q_norm, hd, c.rms_eps);
          for (int64_t h = 0; h < c.n_kv_heads; ++h) kernels::rmsnorm(k + h * hd, k + h * hd, w.k_norm, hd, c.rms_eps);
        } else if (c.qk_norm == QkNorm::kFull) {
          kernels::rmsnorm(q, q, w.q_norm, q_dim, c.rms_eps);
          kernels::rmsnorm(k, k, w.k_norm, kv_dim, c.rms_eps);
        }
        const int64_t pos = positions_[static_cast<size_t>(t)];
        kernels::rope_ext_qk(q, c.n_heads, k, c.n_kv_heads, hd, pos, rope);
        if (c.attn_temp_scale != 0.0f) {
          const float f = std::log(std::floor(static_cast<float>(pos) /
                                              static_cast<float>(c.attn_temp_floor)) + 1.0f) *
                              c.attn_temp_scale + 1.0f;
          for (int64_t i = 0; i < q_dim; ++i) q[i] *= f;
        }
      }
    });
    // Quantized K: store k - mean (see KvArena::k_shift), calibrated from the first K written.
    // q_ is read by nothing but this layer's attention, so rotating it in place is safe.
    if (k_shift) {
      float* mu = arena.k_shift(l);
      if (!arena.k_shift_ready(l)) {
        std::fill_n(mu, kv_dim, 0.0f);
        for (int64_t t = 0; t < n; ++t)
          for (int64_t i = 0; i < kv_dim; ++i) mu[i] += k_[t * kv_dim + i];
        for (int64_t i = 0; i < kv_dim; ++i) mu[i] /= static_cast<float>(n);
        arena.set_k_shift_ready(l);
      }
      for (int64_t t = 0; t < n; ++t)
        for (int64_t i = 0; i < kv_dim; ++i) k_[t * kv_dim + i] -= mu[i];
      // And rotate keys and queries alike (an orthonormal Hadamard per head): scores are
      // unchanged, the quantizer sees energy spread over all channels (docs/kv-dtypes.md).
      if ((hd & (hd - 1)) == 0) {
        kernels::hadamard_inplace(k_.data(), n * c.n_kv_heads, hd);
        kernels::hadamard_inplace(q_.data(), n * c.n_heads, hd);
      }
    }
    // fp8: calibrate this layer's scales from the first K/V ever written.
    const size_t count = static_cast<size_t>(n * kv_dim);
    if (kv::kv_dtype_is_fp8(s.k_dtype) && arena.k_scale(l) == 0)
      arena.set_k_scale(l, kernels::kv_fp8_scale_for(s.k_dtype, k_.data(), count) * kFp8Headroom);
    if (kv::kv_dtype_is_fp8(s.v_dtype) && arena.v_scale(l) == 0)
      arena.set_v_scale(l, kernels::kv_fp8_scale_for(s.v_dtype, v_.data(), count) * kFp8Headroom);
    lap(StepProfile::kQkPrep);
    const kernels::PagedKvLayer view = layer_view(arena, l);
    // This layer's KV group: its slots and block tables.
    const size_t group = static_cast<size_t>(arena.group_of_layer(l));
    const auto slots = b.slot_mapping.subspan(group * static_cast<size_t>(n),
                                              static_cast<size_t>(n));
    const size_t num_seqs = b.seqs.size() / static_cast<size_t>(s.num_groups());
    const auto seqs = b.seqs.subspan(group * num_seqs, num_seqs);
    for_tokens([&](int64_t t0, int64_t t1) {  // distinct tokens write distinct slots
      kernels::paged_kv_write(view, &k_[t0 * kv_dim], &v_[t0 * kv_dim],
                              slots.subspan(static_cast<size_t>(t0), static_cast<size_t>(t1 - t0)));
    });
    lap(StepProfile::kKvWrite);
    kernels::paged_attention(view, seqs, shape, q_.data(), att_out_.data(), pool_, att_scratch_);
    lap(StepProfile::kAttention);
    kernels::matmul(w.wo, att_out_.data(), n, proj_.data(), pool_, mm_scratch_);
    if (w.xo.any())
      for_tokens([&](int64_t t0, int64_t t1) {
        for (int64_t t = t0; t < t1; ++t) apply_extras(&proj_[t * dim], dim, w.xo);
      });
    lap_matmul(prof_, StepProfile::kAttnOut, n, {&w.wo});
    residual_add(w.post_attn_norm);
    lap(StepProfile::kResidual);

    // Feed-forward block (gated: SwiGLU or GEGLU); its RMSNorm (if any) runs inside the
    // gate/up matmul's activation pass.
    const kernels::MatmulNorm ffn_norm{w.ffn_norm, c.rms_eps};
    const kernels::MatmulOut gate_up[] = {{&w.w_gate, gate_.data()}, {&w.w_up, up_.data()}};
    kernels::matmul_shared_input(gate_up, x_.data(), n, pool_, mm_scratch_,
                                 w.ffn_norm ? &ffn_norm : nullptr);
    lap_matmul(prof_, StepProfile::kGateUp, n, {&w.w_gate, &w.w_up});
    const bool gu_extras = w.x_gate.any() || w.x_up.any();
    for_tokens([&](int64_t t0, int64_t t1) {
      if (gu_extras)
        for (int64_t t = t0; t < t1; ++t) {
          apply_extras(&gate_[t * ffn], ffn, w.x_gate);
          apply_extras(&up_[t * ffn], ffn, w.x_up);
        }
      if (c.activation == Activation::kGeluTanh)
        kernels::geglu_tanh(&gate_[t0 * ffn], &up_[t0 * ffn], (t1 - t0) * ffn);
      else
        kernels::swiglu(&gate_[t0 * ffn], &up_[t0 * ffn], (t1 - t0) * ffn);
    });
    lap(StepProfile::kActivation);
    kernels::matmul(w.w_down, gate_.data(), n, proj_.data(), pool_, mm_scratch_);
    if (w.x_down.any())
      for_tokens([&](int64_t t0, int64_t t1) {
        for (int64_t t = t0; t < t1; ++t) apply_extras(&proj_[t * dim], dim, w.x_down);
      });
    lap_matmul(prof_, StepProfile::kDown, n, {&w.w_down});
    residual_add(w.post_ffn_norm);
    lap(StepProfile::kResidual);
  }
}

Status Transformer::forward(std::span<const int32_t> tokens, KvCache& cache, float* logits,
                           bool all_logits) {
  const int64_t n = static_cast<int64_t>(tokens.size());
  if (n == 0) return Status::Error("forward: no tokens");
  const int64_t limit = std::min(cache.max_tokens(), config_.context_length);
  if (cache.num_tokens() + n > limit)
    return Status::Errorf("sequence of {} tokens exceeds the context size {}",
                          cache.num_tokens() + n, limit);
  const auto& table = cache.block_table();
  for (int64_t start = 0; start < n; start += max_batch_) {
    const int64_t len = std::min(max_batch_, n - start);
    const int64_t pos0 = cache.num_tokens();
    for (int64_t i = 0; i < len; ++i) {
      slots_[static_cast<size_t>(i)] = pos0 + i;  // identity block table
      rows_[static_cast<size_t>(i)] = static_cast<int32_t>(i);
    }
    const kernels::AttentionSeq seq{.query_begin = 0,
                                    .num_queries = static_cast<int32_t>(len),
                                    .first_position = static_cast<int32_t>(pos0),
                                    .block_table = table.data(),
                                    .num_blocks = static_cast<int32_t>(table.size())};
    ForwardBatch b;
    b.token_ids = tokens.subspan(static_cast<size_t>(start), static_cast<size_t>(len));
    b.slot_mapping = std::span<const int64_t>(slots_.data(), static_cast<size_t>(len));
    b.seqs = std::span<const kernels::AttentionSeq>(&seq, 1);
    float* out = nullptr;
    if (all_logits) {
      b.logit_rows = std::span<const int32_t>(rows_.data(), static_cast<size_t>(len));
      out = logits + start * config_.n_vocab;
    } else if (start + len == n) {
      b.logit_rows = std::span<const int32_t>(rows_.data() + len - 1, 1);
      out = logits;
    }
    HINGE_RETURN_IF_ERROR(forward_batch(b, cache.arena(), out));
    cache.set_num_tokens(pos0 + len);
  }
  return Status::Ok();
}

}  // namespace hinge
