// Scalar reference of paged attention (the specification the SIMD kernel is tested against) and
// the argument checks both share. Rows are dequantized with kv_dequantize_row_ref; scores,
// the exact two-pass softmax and the weighted sum of V run in double; the result is rounded to
// float once. Slow and allocating: tests only.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "common/status.h"
#include "kernels/kv_quant.h"
#include "kernels/paged_attention.h"
#include "kernels/paged_attention_check.h"

namespace hinge::kernels {
namespace {


void check_scale(KvDtype t, float scale) {
  if (kv::kv_dtype_is_fp8(t)) HINGE_CHECK_MSG(std::isfinite(scale) && scale > 0.0f, "fp8 scale {}", scale);
}

}  // namespace

void check_paged_attention_args(const PagedKvLayer& kv, std::span<const AttentionSeq> seqs,
                                const AttentionShape& shape, const float* q, const float* out) {
  HINGE_CHECK_MSG(shape.n_kv_heads > 0 && shape.n_heads > 0 &&
                      shape.n_heads % shape.n_kv_heads == 0,
                  "n_heads {} n_kv_heads {}", shape.n_heads, shape.n_kv_heads);
  HINGE_CHECK_MSG(shape.head_dim >= 1 && shape.head_dim <= kKvMaxHeadDim, "head_dim {}",
                  shape.head_dim);
  HINGE_CHECK_MSG(shape.window >= 0 && std::isfinite(shape.scale) && shape.scale >= 0.0f &&
                      std::isfinite(shape.softcap) && shape.softcap >= 0.0f,
                  "window {} scale {} softcap {}", shape.window, shape.scale, shape.softcap);
  HINGE_CHECK_MSG(kv.n_kv_heads == shape.n_kv_heads && kv.head_dim == shape.head_dim,
                  "KV layer has {} heads of {}, attention wants {} of {}", kv.n_kv_heads,
                  kv.head_dim, shape.n_kv_heads, shape.head_dim);
  HINGE_CHECK(kv.base != nullptr && kv.block_size > 0);
  HINGE_CHECK(kv.k_row_bytes >= static_cast<int64_t>(kv_row_bytes(kv.k_dtype, kv.head_dim)));
  HINGE_CHECK(kv.v_row_bytes >= static_cast<int64_t>(kv_row_bytes(kv.v_dtype, kv.head_dim)));
  check_scale(kv.k_dtype, kv.k_scale);
  check_scale(kv.v_dtype, kv.v_scale);
  HINGE_CHECK(q != nullptr && out != nullptr);
  for (const AttentionSeq& s : seqs) {
    HINGE_CHECK_MSG(s.num_queries >= 1 && s.first_position >= 0 && s.query_begin >= 0,
                    "num_queries {} first_position {} query_begin {}", s.num_queries,
                    s.first_position, s.query_begin);
    const int64_t positions = int64_t{s.first_position} + s.num_queries;
    HINGE_CHECK_MSG(int64_t{s.num_blocks} * kv.block_size >= positions,
                    "{} blocks of {} tokens cannot hold {} positions", s.num_blocks,
                    kv.block_size, positions);
    HINGE_CHECK(s.block_table != nullptr);
    if (s.block_rotation)
      HINGE_CHECK_MSG(shape.n_rot >= 2 && shape.n_rot % 2 == 0 && shape.n_rot <= shape.head_dim,
                      "rotated blocks need an even n_rot in [2, head_dim], got {}", shape.n_rot);
    const int64_t used = (positions + kv.block_size - 1) / kv.block_size;
    // Blocks wholly before the first query's window are never read (they may be freed).
    const int64_t first = attention_first_key(s.first_position, shape.window) / kv.block_size;
    for (int64_t b = first; b < used; ++b) {
      HINGE_CHECK_MSG(s.block_table[b] >= 0, "block id {}", s.block_table[b]);
    }
  }
}

void paged_attention_ref(const PagedKvLayer& kv, std::span<const AttentionSeq> seqs,
                         const AttentionShape& shape, const float* q, float* out) {
  check_paged_attention_args(kv, seqs, shape, q, out);
  const int hd = shape.head_dim;
  const int group = shape.n_heads / shape.n_kv_heads;
  const int64_t row_stride = int64_t{shape.n_heads} * hd;
  const double sqrt_hd = std::sqrt(static_cast<double>(hd));
  std::vector<float> row(static_cast<size_t>(hd)), qrot(static_cast<size_t>(hd));
  std::vector<double> scores, acc(static_cast<size_t>(hd));

  for (const AttentionSeq& s : seqs) {
    auto slot_of = [&](int64_t pos) {
      return int64_t{s.block_table[pos / kv.block_size]} * kv.block_size + pos % kv.block_size;
    };
    for (int32_t j = 0; j < s.num_queries; ++j) {
      const int64_t len = int64_t{s.first_position} + j + 1;
      const int64_t lo = attention_first_key(len - 1, shape.window);
      scores.assign(static_cast<size_t>(len), 0.0);
      for (int32_t h = 0; h < shape.n_heads; ++h) {
        const int32_t kvh = h / group;
        const float* qh = q + (s.query_begin + j) * row_stride + int64_t{h} * hd;
        double max_score = -INFINITY;
        for (int64_t p = lo; p < len; ++p) {
          kv_dequantize_row_ref(kv.k_dtype, kv.k_row(slot_of(p), kvh), row.data(), hd,
                                kv.k_scale);
          const float* rot = s.block_rotation ? s.block_rotation[p / kv.block_size] : nullptr;
          double dot = 0.0;
          if (rot) {  // the query rotated by the block's offset, plus the K-shift correction
            std::copy(qh, qh + hd, qrot.begin());
            if (kv.hadamard) hadamard_inplace(qrot.data(), 1, hd);  // back to RoPE's basis
            rope_rotate_head(qrot.data(), shape.rope_style, shape.n_rot, rot);
            if (kv.hadamard) hadamard_inplace(qrot.data(), 1, hd);
            for (int i = 0; i < hd; ++i) dot += static_cast<double>(qrot[i]) * row[i];
            if (kv.k_shift)
              for (int i = 0; i < hd; ++i)
                dot += (static_cast<double>(qrot[i]) - qh[i]) * kv.k_shift[kvh * hd + i];
          } else {
            for (int i = 0; i < hd; ++i) dot += static_cast<double>(qh[i]) * row[i];
          }
          double sc = shape.scale > 0.0f ? dot * shape.scale : dot / sqrt_hd;
          if (shape.softcap > 0.0f) sc = shape.softcap * std::tanh(sc / shape.softcap);
          scores[static_cast<size_t>(p)] = sc;
          max_score = std::max(max_score, scores[static_cast<size_t>(p)]);
        }
        double sum = 0.0;
        for (int64_t p = lo; p < len; ++p) {
          double& sc = scores[static_cast<size_t>(p)];
          sc = std::exp(sc - max_score);
          sum += sc;
        }
        std::fill(acc.begin(), acc.end(), 0.0);
        for (int64_t p = lo; p < len; ++p) {
          kv_dequantize_row_ref(kv.v_dtype, kv.v_row(slot_of(p), kvh), row.data(), hd,
                                kv.v_scale);
          const double w = scores[static_cast<size_t>(p)] / sum;
          for (int i = 0; i < hd; ++i) acc[static_cast<size_t>(i)] += w * row[i];
        }
        float* oh = out + (s.query_begin + j) * row_stride + int64_t{h} * hd;
        for (int i = 0; i < hd; ++i) oh[i] = static_cast<float>(acc[static_cast<size_t>(i)]);
      }
    }
  }
}

}  // namespace hinge::kernels
