// matmul: quantizes the activations once per call (into scratch), then splits the output rows
// into contiguous chunks that the pool's threads claim from a shared counter, running the
// per-type SIMD kernel on each chunk.
//
// Why claimed chunks rather than one fixed range per thread: when a core is busy with something
// else (other processes, an OS tick, a slower core), a static split makes everyone wait for the
// slowest thread; with ~4 chunks per thread the others pick up its share. Chunks stay large
// (>= 64K weights, usually hundreds of rows), so each thread still streams long contiguous runs.
#include "kernels/matmul.h"

#include <algorithm>
#include <atomic>
#include <cstring>

#include "common/status.h"
#include "kernels/matmul_kernels.h"
#include "kernels/matmul_packed.h"
#include "kernels/quant.h"
#include "kernels/quant_block.h"

namespace hinge::kernels {
namespace {

// Rows per chunk are a multiple of this: keeps each thread's y writes on separate cache lines.
constexpr int64_t kRowAlign = 16;
// Each chunk has at least this many weight elements: waking a worker costs microseconds, more
// than a whole small matmul (e.g. a 64x64 layer of a test model), which then runs inline.
constexpr int64_t kMinElemsPerChunk = int64_t{64} << 10;
constexpr int64_t kChunksPerThread = 4;

size_t round_up(size_t n, size_t to) {
  return (n + to - 1) / to * to;
}

// Runs `kernel(b, e)` over [0, rows) in claimed chunks of chunk_rows (or inline when one chunk).
template <typename K>
void run_row_chunks(int64_t rows, int64_t cols, ThreadPool& pool, K&& kernel) {
  const int64_t min_rows = (kMinElemsPerChunk + cols - 1) / cols;
  const int64_t even_rows =
      (rows + pool.size() * kChunksPerThread - 1) / (pool.size() * kChunksPerThread);
  const int64_t chunk_rows =
      static_cast<int64_t>(round_up(static_cast<size_t>(std::max(min_rows, even_rows)), kRowAlign));
  if (pool.size() == 1 || chunk_rows >= rows) {
    kernel(int64_t{0}, rows);
    return;
  }
  std::atomic<int64_t> next_row{0};
  pool.run([&](int /*tid*/, int /*num_threads*/) {
    for (;;) {
      const int64_t b = next_row.fetch_add(chunk_rows, std::memory_order_relaxed);
      if (b >= rows) break;
      kernel(b, std::min(b + chunk_rows, rows));
    }
  });
}

// The packed path (matmul_packed.h): activations quantized to Q8_0 as usual, then interleaved
// into pairs of blocks with their scales and u8-offset corrections.
void matmul_packed(const MatrixView& w, const float* x, int64_t num_tokens, float* y,
                   ThreadPool& pool, MatmulScratch& scratch) {
  const PackedMatrix& p = *w.packed;
  const int64_t cols = w.cols;
  const int64_t real_nb = cols / kQK8_0;
  const int64_t nb = p.nb;
  const size_t blk_row_bytes = static_cast<size_t>(real_nb) * sizeof(BlockQ8_0);
  const size_t x_row_bytes = static_cast<size_t>(nb) * kQK8_0;
  const size_t t = static_cast<size_t>(num_tokens);
  // scratch: | pad to 64 | packed x [T, x_row_bytes] | Q8_0 blocks [T, blk_row_bytes] |
  //          | scales [T, nb] | corrections [T, nb] |
  const size_t xq_bytes = x_row_bytes * t;
  const size_t blk_bytes = round_up(blk_row_bytes * t, 64);
  const size_t arr_bytes = round_up(static_cast<size_t>(nb) * t * 4, 64);
  const size_t need = 64 + xq_bytes + blk_bytes + 2 * arr_bytes;
  if (scratch.bytes.size() < need) scratch.bytes.resize(need);
  uint8_t* base = scratch.bytes.data();
  base += (64 - reinterpret_cast<uintptr_t>(base) % 64) % 64;
  auto* xq = reinterpret_cast<int8_t*>(base);
  uint8_t* blocks = base + xq_bytes;
  auto* scales = reinterpret_cast<float*>(blocks + blk_bytes);
  auto* corr = reinterpret_cast<int32_t*>(blocks + blk_bytes + arr_bytes);
  const int32_t c = p.type == GgmlType::Q8_0 ? 128 : 8;
  pool.parallel_for(num_tokens, 1, [&](int64_t b, int64_t e) {
    for (int64_t tok = b; tok < e; ++tok) {
      uint8_t* blk = blocks + static_cast<size_t>(tok) * blk_row_bytes;
      float* sc = scales + tok * nb;
      int32_t* co = corr + tok * nb;
      quantize_activation_row(GgmlType::Q8_0, x + tok * cols, blk, cols, sc, co);
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
  });
  PackedArgs args;
  args.w = &p;
  args.x = xq;
  args.x_row_bytes = x_row_bytes;
  args.x_scales = scales;
  args.x_corr = corr;
  args.num_tokens = num_tokens;
  args.y = y;
  args.y_stride = w.rows;
  run_row_chunks(w.rows, w.cols, pool,
                 [&](int64_t b, int64_t e) { matmul_rows_packed(args, b, e); });
}

}  // namespace

GgmlType matmul_activation_type(GgmlType type) {
  switch (type) {
    case GgmlType::Q8_0:
    case GgmlType::Q4_0:
      return GgmlType::Q8_0;
    case GgmlType::Q4_K:
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
    case GgmlType::Q6_K:
      return &matmul_rows_q6_k;
    default:
      return nullptr;
  }
}

void matmul(const MatrixView& w, const float* x, int64_t num_tokens, float* y, ThreadPool& pool,
            MatmulScratch& scratch) {
  if (num_tokens <= 0 || w.rows <= 0) return;
  const MatmulRowsFn kernel = matmul_rows_kernel(w.type);
  HINGE_CHECK_MSG(kernel != nullptr, "matmul: unsupported weight type {}", ggml_type_name(w.type));
  const auto traits = ggml_type_traits(w.type);
  HINGE_CHECK_MSG(
      w.cols % traits->block_elems == 0 && w.row_bytes == ggml_row_bytes(*traits, w.cols),
      "matmul: bad view cols={} row_bytes={}", w.cols, w.row_bytes);
  if (w.packed != nullptr && packed_matmul_supported(w.type)) {
    HINGE_CHECK(w.packed->type == w.type && w.packed->rows == w.rows && w.packed->cols == w.cols);
    matmul_packed(w, x, num_tokens, y, pool, scratch);
    return;
  }

  MatmulArgs args;
  args.w = static_cast<const uint8_t*>(w.data);
  args.w_row_bytes = w.row_bytes;
  args.cols = w.cols;
  args.num_tokens = num_tokens;
  args.y = y;
  args.y_stride = w.rows;

  const GgmlType act = matmul_activation_type(w.type);
  if (act == GgmlType::F32) {
    args.x = x;
    args.x_row_bytes = static_cast<size_t>(w.cols) * sizeof(float);
  } else {
    HINGE_CHECK(w.cols % ggml_type_traits(act)->block_elems == 0);
    // scratch: | blocks [num_tokens, act_row_bytes] | Q8_0 only: scales, sums [num_tokens, nb] |
    const size_t act_row_bytes = ggml_row_bytes(*ggml_type_traits(act), w.cols);
    const size_t blocks_bytes = round_up(act_row_bytes * static_cast<size_t>(num_tokens), 64);
    const int64_t nb = w.cols / kQK8_0;
    const size_t floats_bytes =  // per array; float and int32_t are both 4 bytes
        act == GgmlType::Q8_0 ? static_cast<size_t>(num_tokens * nb) * sizeof(float) : 0;
    const size_t need = blocks_bytes + 2 * floats_bytes;
    if (scratch.bytes.size() < need) scratch.bytes.resize(need);
    uint8_t* xq = scratch.bytes.data();
    float* scales = reinterpret_cast<float*>(xq + blocks_bytes);
    auto* sums = reinterpret_cast<int32_t*>(xq + blocks_bytes + floats_bytes);
    const int64_t cols = w.cols;
    pool.parallel_for(num_tokens, 1, [&](int64_t b, int64_t e) {
      for (int64_t t = b; t < e; ++t) {
        const bool q8_0 = act == GgmlType::Q8_0;
        quantize_activation_row(act, x + t * cols, xq + t * act_row_bytes, cols,
                                q8_0 ? scales + t * nb : nullptr, q8_0 ? sums + t * nb : nullptr);
      }
    });
    args.x = xq;
    args.x_row_bytes = act_row_bytes;
    if (act == GgmlType::Q8_0) {
      args.x_scales = scales;
      args.x_sums = sums;
    }
  }

  run_row_chunks(w.rows, w.cols, pool, [&](int64_t b, int64_t e) { kernel(args, b, e); });
}

}  // namespace hinge::kernels
