// matmul: quantizes the activations once per call (into scratch), then splits the output rows
// into contiguous chunks that the pool's threads claim from a shared counter, running the
// per-type SIMD kernel on each chunk.
//
// Why claimed chunks rather than one fixed range per thread: when a core is busy with something
// else (other processes, an OS tick, a slower core), a static split makes everyone wait for the
// slowest thread; with 2 chunks per thread the others pick up part of its share. Chunks stay
// large (>= 64K weights, usually hundreds of rows), so each thread streams long contiguous runs:
// measured on llama-1b q8_0 decode, 2 chunks per thread read 23.2 GB/s, 4 chunks 22.1, 8 21.7.
#include "kernels/matmul.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <new>
#include <span>

#include "common/status.h"
#include "kernels/cpu_features.h"
#include "kernels/matmul_kernels.h"
#include "kernels/matmul_packed.h"
#include "kernels/ops.h"
#include "kernels/quant.h"
#include "kernels/quant_block.h"

namespace hinge::kernels {
namespace {

// Rows per chunk are a multiple of this: keeps each thread's y writes on separate cache lines.
constexpr int64_t kRowAlign = 16;
// Each chunk has at least this many weight elements: waking a worker costs microseconds, more
// than a whole small matmul (e.g. a 64x64 layer of a test model), which then runs inline.
constexpr int64_t kMinElemsPerChunk = int64_t{64} << 10;
constexpr int64_t kChunksPerThread = 2;

size_t round_up(size_t n, size_t to) {
  return (n + to - 1) / to * to;
}

// `bytes` of the call's scratch, 64-byte aligned (grown when a larger shape needs more).
uint8_t* aligned_scratch(MatmulScratch& scratch, size_t bytes) {
  if (scratch.bytes.size() < bytes + 64) scratch.bytes.resize(bytes + 64);
  uint8_t* base = scratch.bytes.data();
  return base + (64 - reinterpret_cast<uintptr_t>(base) % 64) % 64;
}

// The activation rows a matmul quantizes: x as given, or normalized row by row into scratch
// (MatmulNorm) by the thread that quantizes the row.
class InputRows {
 public:
  InputRows(const float* x, int64_t num_tokens, int64_t cols, const MatmulNorm* norm,
            MatmulScratch& scratch)
      : x_(x), cols_(cols), norm_(norm) {
    if (norm_ == nullptr) return;
    const size_t need = static_cast<size_t>(num_tokens * cols);
    if (scratch.normed.size() < need) scratch.normed.resize(need);
    normed_ = scratch.normed.data();
  }
  // Row t, normalized first when there is a norm (call once per row per matmul).
  const float* row(int64_t t) const {
    if (norm_ == nullptr) return x_ + t * cols_;
    float* out = normed_ + t * cols_;
    rmsnorm(out, x_ + t * cols_, norm_->weight, cols_, norm_->eps);
    return out;
  }
  // Where float weights read the (normalized) rows, after row() ran for each.
  const float* rows() const { return norm_ == nullptr ? x_ : normed_; }

 private:
  const float* x_;
  int64_t cols_;
  const MatmulNorm* norm_;
  float* normed_ = nullptr;
};

// Chunk size (rows) for a matrix of `rows` x `cols` on `pool`.
int64_t chunk_rows_for(int64_t rows, int64_t cols, const ThreadPool& pool) {
  const int64_t min_rows = (kMinElemsPerChunk + cols - 1) / cols;
  const int64_t even_rows =
      (rows + pool.size() * kChunksPerThread - 1) / (pool.size() * kChunksPerThread);
  return static_cast<int64_t>(
      round_up(static_cast<size_t>(std::max(min_rows, even_rows)), kRowAlign));
}

// Runs prologue(t0, t1) over the tokens [0, num_tokens) (the activation quantization: each
// thread a contiguous share, then a barrier), then kernel(m, b, e) over the rows [0, rows[m]) of
// every matrix m in claimed chunks: all of it in one pool dispatch (inline when every matrix is
// a single chunk: too small to be worth waking the workers).
template <typename P, typename K>
void run_row_chunks(std::span<const MatmulOut> outs, int64_t num_tokens, ThreadPool& pool,
                    P&& prologue, K&& kernel) {
  constexpr size_t kMaxOuts = 8;
  HINGE_CHECK(outs.size() <= kMaxOuts);
  int64_t chunk[kMaxOuts], first_item[kMaxOuts + 1];
  first_item[0] = 0;
  for (size_t m = 0; m < outs.size(); ++m) {
    chunk[m] = chunk_rows_for(outs[m].w->rows, outs[m].w->cols, pool);
    first_item[m + 1] = first_item[m] + (outs[m].w->rows + chunk[m] - 1) / chunk[m];
  }
  const int64_t items = first_item[outs.size()];
  if (pool.size() == 1 || items == static_cast<int64_t>(outs.size())) {
    prologue(int64_t{0}, num_tokens);
    for (size_t m = 0; m < outs.size(); ++m) kernel(m, int64_t{0}, outs[m].w->rows);
    return;
  }
  std::atomic<int64_t> next{0};
  std::atomic<int> quantized{0};
  pool.run([&](int tid, int nt) {
    // Fewer tokens than threads (decode): the first threads quantize one token each and the
    // barrier waits for them alone. The calling thread is thread 0, so a decode step's matmuls
    // no longer wait for a worker to wake up and quantize the token before any of them can
    // start (the even split gave decode's one token to the last thread).
    const int quantizers = static_cast<int>(std::min<int64_t>(nt, num_tokens));
    const bool split = num_tokens >= nt;
    const int64_t t0 = split ? num_tokens * tid / nt : std::min<int64_t>(tid, num_tokens);
    const int64_t t1 = split ? num_tokens * (tid + 1) / nt : std::min<int64_t>(tid + 1, num_tokens);
    if (t0 < t1) {
      prologue(t0, t1);
      quantized.fetch_add(1, std::memory_order_acq_rel);
    }
    spin_until([&] { return quantized.load(std::memory_order_acquire) >= quantizers; },
               pool.spin_limit());
    size_t m = 0;
    for (;;) {
      const int64_t item = next.fetch_add(1, std::memory_order_relaxed);
      if (item >= items) break;
      while (item >= first_item[m + 1]) ++m;
      const int64_t b = (item - first_item[m]) * chunk[m];
      kernel(m, b, std::min(b + chunk[m], outs[m].w->rows));
    }
  });
}

// The packed path (matmul_packed.h): activations quantized to Q8_0 as usual, then interleaved
// into pairs of blocks with their scales and u8-offset corrections (those depend on the weight
// type, so every matrix of one call has the same type).
void matmul_packed(std::span<const MatmulOut> outs, const InputRows& x, int64_t num_tokens,
                   ThreadPool& pool, MatmulScratch& scratch) {
  const PackedMatrix& p0 = *outs[0].w->packed;
  const int64_t cols = p0.cols;
  const int64_t real_nb = cols / kQK8_0;
  const int64_t nb = p0.nb;
  const size_t blk_row_bytes = static_cast<size_t>(real_nb) * sizeof(BlockQ8_0);
  const size_t x_row_bytes = static_cast<size_t>(nb) * kQK8_0;
  const size_t t = static_cast<size_t>(num_tokens);
  // scratch: | pad to 64 | packed x [T, x_row_bytes] | Q8_0 blocks [T, blk_row_bytes] |
  //          | scales [T, nb] | corrections [T, nb] |
  const size_t xq_bytes = x_row_bytes * t;
  const size_t blk_bytes = round_up(blk_row_bytes * t, 64);
  const size_t arr_bytes = round_up(static_cast<size_t>(nb) * t * 4, 64);
  uint8_t* base = aligned_scratch(scratch, xq_bytes + blk_bytes + 2 * arr_bytes);
  auto* xq = reinterpret_cast<int8_t*>(base);
  uint8_t* blocks = base + xq_bytes;
  auto* scales = reinterpret_cast<float*>(blocks + blk_bytes);
  auto* corr = reinterpret_cast<int32_t*>(blocks + blk_bytes + arr_bytes);
  const int32_t c = p0.type == GgmlType::Q8_0 ? 128 : 8;
  auto quantize = [&](int64_t b, int64_t e) {
    for (int64_t tok = b; tok < e; ++tok) {
      uint8_t* blk = blocks + static_cast<size_t>(tok) * blk_row_bytes;
      float* sc = scales + tok * nb;
      int32_t* co = corr + tok * nb;
      quantize_activation_row(GgmlType::Q8_0, x.row(tok), blk, cols, sc, co);
      int8_t* dst = xq + static_cast<size_t>(tok) * x_row_bytes;
      const auto* qb = reinterpret_cast<const BlockQ8_0*>(blk);
      for (int64_t bi = 0; bi < nb; ++bi) {
        int8_t* pair = dst + (bi / 2) * 64 + (bi % 2) * 4;
        if (bi < real_nb) {
          for (int g = 0; g < 8; ++g) std::memcpy(pair + g * 8, qb[bi].qs + g * 4, 4);
          co[bi] *= -c;
        } else {
          for (int g = 0; g < 8; ++g) std::memset(pair + g * 8, 0, 4);
          sc[bi] = 0.0f;
          co[bi] = 0;
        }
      }
    }
  };
  PackedArgs args[8];
  for (size_t m = 0; m < outs.size(); ++m) {
    args[m].w = outs[m].w->packed;
    args[m].x = xq;
    args[m].x_row_bytes = x_row_bytes;
    args[m].x_scales = scales;
    args[m].x_corr = corr;
    args[m].num_tokens = num_tokens;
    args[m].y = outs[m].y;
    args[m].y_stride = outs[m].w->rows;
  }
  run_row_chunks(outs, num_tokens, pool, quantize,
                 [&](size_t m, int64_t b, int64_t e) { matmul_rows_packed(args[m], b, e); });
}

// The AMX path (layout kAmxTiles): activations quantized to Q8_0, then their quants laid out as
// AMX "A" tiles of 16 tokens per block and their scales in the same order (AmxArgs).
void matmul_amx(std::span<const MatmulOut> outs, const InputRows& x, int64_t num_tokens,
                ThreadPool& pool, MatmulScratch& scratch) {
  const PackedMatrix& p0 = *outs[0].w->packed;
  // Q5_K / Q6_K read the Q8_K bsums (x_bsums) in place of Q4_K's sub-block sums.
  const bool bsums = rowgroups_avx2_only(p0.type);
  const bool kq = packed_super_bytes(p0.type) != 0;  // k-quants: Q8_K activations
  const GgmlType act = kq ? GgmlType::Q8_K : GgmlType::Q8_0;
  const int64_t cols = p0.cols;
  const int64_t nsub = cols / 32;                 // 32-element blocks (A tiles per token tile)
  const int64_t nscale = kq ? cols / kQK_K : nsub;  // activation scales per token
  const int64_t tiles = (num_tokens + kAmxTokenTile - 1) / kAmxTokenTile;
  const size_t act_row_bytes = ggml_row_bytes(*ggml_type_traits(act), static_cast<uint64_t>(cols));
  const size_t t = static_cast<size_t>(num_tokens);
  // scratch: | pad to 64 | A tiles [tiles, nsub, 16, 32] | tile scales [tiles, nscale, 16] |
  //          | Q4_K: tile min sums [tiles, nsub, 16] (Q5_K, Q6_K: bsums [tiles, nscale, 16, 16],
  //          as many bytes) | blocks [T, act_row_bytes] |
  //          | Q8_0: scales [T, nsub] | sums [T, nsub] |
  const size_t xa_bytes = static_cast<size_t>(tiles * nsub) * 512;
  const size_t xs_bytes = round_up(static_cast<size_t>(tiles * nscale) * 16 * 4, 64);
  const size_t xms_bytes = kq ? round_up(static_cast<size_t>(tiles * nsub) * 16 * 4, 64) : 0;
  const size_t blk_bytes = round_up(act_row_bytes * t, 64);
  const size_t arr_bytes = round_up(static_cast<size_t>(nsub) * t * 4, 64);
  uint8_t* base =
      aligned_scratch(scratch, xa_bytes + xs_bytes + xms_bytes + blk_bytes + 2 * arr_bytes);
  auto* xa = reinterpret_cast<int8_t*>(base);
  auto* xs = reinterpret_cast<float*>(base + xa_bytes);
  auto* xms = reinterpret_cast<float*>(base + xa_bytes + xs_bytes);
  auto* xbs = reinterpret_cast<int16_t*>(base + xa_bytes + xs_bytes);  // Q5_K's, Q6_K's use
  uint8_t* blocks = base + xa_bytes + xs_bytes + xms_bytes;
  auto* scales = reinterpret_cast<float*>(blocks + blk_bytes);
  auto* sums = reinterpret_cast<int32_t*>(blocks + blk_bytes + arr_bytes);
  const int64_t pad_from = num_tokens % kAmxTokenTile;
  auto quantize = [&](int64_t b, int64_t e) {
    for (int64_t tok = b; tok < e; ++tok) {
      uint8_t* blk = blocks + static_cast<size_t>(tok) * act_row_bytes;
      const int64_t tt = tok / kAmxTokenTile, m = tok % kAmxTokenTile;
      auto at = [&](int64_t j, int64_t n) {
        return static_cast<size_t>((tt * n + j) * kAmxTokenTile + m);
      };
      if (kq) {
        quantize_activation_row(act, x.row(tok), blk, cols, nullptr, nullptr);
        const auto* qb = reinterpret_cast<const BlockQ8_K*>(blk);
        for (int64_t sb = 0; sb < nscale; ++sb) {
          xs[at(sb, nscale)] = qb[sb].d;
          for (int64_t j = 0; j < 8; ++j)
            std::memcpy(xa + at(sb * 8 + j, nsub) * 32, qb[sb].qs + j * 32, 32);
          if (bsums) {
            std::memcpy(xbs + at(sb, nscale) * 16, qb[sb].bsums, sizeof qb[sb].bsums);
          } else {
            for (int64_t j = 0; j < 8; ++j)
              xms[at(sb * 8 + j, nsub)] =
                  static_cast<float>(qb[sb].bsums[2 * j] + qb[sb].bsums[2 * j + 1]);
          }
        }
      } else {
        float* sc = scales + tok * nsub;
        quantize_activation_row(act, x.row(tok), blk, cols, sc, sums + tok * nsub);
        const auto* qb = reinterpret_cast<const BlockQ8_0*>(blk);
        for (int64_t j = 0; j < nsub; ++j) {
          std::memcpy(xa + at(j, nsub) * 32, qb[j].qs, 32);
          xs[at(j, nsub)] = sc[j];
        }
      }
    }
    // The last tile's padding rows (>= 16 tokens: the tiles run 16 rows): zero, from the thread
    // that quantizes the last token.
    if (e == num_tokens && pad_from != 0 && num_tokens > kAmxTokenTile) {
      const int64_t tt = tiles - 1;
      const size_t pad = static_cast<size_t>(kAmxTokenTile - pad_from);
      for (int64_t j = 0; j < nsub; ++j) {
        const size_t at = static_cast<size_t>((tt * nsub + j) * kAmxTokenTile + pad_from);
        std::memset(xa + at * 32, 0, pad * 32);
        if (kq && !bsums) std::memset(xms + at, 0, pad * 4);
      }
      for (int64_t j = 0; j < nscale; ++j) {
        const size_t at = static_cast<size_t>((tt * nscale + j) * kAmxTokenTile + pad_from);
        std::memset(xs + at, 0, pad * 4);
        if (bsums) std::memset(xbs + at * 16, 0, pad * 32);
      }
    }
  };
  AmxArgs args[8];
  for (size_t m = 0; m < outs.size(); ++m) {
    args[m].w = outs[m].w->packed;
    args[m].x = xa;
    args[m].x_scales = xs;
    args[m].x_sums = sums;
    args[m].x_min_sums = xms;
    args[m].x_bsums = xbs;
    args[m].num_tokens = num_tokens;
    args[m].y = outs[m].y;
    args[m].y_stride = outs[m].w->rows;
  }
  // Without AMX-INT8 and AVX-512 VNNI (or with them switched off), the AVX2 kernel; Q5_K and
  // Q6_K always (their row-group kernels, AVX2 or AVX-512 VNNI, are dispatched in there).
  const auto rows = amx_kernel_usable() && !rowgroups_avx2_only(p0.type)
                        ? matmul_rows_amx
                        : matmul_rows_rowgroups_avx2;
  run_row_chunks(outs, num_tokens, pool, quantize,
                 [&](size_t m, int64_t b, int64_t e) { rows(args[m], b, e); });
}

// The bf16 tile layout (kBf16Tiles) on AMX-BF16 or AVX-512 BF16: activations rounded to bf16, row-major, zero rows up to
// a whole token tile when there is more than one tile.
void matmul_bf16_tiles(std::span<const MatmulOut> outs, const InputRows& x, int64_t num_tokens,
                       ThreadPool& pool, MatmulScratch& scratch) {
  const int64_t cols = outs[0].w->cols;
  const int64_t tiles = (num_tokens + kAmxTokenTile - 1) / kAmxTokenTile;
  const int64_t x_rows = num_tokens < kAmxTokenTile ? num_tokens : tiles * kAmxTokenTile;
  uint8_t* base = aligned_scratch(scratch, static_cast<size_t>(x_rows * cols) * 2);
  auto* xb = reinterpret_cast<uint16_t*>(base);
  auto convert = [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) convert_rows_bf16(x.row(t), cols, xb + t * cols);
    if (e == num_tokens && x_rows > num_tokens)
      std::memset(xb + num_tokens * cols, 0, static_cast<size_t>((x_rows - num_tokens) * cols) * 2);
  };
  Bf16AmxArgs args[8];
  for (size_t m = 0; m < outs.size(); ++m) {
    args[m].w = outs[m].w->packed;
    args[m].x = xb;
    args[m].num_tokens = num_tokens;
    args[m].y = outs[m].y;
    args[m].y_stride = outs[m].w->rows;
  }
  // The same layout runs on the AMX-BF16 tile unit or, without it, on AVX-512 BF16.
  const bool amx = amx_kernel_compiled() && cpu_has_amx_bf16();
  run_row_chunks(outs, num_tokens, pool, convert, [&](size_t m, int64_t b, int64_t e) {
    if (amx)
      matmul_rows_bf16_amx(args[m], b, e);
    else
      matmul_rows_bf16_dp(args[m], b, e);
  });
}

// F16 / BF16 in 16-row groups (kFloatGroups) on AVX2: up to kFloatGroupTile tokens read the f32
// activation rows as they are (normalized first where the call fuses a norm); more read them
// interleaved by token tile into scratch (FloatGroupArgs::x_tiles), each thread its share.
void matmul_float_groups(std::span<const MatmulOut> outs, const InputRows& x, int64_t num_tokens,
                         ThreadPool& pool, MatmulScratch& scratch) {
  const int64_t cols = outs[0].w->cols;
  const bool tiled = num_tokens > kFloatGroupTile;
  float* xt = nullptr;
  if (tiled) {
    const int64_t tiles = (num_tokens + kFloatGroupTile - 1) / kFloatGroupTile;
    xt = reinterpret_cast<float*>(
        aligned_scratch(scratch, static_cast<size_t>(tiles * cols * kFloatGroupTile) * 4));
  }
  FloatGroupArgs args[8];
  for (size_t m = 0; m < outs.size(); ++m) {
    args[m].w = outs[m].w->packed;
    args[m].x_tiles = xt;
    args[m].num_tokens = num_tokens;
    args[m].y = outs[m].y;
    args[m].y_stride = outs[m].w->rows;
  }
  auto prepare = [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) {
      const float* row = x.row(t);
      if (!tiled) continue;
      float* dst = xt + (t / kFloatGroupTile) * cols * kFloatGroupTile + t % kFloatGroupTile;
      for (int64_t k = 0; k < cols; ++k) dst[k * kFloatGroupTile] = row[k];
    }
  };
  run_row_chunks(outs, num_tokens, pool, prepare, [&](size_t m, int64_t b, int64_t e) {
    args[m].x = x.rows();
    matmul_rows_float_groups_avx2(args[m], b, e);
  });
}

void check_view(const MatrixView& w) {
  HINGE_CHECK_MSG(matmul_rows_kernel(w.type) != nullptr, "matmul: unsupported weight type {}",
                  ggml_type_name(w.type));
  const auto traits = ggml_type_traits(w.type);
  HINGE_CHECK_MSG(
      w.cols % traits->block_elems == 0 && w.row_bytes == ggml_row_bytes(*traits, w.cols),
      "matmul: bad view cols={} row_bytes={}", w.cols, w.row_bytes);
  if (w.packed != nullptr)
    HINGE_CHECK(w.packed->type == w.type && w.packed->rows == w.rows && w.packed->cols == w.cols);
}

bool uses_packed(const MatrixView& w) {
  return w.packed != nullptr && packed_layout_supported(w.type, w.packed->layout);
}

// One call's matrices: same cols, same type, all packed or none (checked by the caller).
void matmul_same_kind(std::span<const MatmulOut> outs, const float* x_in, int64_t num_tokens,
                      ThreadPool& pool, MatmulScratch& scratch, const MatmulNorm* norm) {
  const MatrixView& w0 = *outs[0].w;
  const InputRows x(x_in, num_tokens, w0.cols, norm, scratch);
  if (uses_packed(w0)) {
    if (w0.packed->layout == PackedLayout::kAmxTiles)
      matmul_amx(outs, x, num_tokens, pool, scratch);
    else if (w0.packed->layout == PackedLayout::kBf16Tiles)
      matmul_bf16_tiles(outs, x, num_tokens, pool, scratch);
    else if (w0.packed->layout == PackedLayout::kFloatGroups)
      matmul_float_groups(outs, x, num_tokens, pool, scratch);
    else
      matmul_packed(outs, x, num_tokens, pool, scratch);
    return;
  }
  MatmulArgs shared;
  shared.cols = w0.cols;
  shared.num_tokens = num_tokens;
  const GgmlType act = matmul_activation_type(w0.type);
  const bool q8_0 = act == GgmlType::Q8_0;
  const int64_t cols = w0.cols, nb = w0.cols / kQK8_0;
  // Quantized activations: | blocks [num_tokens, act_row_bytes] | Q8_0: scales, sums; Q8_K:
  // min sums [num_tokens, nb] |.
  uint8_t* xq = nullptr;
  float* scales = nullptr;
  int32_t* sums = nullptr;
  size_t act_row_bytes = 0;
  if (act == GgmlType::F32) {
    shared.x = x.rows();
    shared.x_row_bytes = static_cast<size_t>(w0.cols) * sizeof(float);
  } else {
    HINGE_CHECK(w0.cols % ggml_type_traits(act)->block_elems == 0);
    act_row_bytes = ggml_row_bytes(*ggml_type_traits(act), w0.cols);
    const size_t blocks_bytes = round_up(act_row_bytes * static_cast<size_t>(num_tokens), 64);
    const size_t floats_bytes =  // per array; float and int32_t are both 4 bytes
        static_cast<size_t>(num_tokens * nb) * sizeof(float);
    const size_t need = blocks_bytes + 2 * floats_bytes;
    if (scratch.bytes.size() < need) scratch.bytes.resize(need);
    xq = scratch.bytes.data();
    scales = reinterpret_cast<float*>(xq + blocks_bytes);
    sums = reinterpret_cast<int32_t*>(xq + blocks_bytes + floats_bytes);
    shared.x = xq;
    shared.x_row_bytes = act_row_bytes;
    if (q8_0) {
      shared.x_scales = scales;
      shared.x_sums = sums;
    } else {
      shared.x_min_sums = scales;
    }
  }
  auto quantize = [&](int64_t b, int64_t e) {
    if (act == GgmlType::F32) {  // float weights read the (normalized) activations as they are
      if (norm != nullptr)
        for (int64_t t = b; t < e; ++t) x.row(t);
      return;
    }
    for (int64_t t = b; t < e; ++t) {
      uint8_t* row = xq + t * act_row_bytes;
      quantize_activation_row(act, x.row(t), row, cols, q8_0 ? scales + t * nb : nullptr,
                              q8_0 ? sums + t * nb : nullptr);
      if (!q8_0) {  // Q8_K: the scaled sub-block sums (MatmulArgs::x_min_sums)
        const auto* blk = reinterpret_cast<const BlockQ8_K*>(row);
        float* ms = scales + t * nb;
        for (int64_t sb = 0; sb < cols / kQK_K; ++sb)
          for (int j = 0; j < 8; ++j)
            ms[sb * 8 + j] =
                blk[sb].d * static_cast<float>(blk[sb].bsums[2 * j] + blk[sb].bsums[2 * j + 1]);
      }
    }
  };
  const MatmulRowsFn kernel = matmul_rows_kernel(w0.type);
  MatmulArgs args[8];
  for (size_t m = 0; m < outs.size(); ++m) {
    args[m] = shared;
    args[m].w = static_cast<const uint8_t*>(outs[m].w->data);
    args[m].w_row_bytes = outs[m].w->row_bytes;
    args[m].y = outs[m].y;
    args[m].y_stride = outs[m].w->rows;
  }
  run_row_chunks(outs, num_tokens, pool, quantize,
                 [&](size_t m, int64_t b, int64_t e) { kernel(args[m], b, e); });
}

}  // namespace

void* kernel_thread_buffer(size_t bytes) {
  struct Buf {
    void* p = nullptr;
    size_t cap = 0;
    ~Buf() { std::free(p); }
  };
  thread_local Buf buf;
  if (buf.cap < bytes) {
    std::free(buf.p);
    buf.p = nullptr;
    buf.cap = 0;
    const size_t cap = (bytes + 4095) / 4096 * 4096;
    buf.p = std::aligned_alloc(64, cap);
    if (!buf.p) throw std::bad_alloc();
    buf.cap = cap;
  }
  return buf.p;
}

GgmlType matmul_activation_type(GgmlType type) {
  switch (type) {
    case GgmlType::Q8_0:
    case GgmlType::Q4_0:
      return GgmlType::Q8_0;
    case GgmlType::Q4_K:
    case GgmlType::Q5_K:
    case GgmlType::Q6_K:
      return GgmlType::Q8_K;
    default:
      return GgmlType::F32;
  }
}

MatmulRowsFn matmul_rows_kernel(GgmlType type) {
  switch (type) {
    case GgmlType::F32:
      return &matmul_rows_f32;
    case GgmlType::F16:
      return &matmul_rows_f16;
    case GgmlType::BF16:
      return &matmul_rows_bf16;
    case GgmlType::Q8_0:
      return &matmul_rows_q8_0;
    case GgmlType::Q4_0:
      return &matmul_rows_q4_0;
    case GgmlType::Q4_K:
      return &matmul_rows_q4_k;
    case GgmlType::Q5_K:
      return &matmul_rows_q5_k;
    case GgmlType::Q6_K:
      return &matmul_rows_q6_k;
    default:
      return nullptr;
  }
}

void matmul(const MatrixView& w, const float* x, int64_t num_tokens, float* y, ThreadPool& pool,
            MatmulScratch& scratch) {
  const MatmulOut out{&w, y};
  matmul_shared_input(std::span<const MatmulOut>(&out, 1), x, num_tokens, pool, scratch);
}

void matmul_shared_input(std::span<const MatmulOut> outs, const float* x, int64_t num_tokens,
                         ThreadPool& pool, MatmulScratch& scratch, const MatmulNorm* norm) {
  if (num_tokens <= 0 || outs.empty()) return;
  HINGE_CHECK_MSG(outs.size() <= 8, "matmul_shared_input: {} matrices (at most 8)", outs.size());
  bool same = true;
  for (const MatmulOut& o : outs) {
    check_view(*o.w);
    HINGE_CHECK_MSG(o.w->cols == outs[0].w->cols, "matmul_shared_input: cols {} vs {}",
                    o.w->cols, outs[0].w->cols);
    same = same && o.w->type == outs[0].w->type && uses_packed(*o.w) == uses_packed(*outs[0].w) &&
           (!uses_packed(*o.w) || o.w->packed->layout == outs[0].w->packed->layout);
  }
  if (same) {
    // Skip empty matrices (nothing to compute); they would only cost a chunk.
    MatmulOut live[8];
    size_t n = 0;
    for (const MatmulOut& o : outs)
      if (o.w->rows > 0) live[n++] = o;
    if (n > 0)
      matmul_same_kind(std::span<const MatmulOut>(live, n), x, num_tokens, pool, scratch, norm);
    return;
  }
  for (const MatmulOut& o : outs)
    if (o.w->rows > 0)
      matmul_same_kind(std::span<const MatmulOut>(&o, 1), x, num_tokens, pool, scratch, norm);
}

}  // namespace hinge::kernels
