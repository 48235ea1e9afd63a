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

#include "common/status.h"
#include "kernels/matmul_kernels.h"
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

  const int64_t min_rows = (kMinElemsPerChunk + w.cols - 1) / w.cols;
  const int64_t even_rows =
      (w.rows + pool.size() * kChunksPerThread - 1) / (pool.size() * kChunksPerThread);
  const int64_t chunk_rows =
      static_cast<int64_t>(round_up(static_cast<size_t>(std::max(min_rows, even_rows)), kRowAlign));
  if (pool.size() == 1 || chunk_rows >= w.rows) {
    kernel(args, 0, w.rows);
    return;
  }
  std::atomic<int64_t> next_row{0};
  pool.run([&](int /*tid*/, int /*num_threads*/) {
    for (;;) {
      const int64_t b = next_row.fetch_add(chunk_rows, std::memory_order_relaxed);
      if (b >= w.rows) break;
      kernel(args, b, std::min(b + chunk_rows, w.rows));
    }
  });
}

}  // namespace hinge::kernels
