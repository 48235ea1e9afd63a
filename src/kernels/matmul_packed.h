// Packed weights (Q8_0, Q4_0, Q4_K, Q5_K, Q6_K, F16, BF16): the layouts the AMX, VNNI and AVX2
// kernels stream best, built once at model load (a copy; the GGUF view stays valid for row
// lookups and export).
//
// A GGUF Q8_0/Q4_0 row is 34/18-byte blocks (f16 scale + 32 quants), so no vector load is
// aligned and every block carries its scale inline.
//
// PackedLayout::kVnniPairs (AVX-512 VNNI), each row is:
//   qs: nb / 2 "pairs" of two consecutive blocks, interleaved in 4-byte groups, so one 64-byte
//       vector holds both blocks and vpdpbusd's 16 i32 lanes alternate between them (lane 2g:
//       block 2p elements 4g..4g+3, lane 2g + 1: block 2p + 1, same elements). Q8_0 stores
//       q + 128 as u8 (64 bytes per pair); Q4_0 stores the nibbles (32 bytes per pair: byte j's
//       low nibble is position j, its high nibble position j + 32).
//   d:  the f16 scales of the row's nb blocks, in a separate array.
// nb is the block count rounded up to even (a padding block has zero scale) and the row count
// is rounded up to a multiple of 8 (padding rows are zero): the kernel's tiles never go out of
// bounds. Rows are 64-byte aligned.
// The activations get the same interleave (MatmulScratch), with per-block corrections
// -c * sum(x) for the u8 offset (c = 128 for Q8_0, 8 for Q4_0) placed in lanes 0 and 1, so the
// integer lanes sum to the exact block dot products; one f32 FMA then takes two blocks at once
// with the scales broadcast as an (s0, s1) pair.
//
// PackedLayout::kAmxTiles (AMX-INT8): rows in groups of 16; per (group, block) one AMX "B" tile
// of 8 rows x 64 bytes in the VNNI order tdpbssd reads, byte r * 64 + n * 4 + i = element
// 4r + i of the block in the group's row n. Q8_0 stores those 512 bytes as the signed quants
// (or, packed without AMX, as q + 128: u8_quants);
// Q4_0 stores 256 bytes of nibbles q (0..15): byte p's low nibble is tile byte p, its high
// nibble tile byte p + 256 (the kernel unpacks to q - 8). Tiles of a group follow each other
// (qs_group_bytes per group, 64-byte aligned), and d holds each (group, block)'s 16 f16 scales
// contiguous. nb is the real block count; rows are padded to a multiple of 16 with zeros.
//
// Q4_K has only the kAmxTiles form: per (16-row group, super-block) 2368 bytes, the 8 sub-block
// tiles' nibbles (256 bytes each, q 0..15, ordered as Q4_0's), then sc[8][16] and m[8][16] (the
// 6-bit scales and mins, u8, sub-block-major so 16 bytes hold one sub-block's 16 rows), then
// d[16] and dmin[16] (f16). Super-blocks of a group follow each other; nb is the super-block
// count and d is unused.
//
// Q5_K has only the kAmxTiles form too, read by the row-group kernels of
// matmul_rowgroups_avx2.cpp (AVX2) and matmul_rowgroups_q56k_vnni.cpp (AVX-512 VNNI), never
// the tile unit: per (group, super-block) 2880 bytes, each sub-block's parts together so a
// kernel reads them front to back (the hardware prefetcher follows one stream; with the parts
// in separate regions Zen 4 streamed 7 GB/s per core without software prefetch): per sub-block
// j its nibble tile (low 4 bits, as Q4_K's), its fifth bits (64 bytes: per 8-row half h, 32
// bytes whose byte n * 4 + i holds in bit 4rp + k the fifth bit of tile row 2rp, 2rp + 4,
// 2rp + 1, 2rp + 5 for k = 0, 1, 2, 3), its 6-bit scales sc[16] and mins m[16] (u8, one per
// row); then d[16] and dmin[16] (f16).
//
// Q6_K likewise (the same kernels): per (16-row group, super-block) 3360 bytes, as many as
// GGUF's 16 rows; per block b of 32 columns its values' low 4 bits (0..63) as a Q4_K nibble
// tile, its high 2 bits (128 bytes: per tile-row pair rp and 8-row half h, 32 bytes whose byte
// n * 4 + i holds the bits of tile rows 2rp, 2rp + 4, 2rp + 1, 2rp + 5 in its bit pairs 0-1,
// 2-3, 4-5, 6-7), its scales (32 bytes: per half h, 16 bytes holding sc[2b] and sc[2b + 1] of
// each of the half's 8 rows in turn, i8); then d[16] (f16).
//
// PackedLayout::kBf16Tiles (AMX-BF16; F16 and BF16 weights): rows in groups of 16; per (group,
// block of 32 columns) one 1 KiB AMX "B" tile in the order tdpbf16ps reads: bf16 element
// r * 32 + n * 2 + i is weight (row 16g + n, column 32j + 2r + i). BF16 weights are copied as
// they are; F16 weights are rounded to bf16 (to nearest even): 3 fewer mantissa bits, measured
// in docs/kernels.md. Tiles of a group follow each other (qs_row_bytes = nb * 1024 per group);
// no scales (d is null); rows padded to 16 with zeros. Needs cols % 32 == 0.
//
// PackedLayout::kFloatGroups (AVX2 + FMA + F16C; F16 and BF16 weights): rows in groups of 16;
// per group, column by column, the 16 rows' weights as stored (uint16 element k * 16 + n is
// weight (row 16g + n, column k)), so one 32-byte load holds a column of the group. Exact (no
// rounding); groups follow each other (qs_row_bytes = cols * 32 rounded up to 64); no scales;
// rows padded to 16 with zeros; nb = cols.
//
// Used only where the CPU has the kernel (runtime check, GCC builds); elsewhere matmul keeps
// the GGUF-layout kernels and nothing is packed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "common/ggml_type.h"
#include "common/thread_pool.h"

namespace hinge::kernels {

struct MatrixView;

enum class PackedLayout { kVnniPairs, kAmxTiles, kBf16Tiles, kFloatGroups };

struct PackedMatrix {
  // Q8_0, Q4_0, (kAmxTiles only) Q4_K, Q5_K, Q6_K, (kBf16Tiles, kFloatGroups) F16, BF16
  GgmlType type = GgmlType::Q8_0;
  PackedLayout layout = PackedLayout::kVnniPairs;
  int64_t rows = 0, cols = 0;
  int64_t rows_padded = 0;  // multiple of 8 (kVnniPairs) or 16 (kAmxTiles)
  // Blocks per row (kVnniPairs: rounded up to even; Q4_K / Q5_K / Q6_K: super-blocks).
  int64_t nb = 0;
  // kVnniPairs: bytes per row, nb / 2 * packed_pair_bytes(type) rounded up to 64.
  // kAmxTiles: bytes per group of 16 rows, nb * packed_tile_bytes(type) rounded up to 64; the
  // k-quants nb * packed_super_bytes(type), not rounded (Q6_K's 3360-byte super-blocks: groups
  // start 32-byte aligned; its kernel's loads are unaligned ones).
  size_t qs_row_bytes = 0;
  // Releases a copy's memory: its own allocation, or its share of a huge-page chunk that
  // smaller copies are carved from (packed_memory.cpp).
  struct Free {
    std::shared_ptr<void> chunk;  // null: the pointer is the copy's own allocation
    void operator()(void* p);
  };
  std::unique_ptr<uint8_t[], Free> qs;  // 64-byte aligned
  std::unique_ptr<uint16_t[], Free> d;  // [rows_padded * nb] f16 scales, in layout order
  uint8_t fill = 0;                     // the qs byte of padding (zero weights)
  // kAmxTiles Q8_0 packed where AMX-INT8 is not usable: the quants stored as q + 128 (u8), the
  // unsigned operand of vpdpbusd (the VNNI kernel then subtracts 128 * sum(x) per block). Such
  // a matrix never runs on the tile unit (tdpbssd takes signed weights).
  bool u8_quants = false;

  size_t bytes() const {
    const size_t units = layout != PackedLayout::kVnniPairs ? static_cast<size_t>(rows_padded / 16)
                                                            : static_cast<size_t>(rows_padded);
    return units * qs_row_bytes + (d ? static_cast<size_t>(rows_padded * nb) * 2 : 0);
  }
};

// `bytes` of memory for a packed copy, 64-byte aligned, uninitialized: from 2 MiB up its own
// allocation on transparent huge pages; smaller ones carved from shared 16 MiB huge-page chunks
// (packed_memory.cpp). Thread-safe.
std::unique_ptr<uint8_t[], PackedMatrix::Free> allocate_packed_bytes(size_t bytes);

// Bytes of one interleaved pair of blocks in kVnniPairs qs.
constexpr size_t packed_pair_bytes(GgmlType type) { return type == GgmlType::Q4_0 ? 32 : 64; }
// Bytes of one (16-row group, block) tile in kAmxTiles qs (Q8_0, Q4_0).
constexpr size_t packed_tile_bytes(GgmlType type) { return type == GgmlType::Q4_0 ? 256 : 512; }
// Bytes of one (16-row group, super-block) of packed Q4_K.
constexpr size_t kPackedQ4KSuperBytes = 8 * 256 + 2 * 128 + 2 * 32;
// Packed Q5_K per (16-row group, super-block): 8 sub-blocks of kPackedQ5KSubBytes (nibble
// tile, then its fifth bits at kPackedQ5KFifth, sc[16] at kPackedQ5KSc, m[16] at kPackedQ5KMin),
// then d[16] and dmin[16] at kPackedQ5KD.
constexpr size_t kPackedQ5KSubBytes = 256 + 64 + 16 + 16, kPackedQ5KFifth = 256,
                 kPackedQ5KSc = 320, kPackedQ5KMin = 336, kPackedQ5KD = 8 * kPackedQ5KSubBytes,
                 kPackedQ5KSuperBytes = kPackedQ5KD + 2 * 32;
// Packed Q6_K per (16-row group, super-block): 8 blocks of kPackedQ6KBlockBytes (nibble tile,
// then its high bits at kPackedQ6KHigh, its scale pairs at kPackedQ6KPairs), then d[16] at
// kPackedQ6KD.
constexpr size_t kPackedQ6KBlockBytes = 256 + 128 + 32, kPackedQ6KHigh = 256,
                 kPackedQ6KPairs = 384, kPackedQ6KD = 8 * kPackedQ6KBlockBytes,
                 kPackedQ6KSuperBytes = kPackedQ6KD + 32;
static_assert(kPackedQ6KSuperBytes == 16 * 210 && kPackedQ5KSuperBytes == 2880);
// Types whose row groups (kAmxTiles) only the row-group kernels of matmul_rowgroups_avx2.cpp
// read (AVX2, or their AVX-512 VNNI forms), on every CPU: never the AMX kernel
// (matmul_rows_amx), and calibrated rather than picked by the AMX rule (kernel_choice.h).
constexpr bool rowgroups_avx2_only(GgmlType type) {
  return type == GgmlType::Q5_K || type == GgmlType::Q6_K;
}
// Bytes of one (16-row group, super-block) of a packed k-quant; 0 for other types.
constexpr size_t packed_super_bytes(GgmlType type) {
  return type == GgmlType::Q4_K   ? kPackedQ4KSuperBytes
         : type == GgmlType::Q5_K ? kPackedQ5KSuperBytes
         : type == GgmlType::Q6_K ? kPackedQ6KSuperBytes
                                  : 0;
}

// True when matmul can run matrices of `type` packed in `layout` on this CPU now (kVnniPairs:
// the dispatched target is AVX3 with AVX-512 VNNI allowed; kAmxTiles: the AMX / VNNI kernel
// usable, or the AVX2 row groups for the type: Q5_K and Q6_K only the latter).
// Checked on every matmul call, so tests can switch either off.
bool packed_layout_supported(GgmlType type, PackedLayout layout);
// True when some packed layout of `type` runs on this CPU now.
bool packed_matmul_supported(GgmlType type);
// Packs a Q8_0 / Q4_0 / Q4_K / Q5_K / Q6_K view (multithreaded over rows) in the layout chosen for
// its type on this CPU (kernels/kernel_choice.h), or in `layout`. Returns null when the choice is the
// GGUF layout, the type has no packed form, or the layout does not run on this CPU.
std::unique_ptr<PackedMatrix> pack_matrix(const MatrixView& w, ThreadPool& pool);
std::unique_ptr<PackedMatrix> pack_matrix(const MatrixView& w, ThreadPool& pool,
                                          PackedLayout layout);

// Reads back weight (r, c) of a packed matrix as its quantized integer (Q8_0: -128..127, Q4_0:
// -8..7, Q4_K: 0..15, Q5_K: 0..31, Q6_K: 0..63) and the block scale bits (Q8_0, Q4_0), or a
// Q4_K / Q5_K super-block's scales: for tests of the layout.
int packed_quant(const PackedMatrix& p, int64_t r, int64_t c);
uint16_t packed_scale(const PackedMatrix& p, int64_t r, int64_t block);
struct PackedQ4KMeta {
  uint16_t d = 0, dmin = 0;
  uint8_t sc[8] = {}, m[8] = {};
};
PackedQ4KMeta packed_q4k_meta(const PackedMatrix& p, int64_t r, int64_t super_block);
// Q6_K: row r's sub-block scale (super-block sb, sub-block j of 16) and super-block d bits.
int packed_q6k_scale(const PackedMatrix& p, int64_t r, int64_t sb, int j);
uint16_t packed_q6k_d(const PackedMatrix& p, int64_t r, int64_t sb);
// kBf16Tiles: the bf16 bits of weight (r, c).
uint16_t packed_bf16(const PackedMatrix& p, int64_t r, int64_t c);
// kFloatGroups: the stored bits (F16 or BF16) of weight (r, c).
uint16_t packed_float_bits(const PackedMatrix& p, int64_t r, int64_t c);

}  // namespace hinge::kernels
