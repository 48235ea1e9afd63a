// Packing of Q8_0 / Q4_0 weights into the layouts of matmul_packed.h, and their read-back for
// tests. Plain scalar code: it runs once per matrix at load, bandwidth-bound.
#include "kernels/matmul_packed.h"

#include <cstdlib>
#include <cstring>
#include <new>

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

void pack_group_amx(const MatrixView& w, PackedMatrix& p, int64_t g) {
  const size_t tile_bytes = packed_tile_bytes(p.type);
  for (int n = 0; n < 16; ++n) {
    const int64_t r = g * 16 + n;
    if (r >= w.rows) break;  // padding rows stay zero
    const auto* src = static_cast<const uint8_t*>(w.data) + static_cast<size_t>(r) * w.row_bytes;
    for (int64_t b = 0; b < p.nb; ++b) {
      p.d[static_cast<size_t>((g * p.nb + b) * 16 + n)] = gguf_scale(p.type, src, b);
      uint8_t* tile = p.qs.get() + static_cast<size_t>(g) * p.qs_row_bytes +
                      static_cast<size_t>(b) * tile_bytes;
      for (int e = 0; e < kQK8_0; ++e) {
        const int pos = tile_pos(n, e);
        const int q = gguf_quant(p.type, src, b, e);
        if (p.type == GgmlType::Q8_0) {
          tile[pos] = static_cast<uint8_t>(q);
        } else {
          uint8_t& byte = tile[pos % 256];
          byte = pos < 256 ? static_cast<uint8_t>((byte & 0xF0) | q)
                           : static_cast<uint8_t>((byte & 0x0F) | (q << 4));
        }
      }
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
  if (layout == PackedLayout::kAmxTiles) {
    p->rows_padded = (w.rows + 15) / 16 * 16;
    p->nb = w.cols / kQK8_0;
    p->qs_row_bytes = (static_cast<size_t>(p->nb) * packed_tile_bytes(w.type) + 63) / 64 * 64;
    qs_bytes = static_cast<size_t>(p->rows_padded / 16) * p->qs_row_bytes;
    // Padding rows: zero weights (Q8_0: 0; Q4_0: nibbles 8), zero scales.
    fill = w.type == GgmlType::Q8_0 ? 0x00 : 0x88;
  } else {
    p->rows_padded = (w.rows + 7) / 8 * 8;
    p->nb = (w.cols / kQK8_0 + 1) / 2 * 2;
    p->qs_row_bytes = (static_cast<size_t>(p->nb / 2) * packed_pair_bytes(w.type) + 63) / 64 * 64;
    qs_bytes = static_cast<size_t>(p->rows_padded) * p->qs_row_bytes;
    // Padding rows, padding blocks and the tail of each row: zero weights (Q8_0: the u8 128;
    // Q4_0: nibbles 8), zero scales.
    fill = w.type == GgmlType::Q8_0 ? 0x80 : 0x88;
  }
  p->qs.reset(static_cast<uint8_t*>(std::aligned_alloc(64, qs_bytes)));
  if (!p->qs) throw std::bad_alloc();
  std::memset(p->qs.get(), fill, qs_bytes);
  p->d = std::make_unique<uint16_t[]>(static_cast<size_t>(p->rows_padded * p->nb));
  std::memset(p->d.get(), 0, static_cast<size_t>(p->rows_padded * p->nb) * sizeof(uint16_t));
  return p;
}

}  // namespace

void PackedMatrix::Free::operator()(uint8_t* p) const { std::free(p); }

std::unique_ptr<PackedMatrix> pack_matrix(const MatrixView& w, ThreadPool& pool) {
  return pack_matrix(w, pool, best_packed_layout());
}

std::unique_ptr<PackedMatrix> pack_matrix(const MatrixView& w, ThreadPool& pool,
                                          PackedLayout layout) {
  if ((w.type != GgmlType::Q8_0 && w.type != GgmlType::Q4_0) ||
      !packed_layout_supported(w.type, layout))
    return nullptr;
  HINGE_CHECK(w.cols % kQK8_0 == 0 && w.rows > 0);
  auto p = alloc_packed(w, layout);
  PackedMatrix& pm = *p;
  if (layout == PackedLayout::kAmxTiles) {
    pool.parallel_for(pm.rows_padded / 16, 1, [&](int64_t b, int64_t e) {
      for (int64_t g = b; g < e; ++g) pack_group_amx(w, pm, g);
    });
  } else {
    pool.parallel_for(w.rows, 8, [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r) pack_row(w, pm, r);
    });
  }
  return p;
}

int packed_quant(const PackedMatrix& p, int64_t r, int64_t c) {
  const int64_t b = c / kQK8_0;
  if (p.layout == PackedLayout::kAmxTiles) {
    const uint8_t* tile = p.qs.get() + static_cast<size_t>(r / 16) * p.qs_row_bytes +
                          static_cast<size_t>(b) * packed_tile_bytes(p.type);
    const int pos = tile_pos(static_cast<int>(r % 16), static_cast<int>(c % kQK8_0));
    if (p.type == GgmlType::Q8_0) return static_cast<int8_t>(tile[pos]);
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

}  // namespace hinge::kernels
