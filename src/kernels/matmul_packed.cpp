// Packing of Q8_0 / Q4_0 weights into the layouts of matmul_packed.h, and their read-back for
// tests. Plain scalar code: it runs once per matrix at load, bandwidth-bound.
#include "kernels/matmul_packed.h"

#include "kernels/kernel_choice.h"
#include "kernels/cpu_features.h"

#include <cstdlib>
#include <cstring>
#include <type_traits>
#include <vector>

#include "common/half.h"
#include "common/status.h"
#include "kernels/matmul.h"
#include "kernels/quant_block.h"

namespace hinge::kernels {
namespace {

// Position (0..63) in a pair's interleaved order of element e (0..31) of the pair's block
// `second` (0 or 1).
constexpr int interleaved_pos(int second, int e) { return (e / 4) * 8 + second * 4 + e % 4; }

// Quant q (Q8_0: -128..127, Q4_0: 0..15 nibble) of block b element e of a GGUF row.
int gguf_quant(GgmlType type, const uint8_t* row, int64_t b, int e) {
  if (type == GgmlType::Q8_0) return reinterpret_cast<const BlockQ8_0*>(row)[b].qs[e];
  const BlockQ4_0& blk = reinterpret_cast<const BlockQ4_0*>(row)[b];
  return e < 16 ? blk.qs[e] & 0x0F : blk.qs[e - 16] >> 4;
}

uint16_t gguf_scale(GgmlType type, const uint8_t* row, int64_t b) {
  return type == GgmlType::Q8_0 ? reinterpret_cast<const BlockQ8_0*>(row)[b].d
                                : reinterpret_cast<const BlockQ4_0*>(row)[b].d;
}

void pack_row(const MatrixView& w, PackedMatrix& p, int64_t r) {
  uint8_t* dst = p.qs.get() + static_cast<size_t>(r) * p.qs_row_bytes;
  uint16_t* d = p.d.get() + r * p.nb;
  const int64_t real_nb = w.cols / kQK8_0;
  const auto* src = static_cast<const uint8_t*>(w.data) + static_cast<size_t>(r) * w.row_bytes;
  const size_t pair_bytes = packed_pair_bytes(p.type);
  for (int64_t b = 0; b < p.nb; ++b) {
    const bool real = b < real_nb;
    d[b] = real ? gguf_scale(p.type, src, b) : 0;
    uint8_t* pair = dst + static_cast<size_t>(b / 2) * pair_bytes;
    for (int e = 0; e < kQK8_0; ++e) {
      const int pos = interleaved_pos(static_cast<int>(b % 2), e);
      if (p.type == GgmlType::Q8_0) {
        const int q = real ? gguf_quant(p.type, src, b, e) : 0;
        pair[pos] = static_cast<uint8_t>(q + 128);
      } else {
        const int q = real ? gguf_quant(p.type, src, b, e) : 8;
        uint8_t& byte = pair[pos % 32];
        byte = pos < 32 ? static_cast<uint8_t>((byte & 0xF0) | q)
                        : static_cast<uint8_t>((byte & 0x0F) | (q << 4));
      }
    }
  }
}

// Byte offset, within a group's (block) tile, of element e (0..31) of the group's row n, as
// tdpbssd's B operand reads it: tile row e / 4, column n * 4 + e % 4.
constexpr int tile_pos(int n, int e) { return (e / 4) * 64 + n * 4 + e % 4; }

// Tile byte (r, n, i) for r < 4 (the only bytes Q4 tiles store) holds elements 4r + i (low
// nibble) and 16 + 4r + i (high) of row n's block: for Q4_0 that is exactly GGUF qs[4r + i], and
// Q8_0 tile bytes (r, n, 0..3) are GGUF qs[4r .. 4r + 3]. So tiles are built 4 bytes at a time.
void pack_group_amx(const MatrixView& w, PackedMatrix& p, int64_t g) {
  const size_t tile_bytes = packed_tile_bytes(p.type);
  const int tile_rows = p.type == GgmlType::Q8_0 ? 8 : 4;
  for (int n = 0; n < 16; ++n) {
    const int64_t r = g * 16 + n;
    if (r >= w.rows) break;  // padding rows stay zero
    const auto* src = static_cast<const uint8_t*>(w.data) + static_cast<size_t>(r) * w.row_bytes;
    for (int64_t b = 0; b < p.nb; ++b) {
      p.d[static_cast<size_t>((g * p.nb + b) * 16 + n)] = gguf_scale(p.type, src, b);
      uint8_t* tile = p.qs.get() + static_cast<size_t>(g) * p.qs_row_bytes +
                      static_cast<size_t>(b) * tile_bytes;
      const uint8_t* qs = p.type == GgmlType::Q8_0
                              ? reinterpret_cast<const uint8_t*>(
                                    reinterpret_cast<const BlockQ8_0*>(src)[b].qs)
                              : reinterpret_cast<const BlockQ4_0*>(src)[b].qs;
      for (int tr = 0; tr < tile_rows; ++tr) std::memcpy(tile + tr * 64 + n * 4, qs + tr * 4, 4);
      if (p.u8_quants)
        for (int tr = 0; tr < tile_rows; ++tr)
          for (int i = 0; i < 4; ++i) tile[tr * 64 + n * 4 + i] ^= 0x80;
    }
  }
}

// Q4_K / Q5_K (kAmxTiles): sub-block j's tile byte (r < 4, n, i) = the low 4 bits of element
// 4r + i (low nibble) and 16 + 4r + i (high) of the sub-block (Q4_K: GGUF keeps them in nibble
// j % 2 of qs[(j / 2) * 32 + e]); Q5_K's fifth bits in the bit planes after the tiles.
// Super-blocks outer, rows inner: each destination stays in L1 while its 16 rows fill it.
template <typename WB>
void pack_group_k(const MatrixView& w, PackedMatrix& p, int64_t g) {
  constexpr bool q5 = std::is_same_v<WB, BlockQ5_K>;
  const size_t super_bytes = q5 ? kPackedQ5KSuperBytes : kPackedQ4KSuperBytes;
  for (int64_t sb = 0; sb < p.nb; ++sb) {
    for (int n = 0; n < 16; ++n) {
      const int64_t r = g * 16 + n;
      if (r >= w.rows) break;  // padding rows stay zero
      const WB& blk = reinterpret_cast<const WB*>(static_cast<const uint8_t*>(w.data) +
                                                  static_cast<size_t>(r) * w.row_bytes)[sb];
      uint8_t* base = p.qs.get() + static_cast<size_t>(g) * p.qs_row_bytes +
                      static_cast<size_t>(sb) * super_bytes;
      // Q4_K: the 8 tiles, sc[8][16], m[8][16], d, dmin; Q5_K: per sub-block its tile, fifth
      // bits, sc[16], m[16]; then d, dmin.
      const size_t tile_stride = q5 ? kPackedQ5KSubBytes : 256;
      for (int j = 0; j < 8; ++j) {
        uint8_t* tile = base + j * tile_stride;
        uint8_t* sc = q5 ? tile + kPackedQ5KSc : base + 8 * 256 + j * 16;
        scale_min_k4(j, blk.scales, &sc[n], q5 ? &tile[kPackedQ5KMin + n] : &sc[128 + n]);
        const uint8_t* q = blk.qs + (j / 2) * 32;
        const int shift = 4 * (j % 2);
        for (int tr = 0; tr < 4; ++tr) {
          uint32_t lo, hi;
          std::memcpy(&lo, q + tr * 4, 4);
          std::memcpy(&hi, q + 16 + tr * 4, 4);
          const uint32_t v = ((lo >> shift) & 0x0F0F0F0Fu) | (((hi >> shift) & 0x0F0F0F0Fu) << 4);
          std::memcpy(tile + tr * 64 + n * 4, &v, 4);
        }
        if constexpr (q5) {
          // Element e's fifth bit: bit j of qh[e]. Tile rows 2rp, 2rp + 4, 2rp + 1, 2rp + 5.
          uint8_t* bits = tile + kPackedQ5KFifth + (n / 8) * 32 + (n % 8) * 4;
          for (int i = 0; i < 4; ++i) {
            uint8_t byte = 0;
            for (int rp = 0; rp < 2; ++rp) {
              const int rows[4] = {2 * rp, 2 * rp + 4, 2 * rp + 1, 2 * rp + 5};
              for (int k = 0; k < 4; ++k)
                byte |= static_cast<uint8_t>(((blk.qh[4 * rows[k] + i] >> j) & 1) << (4 * rp + k));
            }
            bits[i] = byte;
          }
        }
      }
      uint8_t* d = base + (q5 ? kPackedQ5KD : 8 * 256 + 256);
      std::memcpy(d + n * 2, &blk.d, 2);
      std::memcpy(d + 32 + n * 2, &blk.dmin, 2);
    }
  }
}

void pack_group_q45k(const MatrixView& w, PackedMatrix& p, int64_t g) {
  if (w.type == GgmlType::Q5_K)
    pack_group_k<BlockQ5_K>(w, p, g);
  else
    pack_group_k<BlockQ4_K>(w, p, g);
}

// Q6_K (kAmxTiles, matmul_packed.h): per block b its low 4 bits as a Q4_K sub-block tile, its
// high 2 bits in bit pairs (tile rows 2rp, 2rp + 4, 2rp + 1, 2rp + 5 of byte (rp, h, n % 8, i)),
// its scales pairwise per half; then d.
void pack_group_q6k(const MatrixView& w, PackedMatrix& p, int64_t g) {
  uint8_t q[kQK_K];
  for (int64_t sb = 0; sb < p.nb; ++sb) {
    uint8_t* base = p.qs.get() + static_cast<size_t>(g) * p.qs_row_bytes +
                    static_cast<size_t>(sb) * kPackedQ6KSuperBytes;
    for (int n = 0; n < 16; ++n) {
      const int64_t r = g * 16 + n;
      if (r >= w.rows) break;  // padding rows stay zero (values, scales and d)
      const BlockQ6_K& blk = reinterpret_cast<const BlockQ6_K*>(
          static_cast<const uint8_t*>(w.data) + static_cast<size_t>(r) * w.row_bytes)[sb];
      for (int e = 0; e < kQK_K; ++e) q[e] = static_cast<uint8_t>(q6_k_value(blk, e));
      const int h = n / 8, n8 = n % 8;
      for (int b = 0; b < 8; ++b) {
        const uint8_t* v = q + 32 * b;
        for (int tr = 0; tr < 4; ++tr)
          for (int i = 0; i < 4; ++i)
            base[b * kPackedQ6KBlockBytes + tr * 64 + n * 4 + i] =
                static_cast<uint8_t>((v[4 * tr + i] & 0x0F) | ((v[16 + 4 * tr + i] & 0x0F) << 4));
        for (int rp = 0; rp < 2; ++rp)
          for (int i = 0; i < 4; ++i) {
            const int t0 = 2 * rp, t1 = 2 * rp + 1;  // tile rows t0, t0 + 4, t1, t1 + 4
            base[b * kPackedQ6KBlockBytes + kPackedQ6KHigh + (rp * 2 + h) * 32 + n8 * 4 + i] =
                static_cast<uint8_t>((v[4 * t0 + i] >> 4) | ((v[4 * (t0 + 4) + i] >> 4) << 2) |
                                     ((v[4 * t1 + i] >> 4) << 4) |
                                     ((v[4 * (t1 + 4) + i] >> 4) << 6));
          }
        uint8_t* sc = base + b * kPackedQ6KBlockBytes + kPackedQ6KPairs + h * 16 + n8 * 2;
        sc[0] = static_cast<uint8_t>(blk.scales[2 * b]);
        sc[1] = static_cast<uint8_t>(blk.scales[2 * b + 1]);
      }
      std::memcpy(base + kPackedQ6KD + n * 2, &blk.d, 2);
    }
  }
}

std::unique_ptr<PackedMatrix> alloc_packed(const MatrixView& w, PackedLayout layout) {
  auto p = std::make_unique<PackedMatrix>();
  p->type = w.type;
  p->layout = layout;
  p->rows = w.rows;
  p->cols = w.cols;
  size_t qs_bytes = 0;
  uint8_t fill = 0;
  if (layout == PackedLayout::kFloatGroups) {
    p->rows_padded = (w.rows + 15) / 16 * 16;
    p->nb = w.cols;
    p->qs_row_bytes = (static_cast<size_t>(w.cols) * 32 + 63) / 64 * 64;
    qs_bytes = static_cast<size_t>(p->rows_padded / 16) * p->qs_row_bytes;
    fill = 0;  // padding rows: +0.0
  } else if (layout == PackedLayout::kBf16Tiles) {
    p->rows_padded = (w.rows + 15) / 16 * 16;
    p->nb = w.cols / 32;
    p->qs_row_bytes = static_cast<size_t>(p->nb) * 1024;
    qs_bytes = static_cast<size_t>(p->rows_padded / 16) * p->qs_row_bytes;
    fill = 0;  // padding rows: +0.0
  } else if (packed_super_bytes(w.type) != 0) {  // Q4_K, Q5_K, Q6_K
    p->rows_padded = (w.rows + 15) / 16 * 16;
    p->nb = w.cols / kQK_K;
    p->qs_row_bytes = static_cast<size_t>(p->nb) * packed_super_bytes(w.type);
    qs_bytes = static_cast<size_t>(p->rows_padded / 16) * p->qs_row_bytes;
    fill = 0;  // padding rows: zero nibbles, scales, mins and d
  } else if (layout == PackedLayout::kAmxTiles) {
    p->rows_padded = (w.rows + 15) / 16 * 16;
    p->nb = w.cols / kQK8_0;
    p->qs_row_bytes = (static_cast<size_t>(p->nb) * packed_tile_bytes(w.type) + 63) / 64 * 64;
    qs_bytes = static_cast<size_t>(p->rows_padded / 16) * p->qs_row_bytes;
    // Padding rows: zero weights (Q8_0: 0, or 128 as u8; Q4_0: nibbles 8), zero scales.
    p->u8_quants = w.type == GgmlType::Q8_0 && !cpu_has_amx_int8();
    fill = w.type == GgmlType::Q8_0 ? (p->u8_quants ? 0x80 : 0x00) : 0x88;
  } else {
    p->rows_padded = (w.rows + 7) / 8 * 8;
    p->nb = (w.cols / kQK8_0 + 1) / 2 * 2;
    p->qs_row_bytes = (static_cast<size_t>(p->nb / 2) * packed_pair_bytes(w.type) + 63) / 64 * 64;
    qs_bytes = static_cast<size_t>(p->rows_padded) * p->qs_row_bytes;
    // Padding rows, padding blocks and the tail of each row: zero weights (Q8_0: the u8 128;
    // Q4_0: nibbles 8), zero scales.
    fill = w.type == GgmlType::Q8_0 ? 0x80 : 0x88;
  }
  p->qs = allocate_packed_bytes(qs_bytes);
  p->fill = fill;
  // The k-quants keep their scales inline, bf16 tiles have none; padding blocks' scales are zero
  if (packed_super_bytes(w.type) == 0 && layout != PackedLayout::kBf16Tiles &&
      layout != PackedLayout::kFloatGroups) {
    const size_t d_bytes = static_cast<size_t>(p->rows_padded * p->nb) * 2;
    auto d = allocate_packed_bytes(d_bytes);
    std::memset(d.get(), 0, d_bytes);
    p->d = std::unique_ptr<uint16_t[], PackedMatrix::Free>(reinterpret_cast<uint16_t*>(d.release()),
                                                          std::move(d.get_deleter()));
  }
  return p;
}

// Bytes [b, e) of qs get the padding fill (by the pack workers, each for its own rows, before
// they write them: no single-threaded pass over the whole copy).
void fill_qs(PackedMatrix& p, size_t b, size_t e) { std::memset(p.qs.get() + b, p.fill, e - b); }

// One group of 16 rows in kBf16Tiles: each row to bf16 (F16 rounded to nearest even), then its
// 4-byte pairs scattered to their tile rows. row: scratch of cols elements.
void pack_group_bf16(const MatrixView& w, PackedMatrix& p, int64_t g, uint16_t* row) {
  auto* qs = reinterpret_cast<uint32_t*>(p.qs.get() + static_cast<size_t>(g) * p.qs_row_bytes);
  for (int64_t n = 0; n < 16 && g * 16 + n < w.rows; ++n) {
    const auto* src = reinterpret_cast<const uint16_t*>(static_cast<const uint8_t*>(w.data) +
                                                        static_cast<size_t>(g * 16 + n) * w.row_bytes);
    if (w.type == GgmlType::BF16) {
      std::memcpy(row, src, static_cast<size_t>(w.cols) * 2);
    } else {
      for (int64_t c = 0; c < w.cols; ++c) row[c] = f32_to_bf16(f16_to_f32(src[c]));
    }
    const auto* pairs = reinterpret_cast<const uint32_t*>(row);
    for (int64_t j = 0; j < p.nb; ++j)
      for (int r = 0; r < 16; ++r) qs[(j * 16 + r) * 16 + n] = pairs[j * 16 + r];
  }
}

// One group of 16 rows in kFloatGroups: columns in blocks of 64 (a 2 KiB destination block
// stays in L1 while the 16 rows fill it).
void pack_group_float(const MatrixView& w, PackedMatrix& p, int64_t g) {
  auto* qs = reinterpret_cast<uint16_t*>(p.qs.get() + static_cast<size_t>(g) * p.qs_row_bytes);
  const int64_t rows = w.rows - g * 16 < 16 ? w.rows - g * 16 : 16;
  for (int64_t c0 = 0; c0 < w.cols; c0 += 64) {
    const int64_t c1 = c0 + 64 < w.cols ? c0 + 64 : w.cols;
    for (int64_t n = 0; n < rows; ++n) {
      const auto* src = reinterpret_cast<const uint16_t*>(
          static_cast<const uint8_t*>(w.data) + static_cast<size_t>(g * 16 + n) * w.row_bytes);
      for (int64_t c = c0; c < c1; ++c) qs[c * 16 + n] = src[c];
    }
  }
}

}  // namespace

std::unique_ptr<PackedMatrix> pack_matrix(const MatrixView& w, ThreadPool& pool) {
  const LayoutChoice choice = choose_weight_layout(w.type);
  switch (choice.layout) {
    case WeightLayout::kRowGroups:
      return pack_matrix(w, pool, w.type == GgmlType::F16 || w.type == GgmlType::BF16
                                      ? PackedLayout::kFloatGroups
                                      : PackedLayout::kAmxTiles);
    case WeightLayout::kVnniPairs: return pack_matrix(w, pool, PackedLayout::kVnniPairs);
    case WeightLayout::kBf16Tiles:
      if (w.cols % 32 != 0) return nullptr;
      return pack_matrix(w, pool, PackedLayout::kBf16Tiles);
    case WeightLayout::kGguf: break;
  }
  return nullptr;
}

std::unique_ptr<PackedMatrix> pack_matrix(const MatrixView& w, ThreadPool& pool,
                                          PackedLayout layout) {
  if (!packed_layout_supported(w.type, layout)) return nullptr;
  if (layout == PackedLayout::kBf16Tiles && w.cols % 32 != 0) return nullptr;
  HINGE_CHECK(w.cols % ggml_type_traits(w.type)->block_elems == 0 && w.rows > 0);
  auto p = alloc_packed(w, layout);
  PackedMatrix& pm = *p;
  const size_t unit = pm.qs_row_bytes;  // per group of 16 rows (k*Tiles) or per row
  if (layout == PackedLayout::kFloatGroups) {
    pool.parallel_for(pm.rows_padded / 16, 1, [&](int64_t b, int64_t e) {
      fill_qs(pm, static_cast<size_t>(b) * unit, static_cast<size_t>(e) * unit);
      for (int64_t g = b; g < e; ++g) pack_group_float(w, pm, g);
    });
  } else if (layout == PackedLayout::kBf16Tiles) {
    pool.parallel_for(pm.rows_padded / 16, 1, [&](int64_t b, int64_t e) {
      fill_qs(pm, static_cast<size_t>(b) * unit, static_cast<size_t>(e) * unit);
      std::vector<uint16_t> row(static_cast<size_t>(w.cols));
      for (int64_t g = b; g < e; ++g) pack_group_bf16(w, pm, g, row.data());
    });
  } else if (layout == PackedLayout::kAmxTiles) {
    pool.parallel_for(pm.rows_padded / 16, 1, [&](int64_t b, int64_t e) {
      fill_qs(pm, static_cast<size_t>(b) * unit, static_cast<size_t>(e) * unit);
      for (int64_t g = b; g < e; ++g) {
        if (w.type == GgmlType::Q4_K || w.type == GgmlType::Q5_K)
          pack_group_q45k(w, pm, g);
        else if (w.type == GgmlType::Q6_K)
          pack_group_q6k(w, pm, g);
        else
          pack_group_amx(w, pm, g);
      }
    });
  } else {
    fill_qs(pm, static_cast<size_t>(w.rows) * unit, static_cast<size_t>(pm.rows_padded) * unit);
    pool.parallel_for(w.rows, 8, [&](int64_t b, int64_t e) {
      fill_qs(pm, static_cast<size_t>(b) * unit, static_cast<size_t>(e) * unit);
      for (int64_t r = b; r < e; ++r) pack_row(w, pm, r);
    });
  }
  return p;
}

uint16_t packed_bf16(const PackedMatrix& p, int64_t r, int64_t c) {
  const auto* tile = reinterpret_cast<const uint16_t*>(
      p.qs.get() + static_cast<size_t>(r / 16) * p.qs_row_bytes + static_cast<size_t>(c / 32) * 1024);
  return tile[(c % 32) / 2 * 32 + (r % 16) * 2 + c % 2];
}

uint16_t packed_float_bits(const PackedMatrix& p, int64_t r, int64_t c) {
  const auto* group = reinterpret_cast<const uint16_t*>(p.qs.get() +
                                                        static_cast<size_t>(r / 16) * p.qs_row_bytes);
  return group[c * 16 + r % 16];
}

int packed_quant(const PackedMatrix& p, int64_t r, int64_t c) {
  const int64_t b = c / kQK8_0;
  if (p.type == GgmlType::Q6_K) {
    const uint8_t* base = p.qs.get() + static_cast<size_t>(r / 16) * p.qs_row_bytes +
                          static_cast<size_t>(c / kQK_K) * kPackedQ6KSuperBytes;
    const int blk = static_cast<int>(b % 8), e = static_cast<int>(c % kQK8_0);
    const int n = static_cast<int>(r % 16), tr = e / 4, i = e % 4;
    const int pos = tile_pos(n, e);
    const uint8_t* block = base + blk * kPackedQ6KBlockBytes;
    const uint8_t byte = block[pos % 256];
    const int low = pos < 256 ? byte & 0x0F : byte >> 4;
    const int rp = (tr % 4) / 2;  // tile rows 2rp, 2rp + 1 and those + 4
    const int shift = 2 * ((tr % 2) * 2 + tr / 4);
    const uint8_t hb = block[kPackedQ6KHigh + (rp * 2 + n / 8) * 32 + (n % 8) * 4 + i];
    return low | (((hb >> shift) & 3) << 4);
  }
  if (p.type == GgmlType::Q4_K || p.type == GgmlType::Q5_K) {
    const uint8_t* super = p.qs.get() + static_cast<size_t>(r / 16) * p.qs_row_bytes +
                           static_cast<size_t>(c / kQK_K) * packed_super_bytes(p.type);
    const uint8_t* tile =
        super + static_cast<size_t>(b % 8) * (p.type == GgmlType::Q5_K ? kPackedQ5KSubBytes : 256);
    const int n = static_cast<int>(r % 16), e = static_cast<int>(c % kQK8_0);
    const int pos = tile_pos(n, e);
    const uint8_t byte = tile[pos % 256];
    const int low = pos < 256 ? byte & 0x0F : byte >> 4;
    if (p.type == GgmlType::Q4_K) return low;
    const int tr = e / 4, rp = (tr % 4) / 2, k = (tr % 2) * 2 + tr / 4;
    const uint8_t bits = tile[kPackedQ5KFifth + (n / 8) * 32 + (n % 8) * 4 + e % 4];
    return low | (((bits >> (4 * rp + k)) & 1) << 4);
  }
  if (p.layout == PackedLayout::kAmxTiles) {
    const uint8_t* tile = p.qs.get() + static_cast<size_t>(r / 16) * p.qs_row_bytes +
                          static_cast<size_t>(b) * packed_tile_bytes(p.type);
    const int pos = tile_pos(static_cast<int>(r % 16), static_cast<int>(c % kQK8_0));
    if (p.type == GgmlType::Q8_0)
      return p.u8_quants ? int(tile[pos]) - 128 : static_cast<int8_t>(tile[pos]);
    const uint8_t byte = tile[pos % 256];
    return (pos < 256 ? byte & 0x0F : byte >> 4) - 8;
  }
  const int pos = interleaved_pos(static_cast<int>(b % 2), static_cast<int>(c % kQK8_0));
  const uint8_t* pair = p.qs.get() + static_cast<size_t>(r) * p.qs_row_bytes +
                        static_cast<size_t>(b / 2) * packed_pair_bytes(p.type);
  if (p.type == GgmlType::Q8_0) return int(pair[pos]) - 128;
  const uint8_t byte = pair[pos % 32];
  return (pos < 32 ? byte & 0x0F : byte >> 4) - 8;
}

uint16_t packed_scale(const PackedMatrix& p, int64_t r, int64_t block) {
  if (p.layout == PackedLayout::kAmxTiles)
    return p.d[static_cast<size_t>(((r / 16) * p.nb + block) * 16 + r % 16)];
  return p.d[static_cast<size_t>(r * p.nb + block)];
}

PackedQ4KMeta packed_q4k_meta(const PackedMatrix& p, int64_t r, int64_t sb) {
  const uint8_t* super = p.qs.get() + static_cast<size_t>(r / 16) * p.qs_row_bytes +
                         static_cast<size_t>(sb) * packed_super_bytes(p.type);
  const bool q5 = p.type == GgmlType::Q5_K;
  const int n = static_cast<int>(r % 16);
  PackedQ4KMeta out;
  for (int j = 0; j < 8; ++j) {
    out.sc[j] = q5 ? super[j * kPackedQ5KSubBytes + kPackedQ5KSc + n] : super[2048 + j * 16 + n];
    out.m[j] = q5 ? super[j * kPackedQ5KSubBytes + kPackedQ5KMin + n]
                  : super[2048 + 128 + j * 16 + n];
  }
  const uint8_t* d = super + (q5 ? kPackedQ5KD : 2048 + 256);
  std::memcpy(&out.d, d + n * 2, 2);
  std::memcpy(&out.dmin, d + 32 + n * 2, 2);
  return out;
}

int packed_q6k_scale(const PackedMatrix& p, int64_t r, int64_t sb, int j) {
  const uint8_t* base = p.qs.get() + static_cast<size_t>(r / 16) * p.qs_row_bytes +
                        static_cast<size_t>(sb) * kPackedQ6KSuperBytes;
  const int n = static_cast<int>(r % 16);
  return static_cast<int8_t>(
      base[(j / 2) * kPackedQ6KBlockBytes + kPackedQ6KPairs + (n / 8) * 16 + (n % 8) * 2 + j % 2]);
}

uint16_t packed_q6k_d(const PackedMatrix& p, int64_t r, int64_t sb) {
  uint16_t d;
  std::memcpy(&d, p.qs.get() + static_cast<size_t>(r / 16) * p.qs_row_bytes +
                      static_cast<size_t>(sb) * kPackedQ6KSuperBytes + kPackedQ6KD + (r % 16) * 2,
              2);
  return d;
}

}  // namespace hinge::kernels
