// Packed GGUF block structs (exactly ggml's block_q8_0 / block_q4_0 / block_q4_K / block_q5_K /
// block_q6_K / block_q8_K) and the small bit-twiddling helpers every quant kernel shares.
// Internal to src/kernels: the rest of hinge sees rows as opaque bytes (MatrixView).
//
// Alignment: the structs only need 2-byte alignment (f16 fields), 4 for BlockQ8_K. GGUF tensor
// data is 32-byte aligned and every row size is even, so views straight into the mapped file are
// fine.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "common/ggml_type.h"

namespace hinge::kernels {

// 32 values: x[i] = d * qs[i].
struct BlockQ8_0 {
  uint16_t d;  // f16 scale
  int8_t qs[kQK8_0];
};
static_assert(sizeof(BlockQ8_0) == 34);

// 32 values: x[i] = d * ((qs[i % 16] >> (4 * (i / 16))) & 15) - 8), i.e. the low nibbles hold
// elements 0..15 and the high nibbles elements 16..31.
struct BlockQ4_0 {
  uint16_t d;  // f16 scale
  uint8_t qs[kQK4_0 / 2];
};
static_assert(sizeof(BlockQ4_0) == 18);

// 256 values in 8 sub-blocks of 32: x = d * sc[j] * q - dmin * m[j], with 6-bit sc/m packed in
// `scales` (see scale_min_k4) and 4-bit q. qs holds 4 chunks of 32 bytes; chunk c's low nibbles
// are sub-block 2c, its high nibbles sub-block 2c+1.
struct BlockQ4_K {
  uint16_t d;     // f16 super-block scale for the 6-bit sub-block scales
  uint16_t dmin;  // f16 super-block scale for the 6-bit sub-block mins
  uint8_t scales[12];
  uint8_t qs[kQK_K / 2];
};
static_assert(sizeof(BlockQ4_K) == 144);

// Q4_K with a fifth bit: x = d * sc[j] * q - dmin * m[j], q = 0..31. The low 4 bits as in
// BlockQ4_K's qs; the high bit of sub-block j's element l (l in [0, 32)) is bit j of qh[l].
struct BlockQ5_K {
  uint16_t d;     // f16 super-block scale for the 6-bit sub-block scales
  uint16_t dmin;  // f16 super-block scale for the 6-bit sub-block mins
  uint8_t scales[12];
  uint8_t qh[kQK_K / 8];
  uint8_t qs[kQK_K / 2];
};
static_assert(sizeof(BlockQ5_K) == 176);

// 256 values in 16 sub-blocks of 16: x = d * scales[j] * (q - 32), q 6 bits: low 4 bits in ql,
// high 2 bits in qh. Per half (128 values, h = 0/1): ql[64h + l] low nibble = element 128h + l,
// ql[64h + 32 + l] low nibble = 128h + 32 + l, high nibbles = +64 / +96; qh[32h + l] bits 0-1,
// 2-3, 4-5, 6-7 = elements 128h + l, +32, +64, +96 (l in [0, 32)).
struct BlockQ6_K {
  uint8_t ql[kQK_K / 2];
  uint8_t qh[kQK_K / 4];
  int8_t scales[kQK_K / 16];
  uint16_t d;  // f16
};
static_assert(sizeof(BlockQ6_K) == 210);

// Activation format for the k-quant dot products: x[i] = d * qs[i]; bsums[j] = sum of qs[16j ..
// 16j + 15] (lets the kernels fold in the per-sub-block mins / offsets without touching qs).
struct BlockQ8_K {
  float d;
  int8_t qs[kQK_K];
  int16_t bsums[kQK_K / 16];
};
static_assert(sizeof(BlockQ8_K) == 292);

// ggml's nearest_int: round to nearest, ties to even, via the 1.5 * 2^23 trick. Valid for
// |x| <= 4194303 (all callers scale into a small integer range).
inline int nearest_int(float x) {
  float v = x + 12582912.f;
  int32_t i;
  std::memcpy(&i, &v, sizeof i);
  return (i & 0x007fffff) - 0x00400000;
}

// Sub-block j (0..7) of a Q4_K super-block: 6-bit scale and min. Bytes 0-3 hold sc[0..3] in their
// low 6 bits, bytes 4-7 m[0..3]; bytes 8-11 hold the low nibbles of sc[4..7] | m[4..7] << 4, and
// the top 2 bits of bytes 0-3 / 4-7 are the high bits of sc[4..7] / m[4..7].
inline void scale_min_k4(int j, const uint8_t* q, uint8_t* sc, uint8_t* m) {
  if (j < 4) {
    *sc = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
    *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

// Element e (0..255) of a Q6_K super-block as its stored 6-bit value 0..63 (the weight is
// d * scales[e / 16] * (value - 32)): per 128-element half h, ql[64h + l] holds elements l
// (low nibble) and l + 64 (high), ql[64h + l + 32] elements l + 32 and l + 96, and bit pair g
// of qh[32h + l] the top bits of element 32g + l.
inline int q6_k_value(const BlockQ6_K& b, int e) {
  const int h = e / 128, g = (e % 128) / 32, l = e % 32;
  const uint8_t ql = b.ql[64 * h + l + 32 * (g % 2)];
  return (g < 2 ? ql & 0xF : ql >> 4) | (((b.qh[32 * h + l] >> (2 * g)) & 3) << 4);
}

}  // namespace hinge::kernels
