// Paged attention, SIMD + multithreaded, and the KV write (contract: paged_attention.h).
//
// For one query row, the G = n_heads / n_kv_heads query heads sharing a KV head are processed
// together: each K/V row is read and dequantized once into a small f32 tile (rows zero-padded
// to whole SIMD vectors; f32 rows are used in place when no padding is needed), scored against
// the G queries and accumulated with an online softmax, one tile of kKeyTile keys at a time:
//   m' = max(m, max_t s_t);  acc = acc * e^(m - m') + sum_t e^(s_t - m') v_t;  l likewise.
// Key tiles start at positions 0, kKeyTile, 2 kKeyTile, ... whatever the block size, and the
// operations of a (row, query head) read only its own query and K/V rows in a fixed order, so
// its result does not depend on the batch, the thread count, the unit it ran in or the thread
// that ran it (batch invariance). It does depend on the SIMD target (chosen once per process).
//
// Work units: a query row with all its KV heads (a token's rows of every head are contiguous,
// so one memory stream), or (row, KV head) when a batch has too few rows to feed the threads.
// Threads take contiguous ranges of units of about equal cost (keys x heads), a fixed function
// of the batch and thread count; below kSerialWork multiply-adds everything runs on the calling
// thread. Scratch: [fp8 decode tables][per-thread regions], grown only for a larger shape.
//
// The dequantization is bit-identical to kv_dequantize_row_ref on every target (tested).
#include "kernels/paged_attention.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "common/half.h"
#include "common/status.h"
#include "kernels/kv_quant.h"
#include "kernels/paged_attention_check.h"

#ifndef HINGE_KERNELS_PAGED_ATTENTION_JOB_
#define HINGE_KERNELS_PAGED_ATTENTION_JOB_
namespace hinge::kernels::paged_detail {

constexpr int kKeyTile = 32;  // keys per online-softmax step
// Query rows of one sequence sharing the K/V tiles (each converted once per unit): 8, not 4,
// measured in docs/kernels.md ("Work units").
constexpr int kUnitRows = 8;
// Keys per partition (flash-decoding): a row with more keys is computed as independent
// partitions of this many keys (partial softmax states), merged in order afterwards. A fixed
// function of the position, so results never depend on the batch or the thread count.
constexpr int64_t kKeyPartition = 512;

// What every unit of one paged_attention() call shares (read-only during the call).
struct Job {
  const PagedKvLayer* kv = nullptr;
  int32_t n_heads = 0;
  int32_t group = 0;  // query heads per KV head
  int32_t head_dim = 0;
  float score_div = 1.0f;  // scores are dot / score_div (sqrt(head_dim) or 1 / scale)
  float softcap = 0.0f;    // 0 = none
  int32_t window = 0;      // 0 = full causal
  RopeStyle rope_style = RopeStyle::kInterleaved;  // of AttentionSeq::block_rotation tables
  int32_t n_rot = 0;
  const float* q = nullptr;
  float* out = nullptr;
  const float* k_fp8_table = nullptr;  // 256 entries: decode(byte) * k_scale (fp8 only)
  const float* v_fp8_table = nullptr;
  // Rows whose keys span several partitions: partial states [m, l, acc[head_dim]] per
  // (partition, head) at partials + partial_offset[q_row] + ((p - first_p) * n_heads + head) *
  // (head_dim + 2), first_p the row's first partition.
  float* partials = nullptr;
  const int64_t* partial_offset = nullptr;
};

}  // namespace hinge::kernels::paged_detail
#endif

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/paged_attention.cpp"
// The order matters: each -inl header uses the ones before it.
// clang-format off
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>
#include <hwy/contrib/math/math-inl.h>

#include "kernels/simd_util-inl.h"
#include "kernels/kv_row_dequant-inl.h"
#include "kernels/attention_math-inl.h"
// clang-format on

HWY_BEFORE_NAMESPACE();
namespace hinge::kernels {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using paged_detail::Job;
using paged_detail::kKeyPartition;
using paged_detail::kKeyTile;
using paged_detail::kUnitRows;
using DF = hn::ScalableTag<float>;

HWY_INLINE size_t RoundUp(size_t x, size_t m) {
  return (x + m - 1) / m * m;
}

// Per-thread scratch, in floats, for units of up to `heads` query heads: their padded queries,
// accumulators and softmax state, plus one head's scores and one K or V tile.
struct Layout {
  size_t hdp, tp, sp;  // padded head_dim, padded key tile, stride of a head's scores (tp plus
                       // room for a group of 4 keys starting anywhere in the tile)
  size_t q, acc, m, l, scores, tile, qr, total;  // offsets and size (multiples of 16 floats)
  Layout(int heads, int group, int head_dim) {
    const size_t n = hn::Lanes(DF());
    const size_t h = static_cast<size_t>(heads);
    hdp = RoundUp(static_cast<size_t>(head_dim), n);
    tp = RoundUp(kKeyTile, n);
    sp = RoundUp(tp + 4, n);
    q = 0;
    acc = q + h * hdp;
    m = acc + h * hdp;
    l = m + h;
    scores = RoundUp(l + h, 16);
    tile = RoundUp(scores + static_cast<size_t>(group) * sp, 16);
    qr = RoundUp(tile + kKeyTile * hdp, 16);  // one group's rotated queries (block_rotation)
    total = RoundUp(qr + static_cast<size_t>(group) * hdp, 16);
  }
};

size_t ThreadScratchFloats(int heads, int group, int head_dim) {
  return Layout(heads * kUnitRows, group * kUnitRows, head_dim).total;
}

// Where the K and V rows of KV head 0 of tile positions [t0, t0 + n) are; head h is
// h * row_bytes further. One division per tile (one per row would cost more than its math).
struct TileTokens {
  const uint8_t* k[kKeyTile];
  const uint8_t* v[kKeyTile];
};

HWY_INLINE void LocateTokens(const PagedKvLayer& kv, const int32_t* block_table, int64_t t0,
                             size_t n, TileTokens& tok) {
  const int64_t bs = kv.block_size;
  int64_t b = t0 / bs, o = t0 % bs;
  const uint8_t* block = kv.base + block_table[b] * kv.block_stride;
  for (size_t t = 0; t < n; ++t) {
    tok.k[t] = block + kv.k_offset + o * kv.k_token_stride;
    tok.v[t] = block + kv.v_offset + o * kv.v_token_stride;
    if (++o == bs && t + 1 < n) {
      o = 0;
      block = kv.base + block_table[++b] * kv.block_stride;
    }
  }
}

// Starts loading [p + begin, p + end) of each token into L2 (a tile of every head of a unit
// can exceed L1).
HWY_INLINE void PrefetchSpans(const uint8_t* const* tokens, size_t n, int64_t begin, int64_t end) {
  for (size_t t = 0; t < n; ++t) {
    const uint8_t* p = tokens[t];
    for (int64_t off = begin; off < end; off += 64) __builtin_prefetch(p + off, 0, 2);
    __builtin_prefetch(p + end - 1, 0, 2);
  }
}

// Points rows_f32[t] at the row (tokens[t] + head_off) as f32 with hdp floats: straight into
// the arena for f32 rows when no padding is needed (head_dim a multiple of the vector) and the
// row is 4-aligned, else at its dequantized copy in `tile`. Same values either way.
HWY_INLINE void LoadTile(KvDtype dtype, const uint8_t* const* tokens, int64_t head_off, size_t n,
                         const float* fp8_table, float fp8_scale, size_t hd, size_t hdp,
                         float* HWY_RESTRICT tile, const float** rows_f32) {
  const bool direct = dtype == KvDtype::kF32 && hd == hdp;
  for (size_t t = 0; t < n; ++t) {
    const uint8_t* row = tokens[t] + head_off;
    if (direct && reinterpret_cast<uintptr_t>(row) % alignof(float) == 0) {
      rows_f32[t] = reinterpret_cast<const float*>(row);
    } else {
      DequantRow(dtype, row, fp8_table, fp8_scale, tile + t * hdp, hd, hdp);
      rows_f32[t] = tile + t * hdp;
    }
  }
}

// Scores of one row's `group` query heads (of KV head kvh) against tile keys [nb, ne) (tile
// starting at key t0) when the sequence has rotated blocks: one ScoreRange per run of keys
// whose blocks share a rotation, rotated runs with their queries rotated (into qr) and the
// K-shift correction added; then FinishScores.
HWY_INLINE void ScoreRotated(const Job& job, const AttentionSeq& seq, const float* q, size_t group,
                             int32_t kvh, const float* const* kf, int64_t t0, size_t nb, size_t ne,
                             size_t hdp, size_t tp, size_t sp, float* HWY_RESTRICT qr,
                             float* HWY_RESTRICT s) {
  const PagedKvLayer& kv = *job.kv;
  const int64_t bs = kv.block_size;
  const size_t hd = static_cast<size_t>(job.head_dim);
  size_t b = nb;
  while (b < ne) {
    const int64_t blk = (t0 + static_cast<int64_t>(b)) / bs;
    const float* rot = seq.block_rotation[blk];
    size_t e = std::min<size_t>(ne, static_cast<size_t>((blk + 1) * bs - t0));
    while (e < ne && seq.block_rotation[(t0 + static_cast<int64_t>(e)) / bs] == rot)
      e = std::min<size_t>(ne, e + static_cast<size_t>(bs));
    if (rot == nullptr) {
      ScoreRange(q, group, kf, b, e, hdp, sp, job.score_div, s);
    } else {
      std::memcpy(qr, q, group * hdp * sizeof(float));
      for (size_t g = 0; g < group; ++g) {
        float* h = qr + g * hdp;
        if (kv.hadamard) hadamard_inplace(h, 1, static_cast<int64_t>(hd));  // RoPE's basis
        rope_rotate_head(h, job.rope_style, job.n_rot, rot);
        if (kv.hadamard) hadamard_inplace(h, 1, static_cast<int64_t>(hd));
      }
      ScoreRange(qr, group, kf, b, e, hdp, sp, job.score_div, s);
      if (kv.k_shift) {
        const float* shift = kv.k_shift + static_cast<size_t>(kvh) * hd;
        for (size_t g = 0; g < group; ++g) {
          float bias = 0.0f;
          for (size_t i = 0; i < hd; ++i) bias += (qr[g * hdp + i] - q[g * hdp + i]) * shift[i];
          bias /= job.score_div;
          for (size_t t = b; t < e; ++t) s[g * sp + t] += bias;
        }
      }
    }
    b = e;
  }
  FinishScores(group, nb, ne, tp, sp, job.softcap, s);
}

// One unit: query rows [row, row + nrows) of `seq` (nrows <= kUnitRows), the query heads of KV
// heads [kvh_begin, kvh_end), keys [key_begin, key_begin + kKeyPartition) (a partition; rows
// with fewer keys end earlier, rows with none skip it). A row whose keys all fit one partition
// gets its output; the others leave their partial state in job.partials. The rows share every K/V
// tile load (and its conversion to f32); each row stops at its own causal length. A row's result is
// the same whatever the unit it is computed in (same tiles, same operations). `scratch`:
// ThreadScratchFloats floats.
void AttendUnit(const Job& job, const AttentionSeq& seq, int32_t row, int32_t nrows,
                int32_t kvh_begin, int32_t kvh_end, int64_t key_begin,
                float* HWY_RESTRICT scratch) {
  const DF df;
  const size_t N = hn::Lanes(df);
  const PagedKvLayer& kv = *job.kv;
  const size_t group = static_cast<size_t>(job.group);
  const size_t hd = static_cast<size_t>(job.head_dim);
  const Layout lay(job.n_heads * kUnitRows, job.group * kUnitRows, job.head_dim);
  const size_t hdp = lay.hdp, tp = lay.tp;
  float* qp = scratch + lay.q;
  float* acc = scratch + lay.acc;
  float* m = scratch + lay.m;
  float* l = scratch + lay.l;
  float* scores = scratch + lay.scores;
  float* tile = scratch + lay.tile;

  // Query heads [head0, head0 + heads) of each row; virtual head r * heads + i is row r's head i.
  const size_t heads = static_cast<size_t>(kvh_end - kvh_begin) * group;
  const size_t head0 = static_cast<size_t>(kvh_begin) * group;
  const size_t rows = static_cast<size_t>(nrows);
  const size_t row_floats = static_cast<size_t>(job.n_heads) * hd;
  for (size_t r = 0; r < rows; ++r) {
    const int64_t q_row = int64_t{seq.query_begin} + row + static_cast<int64_t>(r);
    const float* q = job.q + static_cast<size_t>(q_row) * row_floats + head0 * hd;
    for (size_t i = 0; i < heads; ++i) {
      const size_t vi = r * heads + i;
      float* qi = qp + vi * hdp;
      std::memcpy(qi, q + i * hd, hd * sizeof(float));
      std::fill(qi + hd, qi + hdp, 0.0f);
      std::fill(acc + vi * hdp, acc + (vi + 1) * hdp, 0.0f);
      m[vi] = -INFINITY;
      l[vi] = 0.0f;
    }
  }

  // Tokens are scattered over blocks: locate and prefetch a tile ahead (the unit's heads of a
  // token are one contiguous span) so the misses overlap instead of stalling row by row.
  // Row r attends to keys [lo_r, len_r) of this partition; rows are consecutive positions, so
  // the first row has the smallest range start. Tiles start at key_begin + i * kKeyTile (a
  // function of the position alone); keys before the first row's window are never located or
  // loaded (their blocks may be back in the pool), keys before a row's own window score -inf.
  const int64_t len0 = int64_t{seq.first_position} + row + 1;  // the first row's keys
  const int64_t key_end = key_begin + kKeyPartition;
  const int64_t len = std::min(len0 + nrows - 1, key_end);  // keys this unit reads
  const int64_t lo0 = std::max(key_begin, attention_first_key(len0 - 1, job.window));
  const int64_t k_span0 = kvh_begin * kv.k_row_bytes, k_span1 = kvh_end * kv.k_row_bytes;
  const int64_t v_span0 = kvh_begin * kv.v_row_bytes, v_span1 = kvh_end * kv.v_row_bytes;
  TileTokens tok[2];
  const float* kf[kKeyTile];  // the tile's rows of one head as f32
  const float* vf[kKeyTile];
  // A unit of one query row (decode) reads f16, bf16 and int8 rows of head_dim a multiple of
  // the vector in place (kr, vr) instead: the same values, converted in registers by the loops
  // that use them (measured on Zen 3, smollm-135m's shape, 1 x 2048 keys, 1 thread: the tile's
  // conversion loop held a third of the samples). Rows of a prefill unit share the tile.
  const bool in_place = rows == 1 && hd == hdp;
  const bool k_in_place =
      in_place && KvRowsInPlace<kKeyTile>::Reads(kv.k_dtype) && seq.block_rotation == nullptr;
  const bool v_in_place = in_place && KvRowsInPlace<kKeyTile>::Reads(kv.v_dtype);
  KvRowsInPlace<kKeyTile> kr, vr;
  kr.dtype = kv.k_dtype;
  vr.dtype = kv.v_dtype;
  int cur = 0;
  const int64_t t_first = key_begin + (lo0 - key_begin) / kKeyTile * kKeyTile;
  for (int64_t t0 = t_first; t0 < len; t0 += kKeyTile, cur ^= 1) {
    const size_t n = static_cast<size_t>(std::min<int64_t>(kKeyTile, len - t0));
    const size_t s0 = static_cast<size_t>(std::max<int64_t>(0, lo0 - t0));  // first loaded key
    if (t0 == t_first) {
      LocateTokens(kv, seq.block_table, t0 + static_cast<int64_t>(s0), n - s0, tok[cur]);
      PrefetchSpans(tok[cur].k, n - s0, k_span0, k_span1);
      PrefetchSpans(tok[cur].v, n - s0, v_span0, v_span1);
    }
    // The next tile is prefetched a head's K rows before its scores and its V rows before its
    // weighted sum: one burst of the whole tile here filled the miss buffers and the core
    // waited in the prefetch loop itself (docs/kernels.md, "Attention over paged KV").
    const int64_t t1 = t0 + kKeyTile;
    const size_t n1 =
        t1 < len ? static_cast<size_t>(std::min<int64_t>(kKeyTile, len - t1)) : size_t{0};
    if (n1 > 0) LocateTokens(kv, seq.block_table, t1, n1, tok[cur ^ 1]);
    // Keys [b, e) of this tile row r attends to (rows with none skip the tile).
    size_t nb[kUnitRows], ne[kUnitRows];
    for (size_t r = 0; r < rows; ++r) {
      const int64_t len_r = len0 + static_cast<int64_t>(r);
      const int64_t lo_r = std::max(key_begin, attention_first_key(len_r - 1, job.window));
      const int64_t hi = std::min(len_r, key_end);
      nb[r] = static_cast<size_t>(std::clamp<int64_t>(lo_r - t0, 0, static_cast<int64_t>(n)));
      ne[r] = static_cast<size_t>(std::clamp<int64_t>(hi - t0, 0, static_cast<int64_t>(n)));
      if (ne[r] < nb[r]) ne[r] = nb[r];
    }
    for (int32_t kvh = kvh_begin; kvh < kvh_end; ++kvh) {
      const size_t i0 = static_cast<size_t>(kvh - kvh_begin) * group;  // first query head
      if (n1 > 0)
        PrefetchSpans(tok[cur ^ 1].k, n1, kvh * kv.k_row_bytes, (kvh + 1) * kv.k_row_bytes);
      if (k_in_place)
        kr.Point(tok[cur].k, kvh * kv.k_row_bytes, n - s0, s0);
      else
        LoadTile(kv.k_dtype, tok[cur].k, kvh * kv.k_row_bytes, n - s0, job.k_fp8_table, kv.k_scale,
                 hd, hdp, tile + s0 * hdp, kf + s0);
      for (size_t r = 0; r < rows; ++r) {
        if (ne[r] == nb[r]) continue;
        const size_t v0 = r * heads + i0;  // the group's first virtual head
        if (k_in_place)
          kr.With(0, [&](const auto* k_rows, const float* sc) {
            ScoreTileHeads(qp + v0 * hdp, group, k_rows, nb[r], ne[r], hdp, tp, lay.sp,
                           job.score_div, job.softcap, scores + r * group * lay.sp, sc);
          });
        else if (seq.block_rotation == nullptr)
          ScoreTileHeads(qp + v0 * hdp, group, kf, nb[r], ne[r], hdp, tp, lay.sp, job.score_div,
                         job.softcap, scores + r * group * lay.sp);
        else
          ScoreRotated(job, seq, qp + v0 * hdp, group, kvh, kf, t0, nb[r], ne[r], hdp, tp, lay.sp,
                       scratch + lay.qr, scores + r * group * lay.sp);
        for (size_t g = 0; g < group; ++g)
          SoftmaxStep(scores + (r * group + g) * lay.sp, tp, hdp, m[v0 + g], l[v0 + g],
                      acc + (v0 + g) * hdp);
      }
      if (n1 > 0)
        PrefetchSpans(tok[cur ^ 1].v, n1, kvh * kv.v_row_bytes, (kvh + 1) * kv.v_row_bytes);
      if (v_in_place)
        vr.Point(tok[cur].v, kvh * kv.v_row_bytes, n - s0, s0);
      else
        LoadTile(kv.v_dtype, tok[cur].v, kvh * kv.v_row_bytes, n - s0, job.v_fp8_table, kv.v_scale,
                 hd, hdp, tile + s0 * hdp, vf + s0);
      for (size_t r = 0; r < rows; ++r) {
        if (ne[r] == nb[r]) continue;
        // Keys before nb[r] weigh exactly 0 (e^-inf): skipping them changes nothing.
        float* const a = acc + (r * heads + i0) * hdp;
        const float* const p = scores + r * group * lay.sp + nb[r];
        if (v_in_place)
          vr.With(nb[r], [&](const auto* v_rows, const float* sc) {
            AccumulateHeads(p, lay.sp, group, v_rows, ne[r] - nb[r], hdp, a, sc);
          });
        else
          AccumulateHeads(p, lay.sp, group, vf + nb[r], ne[r] - nb[r], hdp, a);
      }
    }
  }

  for (size_t r = 0; r < rows; ++r) {
    const int64_t q_row = int64_t{seq.query_begin} + row + static_cast<int64_t>(r);
    const int64_t len_r = len0 + static_cast<int64_t>(r);
    const int64_t lo_r = attention_first_key(len_r - 1, job.window);
    if (std::min(len_r, key_end) <= std::max(lo_r, key_begin)) continue;  // none here
    const int64_t first_p = lo_r / kKeyPartition;
    if ((len_r - 1) / kKeyPartition > first_p) {  // a partial state, merged after all units ran
      float* part =
          job.partials + job.partial_offset[q_row] +
          static_cast<size_t>(key_begin / kKeyPartition - first_p) * job.n_heads * (hd + 2);
      for (size_t i = 0; i < heads; ++i) {
        float* dst = part + (head0 + i) * (hd + 2);
        dst[0] = m[r * heads + i];
        dst[1] = l[r * heads + i];
        std::memcpy(dst + 2, acc + (r * heads + i) * hdp, hd * sizeof(float));
      }
      continue;
    }
    float* out = job.out + static_cast<size_t>(q_row) * row_floats + head0 * hd;
    for (size_t i = 0; i < heads; ++i) {
      float* a = acc + (r * heads + i) * hdp;
      const auto vl = hn::Set(df, l[r * heads + i]);
      for (size_t j = 0; j < hdp; j += N) hn::StoreU(hn::Div(hn::LoadU(df, a + j), vl), df, a + j);
      std::memcpy(out + i * hd, a, hd * sizeof(float));
    }
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace hinge::kernels
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace hinge::kernels {

HWY_EXPORT(ThreadScratchFloats);
HWY_EXPORT(AttendUnit);

namespace {

// Below this many multiply-adds a call runs on the calling thread: waking the workers costs
// microseconds.
using paged_detail::kKeyPartition;

constexpr int64_t kSerialWork = int64_t{1} << 16;
// Query rows per thread below which units are split per KV head (a unit's worth each).
constexpr int64_t kRowsPerThread = paged_detail::kUnitRows;
constexpr size_t kFp8TableFloats = 2 * 256;
constexpr size_t kAlignFloats = 16;  // 64 bytes

void fill_fp8_table(KvDtype t, float scale, float* table) {
  for (int b = 0; b < 256; ++b) {
    const auto byte = static_cast<uint8_t>(b);
    table[b] = (t == KvDtype::kFp8E4m3 ? fp8_e4m3_to_f32(byte) : fp8_e5m2_to_f32(byte)) * scale;
  }
}

// Keys read by all query rows of `s`, per KV head: sum_j (first_position + j + 1), each term
// capped at the window.
int64_t seq_keys(const AttentionSeq& s, int32_t window) {
  const int64_t n = s.num_queries;
  if (window <= 0) return n * s.first_position + n * (n + 1) / 2;
  int64_t keys = 0;
  for (int64_t j = 0; j < n; ++j) keys += std::min<int64_t>(s.first_position + j + 1, window);
  return keys;
}

// Keys of row position `pos` (keys [lo, pos + 1)) inside partition p.
int64_t partition_keys(int64_t pos, int32_t window, int64_t p) {
  const int64_t lo = std::max(attention_first_key(pos, window), p * kKeyPartition);
  const int64_t hi = std::min(pos + 1, (p + 1) * kKeyPartition);
  return std::max<int64_t>(0, hi - lo);
}

}  // namespace

void paged_attention(const PagedKvLayer& kv, std::span<const AttentionSeq> seqs,
                     const AttentionShape& shape, const float* q, float* out, ThreadPool& pool,
                     AttentionScratch& scratch) {
  check_paged_attention_args(kv, seqs, shape, q, out);
  const int32_t n_kv = shape.n_kv_heads;
  const int32_t group = shape.n_heads / n_kv;

  int64_t total_keys = 0;  // cost of the whole call, in (key, KV head) pairs
  const int32_t window = shape.window;
  for (const AttentionSeq& s : seqs) total_keys += seq_keys(s, window) * n_kv;
  if (total_keys == 0) return;
  const int64_t work = total_keys * group * shape.head_dim * 2;
  const bool serial = work < kSerialWork || pool.size() == 1;

  // A unit is up to kUnitRows consecutive query rows of a sequence with all their heads (a
  // token's K/V rows of every head are contiguous: fewer, longer memory streams; the rows share
  // each K/V tile's load and conversion), or one KV head of one row when there are too few rows
  // to keep the threads busy. A row's result is the same either way.
  int64_t total_rows = 0;
  for (const AttentionSeq& s : seqs) total_rows += s.num_queries;
  const int32_t unit_heads = serial || total_rows >= kRowsPerThread * pool.size() ? n_kv : 1;

  // Partial-state storage for rows whose keys span partitions (indexed by batch row).
  const size_t rec = static_cast<size_t>(shape.head_dim) + 2;  // [m, l, acc[head_dim]]
  int64_t max_row = 0;
  for (const AttentionSeq& s : seqs)
    max_row = std::max<int64_t>(max_row, s.query_begin + s.num_queries);
  if (scratch.partial_offset.size() < static_cast<size_t>(max_row))
    scratch.partial_offset.resize(static_cast<size_t>(max_row));
  size_t partial_floats = 0;
  bool any_partitioned = false;
  for (const AttentionSeq& s : seqs)
    for (int32_t j = 0; j < s.num_queries; ++j) {
      const int64_t pos = int64_t{s.first_position} + j;
      const int64_t p0 = attention_first_key(pos, window) / kKeyPartition;
      const int64_t p1 = pos / kKeyPartition;
      if (p1 == p0) continue;
      any_partitioned = true;
      scratch.partial_offset[static_cast<size_t>(s.query_begin + j)] =
          static_cast<int64_t>(partial_floats);
      partial_floats += static_cast<size_t>(p1 - p0 + 1) * static_cast<size_t>(shape.n_heads) * rec;
    }
  if (scratch.partials.size() < partial_floats) scratch.partials.resize(partial_floats);

  const size_t per_thread =
      HWY_DYNAMIC_DISPATCH(ThreadScratchFloats)(shape.n_heads, group, shape.head_dim);
  const size_t need =
      kAlignFloats + kFp8TableFloats + static_cast<size_t>(pool.capacity()) * per_thread;
  if (scratch.buf.size() < need) scratch.buf.resize(need);
  float* base = scratch.buf.data();
  base += (kAlignFloats - (reinterpret_cast<uintptr_t>(base) / sizeof(float)) % kAlignFloats) %
          kAlignFloats;
  float* tables = base;
  float* thread_base = base + kFp8TableFloats;

  paged_detail::Job job;
  job.kv = &kv;
  job.n_heads = shape.n_heads;
  job.group = group;
  job.head_dim = shape.head_dim;
  job.score_div =
      shape.scale > 0.0f ? 1.0f / shape.scale : std::sqrt(static_cast<float>(shape.head_dim));
  job.softcap = shape.softcap;
  job.window = window;
  job.rope_style = shape.rope_style;
  job.n_rot = shape.n_rot;
  job.q = q;
  job.out = out;
  job.partials = scratch.partials.data();
  job.partial_offset = scratch.partial_offset.data();
  if (kv::kv_dtype_is_fp8(kv.k_dtype)) {
    fill_fp8_table(kv.k_dtype, kv.k_scale, tables);
    job.k_fp8_table = tables;
  }
  if (kv::kv_dtype_is_fp8(kv.v_dtype)) {
    fill_fp8_table(kv.v_dtype, kv.v_scale, tables + 256);
    job.v_fp8_table = tables + 256;
  }

  // Thread tid runs the units whose cumulative cost starts in [begin, end): contiguous ranges in
  // (sequence, row, KV head) order, a fixed function of the batch and the thread count. A unit's
  // cost is its keys times its KV heads.
  auto body = [&](int tid, int nt) {
    float* ts = thread_base + static_cast<size_t>(tid) * per_thread;
    const int64_t begin = total_keys * tid / nt, end = total_keys * (tid + 1) / nt;
    int64_t c = 0;
    for (const AttentionSeq& s : seqs) {
      if (c >= end) return;
      const int64_t cost = seq_keys(s, window) * n_kv;
      if (c + cost <= begin) {
        c += cost;
        continue;
      }
      // Row units take up to kUnitRows rows (they share the K/V tile loads); head units one.
      const int32_t max_rows = unit_heads == n_kv ? paged_detail::kUnitRows : 1;
      for (int32_t j = 0; j < s.num_queries && c < end;) {
        const int32_t rows = std::min(max_rows, s.num_queries - j);
        const int64_t pos0 = int64_t{s.first_position} + j;  // position of row j
        const int64_t p_begin = attention_first_key(pos0, window) / kKeyPartition;
        const int64_t p_end = (pos0 + rows - 1) / kKeyPartition + 1;
        for (int64_t p = p_begin; p < p_end && c < end; ++p) {
          int64_t keys = 0;  // of the rows in partition p
          for (int32_t r = 0; r < rows; ++r) keys += partition_keys(pos0 + r, window, p);
          if (keys == 0) continue;
          for (int32_t h = 0; h < n_kv; h += unit_heads, c += keys * unit_heads) {
            if (c >= begin && c < end) {
              HWY_DYNAMIC_DISPATCH(AttendUnit)
              (job, s, j, rows, h, h + unit_heads, p * kKeyPartition, ts);
            }
          }
        }
        j += rows;
      }
    }
  };
  if (serial) {
    body(0, 1);
  } else {
    pool.run(body);
  }
  if (!any_partitioned) return;

  // Merge the partitions of long rows, in partition order: m = max m_p, then
  // out = sum_p e^(m_p - m) acc_p / sum_p e^(m_p - m) l_p.
  const int64_t hd = shape.head_dim;
  auto merge = [&](const AttentionSeq& s, int32_t j) {
    const int64_t pos = int64_t{s.first_position} + j;
    const int64_t parts =
        pos / kKeyPartition - attention_first_key(pos, window) / kKeyPartition + 1;
    if (parts == 1) return;
    const int64_t q_row = int64_t{s.query_begin} + j;
    const float* part = job.partials + job.partial_offset[q_row];
    float* o = out + q_row * shape.n_heads * hd;
    for (int32_t h = 0; h < shape.n_heads; ++h) {
      float m = -INFINITY;
      for (int64_t p = 0; p < parts; ++p)
        m = std::max(m, part[(p * shape.n_heads + h) * static_cast<int64_t>(rec)]);
      float l = 0.0f;
      float* oh = o + h * hd;
      std::fill(oh, oh + hd, 0.0f);
      for (int64_t p = 0; p < parts; ++p) {
        const float* st = part + (p * shape.n_heads + h) * static_cast<int64_t>(rec);
        const float w = std::exp(st[0] - m);
        l += w * st[1];
        for (int64_t d = 0; d < hd; ++d) oh[d] += w * st[2 + d];
      }
      const float inv = 1.0f / l;
      for (int64_t d = 0; d < hd; ++d) oh[d] *= inv;
    }
  };
  if (serial) {
    for (const AttentionSeq& s : seqs)
      for (int32_t j = 0; j < s.num_queries; ++j) merge(s, j);
    return;
  }
  pool.run([&](int tid, int nt) {  // rows split evenly by index across threads
    int64_t i = 0;
    for (const AttentionSeq& s : seqs)
      for (int32_t j = 0; j < s.num_queries; ++j, ++i)
        if (i % nt == tid) merge(s, j);
  });
}

}  // namespace hinge::kernels
#endif  // HWY_ONCE
