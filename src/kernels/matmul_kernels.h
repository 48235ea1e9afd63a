// Internal interface between matmul.cpp (threading, activation quantization, scratch) and the
// per-type SIMD kernels (matmul_float.cpp, matmul_q8.cpp, matmul_kquants.cpp).
//
// A kernel computes y[t * y_stride + r] for r in [row_begin, row_end) and every token t. It reads
// each weight row once from memory and reuses it (from L1) for all tokens, tiling tokens in
// groups so several activation rows share each weight load. Kernels never allocate.
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/ggml_type.h"

namespace hinge::kernels {

struct MatmulArgs {
  const uint8_t* w = nullptr;  // [rows, w_row_bytes] in the weight's GGUF layout
  size_t w_row_bytes = 0;
  int64_t cols = 0;         // elements per row
  const void* x = nullptr;  // [num_tokens, x_row_bytes]: f32 rows, or Q8_0 / Q8_K blocks
  size_t x_row_bytes = 0;
  // Q8_0 activations only, [num_tokens, cols / 32] each: the block scale d as f32 (exactly
  // f16_to_f32 of the block's d, saves converting it once per weight row) and sum(qs) (lets Q4_0
  // use its unsigned nibbles: sum((q - 8) x) = sum(q x) - 8 sum(x)).
  const float* x_scales = nullptr;
  const int32_t* x_sums = nullptr;
  // Q8_K activations only, [num_tokens, cols / 256 * 8]: d * (sum of qs over each 32-element
  // sub-block), for Q4_K's mins term (bsums[2j] + bsums[2j + 1] scaled).
  const float* x_min_sums = nullptr;
  int64_t num_tokens = 0;
  float* y = nullptr;    // [num_tokens, y_stride] f32
  int64_t y_stride = 0;  // = rows
};

struct PackedMatrix;

// The packed kernel's operands (matmul_packed.h): activations in the packed interleave.
struct PackedArgs {
  const PackedMatrix* w = nullptr;
  const int8_t* x = nullptr;  // [num_tokens, x_row_bytes]: w->nb / 2 pairs of 64 bytes each
  size_t x_row_bytes = 0;     // = w->nb * 32, a multiple of 64; x is 64-byte aligned
  // [num_tokens, w->nb] each: block scale (f32) and -c * sum(qs) (c = 128 Q8_0, 8 Q4_0); both
  // zero for the padding block.
  const float* x_scales = nullptr;
  const int32_t* x_corr = nullptr;
  int64_t num_tokens = 0;
  float* y = nullptr;  // [num_tokens, y_stride]
  int64_t y_stride = 0;
};

// The calling thread's scratch for a kernel call (an unpacked weight group, a compact copy of
// the activations): at least `bytes`, 64-byte aligned, grown on first use and for a larger
// shape, never per call; one user at a time per thread, valid until the thread's next call.
void* kernel_thread_buffer(size_t bytes);

// Rows [row_begin, row_end) of a packed Q8_0 / Q4_0 product (kVnniPairs layout). Only valid
// when packed_layout_supported(w->type, PackedLayout::kVnniPairs).
void matmul_rows_packed(const PackedArgs& args, int64_t row_begin, int64_t row_end);

// The AMX kernel's operands (matmul_amx.cpp, layout kAmxTiles): the activations' quants (Q8_0
// for Q8_0/Q4_0 weights, Q8_K for Q4_K) as AMX "A" tiles, tokens in tiles of 16 (kAmxTokenTile)
// and per (token tile, 32-element block) 16 rows of 32 signed quants, contiguous
// ([tiles, cols / 32, 16, 32]); the last tile's rows past num_tokens are zero. Their f32 scales
// in the same order ([tiles, blocks, 16]; Q8_K: per super-block); Q4_K also the sub-block
// sums of the quants as f32 ([tiles, cols / 32, 16]).
constexpr int64_t kAmxTokenTile = 16;
struct AmxArgs {
  const PackedMatrix* w = nullptr;
  const int8_t* x = nullptr;  // 64-byte aligned
  const float* x_scales = nullptr;
  const int32_t* x_sums = nullptr;     // Q4_0: [num_tokens, nb], sum(qs) of each block
  const float* x_min_sums = nullptr;  // Q4_K: the sub-block sums
  // Q5_K, Q6_K: Q8_K's bsums (16 per super-block, i16), [tiles, nb, 16 tokens, 16].
  const int16_t* x_bsums = nullptr;
  int64_t num_tokens = 0;
  float* y = nullptr;  // [num_tokens, y_stride]
  int64_t y_stride = 0;
};

// Rows [row_begin, row_end) (row_begin a multiple of 16) of a kAmxTiles product: on the tile
// unit where cpu_has_amx_int8(), else on AVX-512 VNNI. Only valid where amx_kernel_usable().
void matmul_rows_amx(const AmxArgs& args, int64_t row_begin, int64_t row_end);
// False where the AMX kernel is not compiled (non-x86 or non-GCC builds).
bool amx_kernel_compiled();
// True where matmul_rows_amx runs now: compiled, and AMX-INT8 or AVX-512 VNNI allowed.
bool amx_kernel_usable();
// The same kAmxTiles products on AVX2 (matmul_rowgroups_avx2.cpp), for CPUs without AVX-512
// VNNI: Q4_0, Q8_0 and Q4_K, bit-identical to matmul_rows_amx's VNNI path; and Q5_K and Q6_K
// on every CPU (on their AVX-512 VNNI kernels below where those run), bit-identical to
// vec_dot_q{5,6}_k_q8_k_ref. Valid where rowgroups_avx2_usable(type).
void matmul_rows_rowgroups_avx2(const AmxArgs& args, int64_t row_begin, int64_t row_end);
bool rowgroups_avx2_usable(GgmlType type);
// Q5_K and Q6_K row groups on AVX-512 VNNI (matmul_rowgroups_q56k_vnni.cpp), bit-identical to
// the AVX2 kernels and the references: out[m * 16 + n] = <row 16g + n, token m> for n (1..4)
// tokens (xq: block j of token m at (j * 16 + m) * 32; xs: super-block scale sb of token m at
// sb * 16 + m; xbs: its bsums at (sb * 16 + m) * 16; compact: n in place of 16 in each, the
// activations copied into [block][n] order), the kernel of p.type. Called by
// matmul_rows_rowgroups_avx2 in place of its AVX2 kernels where q56k_vnni_kernel_compiled() and
// cpu_has_avx512_vnni().
struct Prefetch;
void group_tokens_q56k_vnni(const PackedMatrix& p, int64_t g, int n, bool compact,
                            const int8_t* xq, const float* xs, const int16_t* xbs,
                            const Prefetch& pf, float* out);
bool q56k_vnni_kernel_compiled();

// F16 / BF16 weights in 16-row groups (layout kFloatGroups) on AVX2 + FMA + F16C
// (matmul_float_groups_avx2.cpp). Up to kFloatGroupTile tokens (decode) read the activations
// as f32 rows (x: [num_tokens, cols], contiguous); more read them interleaved by token tile
// (x_tiles: [ceil(num_tokens / kFloatGroupTile), cols, kFloatGroupTile], element
// (tile, k, i) = token tile * kFloatGroupTile + i's column k; lanes past num_tokens unread), so
// that one tile's activations for a column are 24 consecutive bytes.
constexpr int64_t kFloatGroupTile = 6;
struct FloatGroupArgs {
  const PackedMatrix* w = nullptr;
  const float* x = nullptr;        // num_tokens <= kFloatGroupTile
  const float* x_tiles = nullptr;  // num_tokens > kFloatGroupTile
  int64_t num_tokens = 0;
  float* y = nullptr;  // [num_tokens, y_stride]
  int64_t y_stride = 0;
};
// Rows [row_begin, row_end) (row_begin a multiple of 16). Valid where
// float_groups_avx2_usable(type).
void matmul_rows_float_groups_avx2(const FloatGroupArgs& args, int64_t row_begin, int64_t row_end);
bool float_groups_avx2_usable(GgmlType type);

// The AMX-BF16 kernel's operands (matmul_bf16_amx.cpp, layout kBf16Tiles): the activations
// rounded to bf16, row-major [tiles * 16 or num_tokens when below 16, cols] (the A tiles are
// loaded straight from it with a row stride of cols * 2 bytes; rows past num_tokens are zero).
struct Bf16AmxArgs {
  const PackedMatrix* w = nullptr;
  const uint16_t* x = nullptr;  // 64-byte aligned
  int64_t num_tokens = 0;
  float* y = nullptr;  // [num_tokens, y_stride]
  int64_t y_stride = 0;
};
// Rows [row_begin, row_end) (row_begin a multiple of 16) of a kBf16Tiles product on the AMX
// tile unit. Only valid when packed_layout_supported(w->type, PackedLayout::kBf16Tiles).
void matmul_rows_bf16_amx(const Bf16AmxArgs& args, int64_t row_begin, int64_t row_end);
// The same product on AVX-512 BF16 (vdpbf16ps, matmul_bf16_dp.cpp): CPUs without AMX-BF16.
// Only valid where bf16_dp_kernel_compiled() and cpu_has_avx512_bf16().
void matmul_rows_bf16_dp(const Bf16AmxArgs& args, int64_t row_begin, int64_t row_end);
bool bf16_dp_kernel_compiled();
// One activation row of `cols` floats rounded to bf16 (to nearest even; NaN stays NaN) into xb,
// with AVX-512 BF16; only where cpu_has_avx512_bf16() and bf16_dp_kernel_compiled().
void convert_rows_bf16(const float* x, int64_t cols, uint16_t* xb);

using MatmulRowsFn = void (*)(const MatmulArgs& args, int64_t row_begin, int64_t row_end);

// The best kernel for `type` on this CPU (Highway runtime dispatch), or nullptr if unsupported.
MatmulRowsFn matmul_rows_kernel(GgmlType type);

// Per-type entry points (each dispatches to the best compiled target).
void matmul_rows_f32(const MatmulArgs& args, int64_t row_begin, int64_t row_end);
void matmul_rows_f16(const MatmulArgs& args, int64_t row_begin, int64_t row_end);
void matmul_rows_bf16(const MatmulArgs& args, int64_t row_begin, int64_t row_end);
void matmul_rows_q8_0(const MatmulArgs& args, int64_t row_begin, int64_t row_end);
void matmul_rows_q4_0(const MatmulArgs& args, int64_t row_begin, int64_t row_end);
void matmul_rows_q4_k(const MatmulArgs& args, int64_t row_begin, int64_t row_end);
void matmul_rows_q5_k(const MatmulArgs& args, int64_t row_begin, int64_t row_end);
void matmul_rows_q6_k(const MatmulArgs& args, int64_t row_begin, int64_t row_end);

// Quantizes one activation row of n values to `act_type` (Q8_0 or Q8_K), byte-identical to
// quantize_row_ref (so matmul_ref_quantized sees the same activations as matmul). SIMD.
// For Q8_0, optionally also writes each block's f32 scale and sum(qs) (MatmulArgs::x_scales,
// x_sums; both null or both [n / 32]).
void quantize_activation_row(GgmlType act_type, const float* x, void* dst, int64_t n,
                             float* q8_0_scales = nullptr, int32_t* q8_0_sums = nullptr);

}  // namespace hinge::kernels
