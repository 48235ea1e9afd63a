// Block-format tests: known-answer dequantization of hand-built blocks (so a layout mistake cannot
// pass), SIMD dequantize == scalar reference bit for bit, and quantize -> dequantize round trips
// within each format's error bound.
#include <gtest/gtest.h>
#include <hwy/targets.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "common/ggml_type.h"
#include "common/half.h"
#include "kernels/matmul_kernels.h"
#include "kernels/quant.h"
#include "kernels/quant_block.h"
#include "kernels/quant_ref.h"
#include "hwy_test_util.h"

namespace hinge::kernels {
namespace {

std::vector<float> random_values(int64_t n, uint32_t seed, float sigma = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, sigma);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = dist(rng);
  // A few outliers, as real weights have.
  for (int64_t i = 0; i < n; i += 97) v[static_cast<size_t>(i)] *= 6.0f;
  return v;
}

size_t row_bytes(GgmlType t, int64_t n) {
  return ggml_row_bytes(*ggml_type_traits(t), n);
}

std::vector<float> dequant_ref(GgmlType t, const void* src, int64_t n) {
  std::vector<float> out(static_cast<size_t>(n));
  EXPECT_TRUE(dequantize_row_ref(t, src, out.data(), n));
  return out;
}

// ---------------------------------------------------------------- known answers

TEST(KernelsQuant, KnownAnswerF16Bf16) {
  const uint16_t h[4] = {0x3C00, 0xC000, 0x0001, 0x7BFF};
  const float eh[4] = {1.0f, -2.0f, 5.9604644775390625e-08f, 65504.0f};
  const uint16_t b[4] = {0x3F80, 0xC0A0, 0x0000, 0x4049};
  const float eb[4] = {1.0f, -5.0f, 0.0f, 3.140625f};
  float out[4];
  ASSERT_TRUE(dequantize_row_ref(GgmlType::F16, h, out, 4));
  for (int i = 0; i < 4; ++i) EXPECT_EQ(out[i], eh[i]) << i;
  ASSERT_TRUE(dequantize_row(GgmlType::F16, h, out, 4));
  for (int i = 0; i < 4; ++i) EXPECT_EQ(out[i], eh[i]) << i;
  ASSERT_TRUE(dequantize_row_ref(GgmlType::BF16, b, out, 4));
  for (int i = 0; i < 4; ++i) EXPECT_EQ(out[i], eb[i]) << i;
  ASSERT_TRUE(dequantize_row(GgmlType::BF16, b, out, 4));
  for (int i = 0; i < 4; ++i) EXPECT_EQ(out[i], eb[i]) << i;
}

TEST(KernelsQuant, KnownAnswerQ8_0) {
  BlockQ8_0 blk;
  blk.d = 0x3800;  // 0.5
  for (int j = 0; j < 32; ++j) blk.qs[j] = static_cast<int8_t>(j - 16);
  blk.qs[31] = -128;
  float out[32];
  ASSERT_TRUE(dequantize_row_ref(GgmlType::Q8_0, &blk, out, 32));
  EXPECT_EQ(out[0], -8.0f);
  EXPECT_EQ(out[16], 0.0f);
  EXPECT_EQ(out[17], 0.5f);
  EXPECT_EQ(out[30], 7.0f);
  EXPECT_EQ(out[31], -64.0f);
}

TEST(KernelsQuant, KnownAnswerQ4_0) {
  BlockQ4_0 blk;
  blk.d = 0x4000;                            // 2.0
  std::memset(blk.qs, 0x88, sizeof blk.qs);  // every nibble 8 -> 0.0
  blk.qs[0] = 0x91;                          // element 0: (1-8)*2 = -14, element 16: (9-8)*2 = 2
  blk.qs[15] = 0x0F;                         // element 15: (15-8)*2 = 14, element 31: (0-8)*2 = -16
  float expected[32] = {};
  expected[0] = -14.0f;
  expected[16] = 2.0f;
  expected[15] = 14.0f;
  expected[31] = -16.0f;
  float out[32];
  ASSERT_TRUE(dequantize_row_ref(GgmlType::Q4_0, &blk, out, 32));
  for (int i = 0; i < 32; ++i) EXPECT_EQ(out[i], expected[i]) << i;
}

// sc = {1, 2, 3, 4, 17, 33, 48, 63}, m = {0, 1, 2, 3, 16, 5, 32, 63}, d = 1, dmin = 0.5, packed
// by hand into the 12 scale bytes.
BlockQ4_K known_q4_k_block() {
  BlockQ4_K blk;
  blk.d = 0x3C00;     // 1.0
  blk.dmin = 0x3800;  // 0.5
  const uint8_t scales[12] = {0x41, 0x82, 0xC3, 0xC4, 0x40, 0x01,
                              0x82, 0xC3, 0x01, 0x51, 0x00, 0xFF};
  std::memcpy(blk.scales, scales, 12);
  std::memset(blk.qs, 0, sizeof blk.qs);
  blk.qs[0] = 0x5A;        // element 0 (sub 0): 1*10 - 0 = 10; element 32 (sub 1): 2*5 - 0.5 = 9.5
  blk.qs[64 + 5] = 0x07;   // element 133 (sub 4): 17*7 - 8 = 111
  blk.qs[96 + 31] = 0xF3;  // element 223 (sub 6): 48*3 - 16 = 128; 255 (sub 7): 63*15 - 31.5
  return blk;
}

TEST(KernelsQuant, KnownAnswerQ4_K) {
  const BlockQ4_K blk = known_q4_k_block();
  for (int j = 0; j < 8; ++j) {
    const uint8_t esc[8] = {1, 2, 3, 4, 17, 33, 48, 63};
    const uint8_t em[8] = {0, 1, 2, 3, 16, 5, 32, 63};
    uint8_t sc, m;
    scale_min_k4(j, blk.scales, &sc, &m);
    EXPECT_EQ(sc, esc[j]) << j;
    EXPECT_EQ(m, em[j]) << j;
  }
  // q = 0 everywhere else: value = -dmin * m[sub-block].
  const float base[8] = {0.0f, -0.5f, -1.0f, -1.5f, -8.0f, -2.5f, -16.0f, -31.5f};
  float expected[256];
  for (int i = 0; i < 256; ++i) expected[i] = base[i / 32];
  expected[0] = 10.0f;
  expected[32] = 9.5f;
  expected[133] = 111.0f;
  expected[223] = 128.0f;
  expected[255] = 913.5f;
  float out[256];
  ASSERT_TRUE(dequantize_row_ref(GgmlType::Q4_K, &blk, out, 256));
  for (int i = 0; i < 256; ++i) EXPECT_EQ(out[i], expected[i]) << i;
  ASSERT_TRUE(dequantize_row(GgmlType::Q4_K, &blk, out, 256));
  for (int i = 0; i < 256; ++i) EXPECT_EQ(out[i], expected[i]) << i;
}

// Q5_K: d = 1, dmin = 0.5, sub-block j has scale j + 1 and min j (6-bit values below 16, so the
// packed high bits are 0); every qs byte 0x21 (low nibble 1, high nibble 2); qh[l] = 0x55 for even
// l (bits 0, 2, 4, 6: the low-nibble sub-blocks 0, 2, 4, 6 get +16), 0x82 for l = 1 (bits 1 and
// 7), 0 otherwise. Element l of sub-block j: (j + 1) * q - 0.5 * j.
TEST(KernelsQuant, KnownAnswerQ5_K) {
  BlockQ5_K blk;
  blk.d = 0x3C00;     // 1.0
  blk.dmin = 0x3800;  // 0.5
  for (int j = 0; j < 8; ++j) {
    const uint8_t sc = static_cast<uint8_t>(j + 1), m = static_cast<uint8_t>(j);
    if (j < 4) {
      blk.scales[j] = sc;
      blk.scales[j + 4] = m;
    } else {
      blk.scales[j + 4] = static_cast<uint8_t>(sc | (m << 4));
    }
  }
  std::memset(blk.qs, 0x21, sizeof blk.qs);
  for (int l = 0; l < 32; ++l) blk.qh[l] = l % 2 == 0 ? 0x55 : 0;
  blk.qh[1] = 0x82;
  float expected[256];
  for (int j = 0; j < 8; ++j)
    for (int l = 0; l < 32; ++l) {
      const int q = (j % 2 == 0 ? 1 : 2) + (((blk.qh[l] >> j) & 1) ? 16 : 0);
      expected[32 * j + l] = static_cast<float>(j + 1) * q - 0.5f * j;
    }
  EXPECT_EQ(expected[0], 17.0f);           // sub 0: 1 * (1 + 16)
  EXPECT_EQ(expected[32 + 1], 2 * 18.0f - 0.5f);  // sub 1, l = 1: qh bit 1 -> 2 + 16
  EXPECT_EQ(expected[224 + 1], 8 * 18.0f - 3.5f);  // sub 7, l = 1: qh bit 7
  float out[256];
  ASSERT_TRUE(dequantize_row_ref(GgmlType::Q5_K, &blk, out, 256));
  for (int i = 0; i < 256; ++i) EXPECT_EQ(out[i], expected[i]) << i;
  ASSERT_TRUE(dequantize_row(GgmlType::Q5_K, &blk, out, 256));
  for (int i = 0; i < 256; ++i) EXPECT_EQ(out[i], expected[i]) << i;
}

BlockQ6_K known_q6_k_block() {
  BlockQ6_K blk;
  blk.d = 0x3400;  // 0.25
  const int8_t scales[16] = {1, -2, 3, 4, 5, 6, 7, 8, -1, 2, -3, 10, 11, 12, 13, -128};
  std::memcpy(blk.scales, scales, 16);
  std::memset(blk.ql, 0, sizeof blk.ql);
  std::memset(blk.qh, 0, sizeof blk.qh);
  blk.ql[0] = 0x21;
  blk.qh[0] = 0xE4;  // bits 0-1 = 0, 2-3 = 1, 4-5 = 2, 6-7 = 3
  blk.ql[127] = 0xF0;
  blk.qh[63] = 0xC0;
  return blk;
}

TEST(KernelsQuant, KnownAnswerQ6_K) {
  const BlockQ6_K blk = known_q6_k_block();
  const int8_t scales[16] = {1, -2, 3, 4, 5, 6, 7, 8, -1, 2, -3, 10, 11, 12, 13, -128};
  // q = 0 everywhere else: value = 0.25 * sc * (0 - 32) = -8 * sc.
  float expected[256];
  for (int i = 0; i < 256; ++i) expected[i] = -8.0f * scales[i / 16];
  expected[0] = -7.75f;     // q = 1 | 0 << 4 = 1 -> -31, sub 0 (sc 1)
  expected[32] = -12.0f;    // q = 0 | 1 << 4 = 16 -> -16, sub 2 (sc 3)
  expected[64] = 2.5f;      // q = 2 | 2 << 4 = 34 -> 2, sub 4 (sc 5)
  expected[96] = 28.0f;     // q = 0 | 3 << 4 = 48 -> 16, sub 6 (sc 7)
  expected[255] = -992.0f;  // ql[127] high nibble 15 | qh[63] bits 6-7 (3) << 4 = 63 -> 31, sc -128
  float out[256];
  ASSERT_TRUE(dequantize_row_ref(GgmlType::Q6_K, &blk, out, 256));
  for (int i = 0; i < 256; ++i) EXPECT_EQ(out[i], expected[i]) << i;
  ASSERT_TRUE(dequantize_row(GgmlType::Q6_K, &blk, out, 256));
  for (int i = 0; i < 256; ++i) EXPECT_EQ(out[i], expected[i]) << i;
}

TEST(KernelsQuant, KnownAnswerQ8_K) {
  BlockQ8_K blk = {};
  blk.d = 0.5f;
  for (int j = 0; j < 256; ++j) blk.qs[j] = static_cast<int8_t>(j - 128);
  float out[256];
  ASSERT_TRUE(dequantize_row_ref(GgmlType::Q8_K, &blk, out, 256));
  for (int j = 0; j < 256; ++j) EXPECT_EQ(out[j], 0.5f * (j - 128)) << j;
}

TEST(KernelsQuant, UnsupportedTypeReturnsFalse) {
  float in[32] = {}, out[32];
  uint8_t buf[64];
  EXPECT_FALSE(dequantize_row_ref(GgmlType::Q5_0, buf, out, 32));
  EXPECT_FALSE(dequantize_row(GgmlType::Q5_0, buf, out, 32));
  EXPECT_FALSE(quantize_row_ref(GgmlType::Q5_1, in, buf, 32));
}

// ---------------------------------------------------------------- SIMD == reference

TEST(KernelsQuant, DequantizeSimdMatchesRefBitExact) {
  const int64_t n = 256 * 7;
  const auto x = random_values(n, 11);
  for (GgmlType t : {GgmlType::F32, GgmlType::F16, GgmlType::BF16, GgmlType::Q8_0, GgmlType::Q4_0,
                     GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::Q8_K}) {
    std::vector<uint8_t> q(row_bytes(t, n));
    ASSERT_TRUE(quantize_row_ref(t, x.data(), q.data(), n));
    // Odd lengths too (whole blocks): exercises the SIMD tails.
    const int64_t block = ggml_type_traits(t)->block_elems;
    for (int64_t len : {n, n - block, block, 3 * block}) {
      if (block == 1) len += 5;
      if (len > n) len = n;
      const auto ref = dequant_ref(t, q.data(), len);
      std::vector<float> simd(static_cast<size_t>(len));
      ASSERT_TRUE(dequantize_row(t, q.data(), simd.data(), len));
      ASSERT_EQ(0, std::memcmp(ref.data(), simd.data(), ref.size() * sizeof(float)))
          << ggml_type_name(t) << " len " << len;
    }
  }
}

TEST(KernelsQuant, DequantizeEveryCpuTargetMatchesRef) {
  const int64_t n = 256 * 3;
  const auto x = random_values(n, 12);
  testing::for_each_cpu_target([&](int64_t target) {
    for (GgmlType t : {GgmlType::F32, GgmlType::F16, GgmlType::BF16, GgmlType::Q8_0, GgmlType::Q4_0,
                       GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::Q8_K}) {
      std::vector<uint8_t> q(row_bytes(t, n));
      ASSERT_TRUE(quantize_row_ref(t, x.data(), q.data(), n));
      const auto ref = dequant_ref(t, q.data(), n);
      std::vector<float> simd(static_cast<size_t>(n));
      ASSERT_TRUE(dequantize_row(t, q.data(), simd.data(), n));
      EXPECT_EQ(0, std::memcmp(ref.data(), simd.data(), ref.size() * sizeof(float)))
          << ggml_type_name(t) << " on " << hwy::TargetName(target);
    }
  });
}

// Activation rows with exact rounding ties after scaling: Q8_0 block amax 127 -> id = 1, so x.5
// values must round away from zero (roundf); Q8_K block max -127 -> iscale = 1, ties to even.
std::vector<float> activations_with_ties(int64_t n, uint32_t seed) {
  auto x = random_values(n, seed);
  for (int64_t b = 0; b < 2 * 32; b += 32) {
    x[b] = 127.0f;
    for (int j = 1; j < 32; ++j) x[b + j] = static_cast<float>(j % 9) - 4.5f;
  }
  x[256] = -127.0f;
  for (int j = 1; j < 256; ++j) x[256 + j] = static_cast<float>(j % 11) - 5.5f;
  x[512 + 7] = -x[512 + 3] - 1e3f;  // |max| tie-breaking: first of two equal magnitudes wins
  x[512 + 9] = -x[512 + 7];
  return x;
}

TEST(KernelsQuant, ActivationQuantizerByteIdenticalToRefEveryTarget) {
  const int64_t n = 256 * 4;
  const auto x = activations_with_ties(n, 21);
  testing::for_each_cpu_target([&](int64_t target) {
    SCOPED_TRACE(hwy::TargetName(target));
    for (GgmlType t : {GgmlType::Q8_0, GgmlType::Q8_K}) {
      std::vector<uint8_t> ref(row_bytes(t, n)), simd(ref.size(), 0xCD);
      ASSERT_TRUE(quantize_row_ref(t, x.data(), ref.data(), n));
      std::vector<float> scales(n / 32);
      std::vector<int32_t> sums(n / 32);
      const bool q8_0 = t == GgmlType::Q8_0;
      quantize_activation_row(t, x.data(), simd.data(), n, q8_0 ? scales.data() : nullptr,
                              q8_0 ? sums.data() : nullptr);
      EXPECT_EQ(0, std::memcmp(ref.data(), simd.data(), ref.size())) << ggml_type_name(t);
      if (!q8_0) continue;
      const auto* blocks = reinterpret_cast<const BlockQ8_0*>(ref.data());
      for (int64_t b = 0; b < n / 32; ++b) {
        int32_t sum = 0;
        for (int j = 0; j < 32; ++j) sum += blocks[b].qs[j];
        EXPECT_EQ(sums[b], sum) << b;
        EXPECT_EQ(scales[b], f16_to_f32(blocks[b].d)) << b;
      }
    }
  });
  // The tie values really are ties: 2 * 4.5 rounds away from zero in Q8_0 ...
  std::vector<BlockQ8_0> q(n / 32);
  quantize_row_q8_0_ref(x.data(), q.data(), n);
  EXPECT_EQ(q[0].qs[1], -4);  // x = 1 % 9 - 4.5 = -3.5 -> -4
  EXPECT_EQ(q[0].qs[2], -3);  // -2.5 -> -3
  // ... and to even in Q8_K (max = -127 gives iscale = -127 / max = 1).
  std::vector<BlockQ8_K> k(n / 256);
  quantize_row_q8_k_ref(x.data(), k.data(), n);
  EXPECT_EQ(k[1].qs[1], -4);  // -4.5 -> -4
  EXPECT_EQ(k[1].qs[10], 4);  // 4.5 -> 4
}

// ---------------------------------------------------------------- round trips

TEST(KernelsQuant, RoundTripFloatTypes) {
  const int64_t n = 1000;
  const auto x = random_values(n, 3);
  for (GgmlType t : {GgmlType::F32, GgmlType::F16, GgmlType::BF16}) {
    std::vector<uint8_t> q(row_bytes(t, n));
    ASSERT_TRUE(quantize_row_ref(t, x.data(), q.data(), n));
    const auto y = dequant_ref(t, q.data(), n);
    // Relative rounding error: 0 (f32), 2^-11 (f16, 10 mantissa bits), 2^-8 (bf16, 7 bits).
    const float rel = t == GgmlType::F32 ? 0.0f : t == GgmlType::F16 ? 0x1p-11f : 0x1p-8f;
    for (int64_t i = 0; i < n; ++i) EXPECT_LE(std::fabs(x[i] - y[i]), std::fabs(x[i]) * rel) << i;
  }
}

TEST(KernelsQuant, RoundTripQ8_0) {
  const int64_t n = 32 * 64;
  const auto x = random_values(n, 5);
  std::vector<BlockQ8_0> q(n / 32);
  quantize_row_q8_0_ref(x.data(), q.data(), n);
  const auto y = dequant_ref(GgmlType::Q8_0, q.data(), n);
  for (int64_t b = 0; b < n / 32; ++b) {
    float amax = 0.0f;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[b * 32 + j]));
    // Rounding to the nearest step d = amax/127 (<= d/2), plus the f16 rounding of d itself
    // scaled by |q| <= 127.
    const float d = amax / 127.0f;
    const float d16 = f16_to_f32(q[b].d);
    const float bound = d / 2 + 127.0f * std::fabs(d - d16) + 1e-6f * amax;
    for (int j = 0; j < 32; ++j) EXPECT_LE(std::fabs(x[b * 32 + j] - y[b * 32 + j]), bound);
  }
}

TEST(KernelsQuant, RoundTripQ4_0) {
  const int64_t n = 32 * 64;
  const auto x = random_values(n, 6);
  std::vector<BlockQ4_0> q(n / 32);
  quantize_row_q4_0_ref(x.data(), q.data(), n);
  const auto y = dequant_ref(GgmlType::Q4_0, q.data(), n);
  for (int64_t b = 0; b < n / 32; ++b) {
    float amax = 0.0f;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[b * 32 + j]));
    // Step d = amax/8; the level range is [-8, 7] with the extreme value mapped to -8, so values
    // of the opposite sign near amax clamp at 7 and may be off by up to one full step. Plus the
    // f16 rounding of d scaled by |q| <= 8.
    const float d = amax / 8.0f;
    const float d16 = std::fabs(f16_to_f32(q[b].d));
    const float bound = d + 8.0f * std::fabs(d - d16) + 1e-6f * amax;
    float sq = 0.0f;
    for (int j = 0; j < 32; ++j) {
      const float e = std::fabs(x[b * 32 + j] - y[b * 32 + j]);
      EXPECT_LE(e, bound);
      sq += e * e;
    }
    // Non-clamped values are within d/2, so the RMS error stays well under a step.
    EXPECT_LE(std::sqrt(sq / 32), 0.5f * d);
  }
}

// k-quants fit scales by weighted least squares, so there is no tight per-value bound; check
// (a) per sub-block max error <= one quantization step of that sub-block's range and (b) the
// overall RMS error relative to the data's RMS, with margins documented per format.
struct KQuantStats {
  float worst_step_ratio = 0.0f;  // max over sub-blocks of max_err / (range / levels)
  float rel_rms = 0.0f;           // rms(err) / rms(x)
};

KQuantStats kquant_stats(const std::vector<float>& x, const std::vector<float>& y, int sub,
                         float levels, bool symmetric) {
  KQuantStats s;
  double se = 0.0, sx = 0.0;
  for (size_t b = 0; b < x.size(); b += sub) {
    float lo = 0.0f, hi = 0.0f, amax = 0.0f, max_err = 0.0f;
    for (int j = 0; j < sub; ++j) {
      lo = std::min(lo, x[b + j]);
      hi = std::max(hi, x[b + j]);
      amax = std::max(amax, std::fabs(x[b + j]));
      max_err = std::max(max_err, std::fabs(x[b + j] - y[b + j]));
      se += double(x[b + j] - y[b + j]) * (x[b + j] - y[b + j]);
      sx += double(x[b + j]) * x[b + j];
    }
    const float step = symmetric ? 2 * amax / levels : (hi - lo) / levels;
    s.worst_step_ratio = std::max(s.worst_step_ratio, max_err / step);
  }
  s.rel_rms = static_cast<float>(std::sqrt(se / sx));
  return s;
}

TEST(KernelsQuant, RoundTripQ4_K) {
  const int64_t n = 256 * 32;
  const auto x = random_values(n, 7);
  std::vector<BlockQ4_K> q(n / 256);
  quantize_row_q4_k_ref(x.data(), q.data(), n);
  const auto y = dequant_ref(GgmlType::Q4_K, q.data(), n);
  const auto s = kquant_stats(x, y, 32, 15.0f, false);
  // A uniform 4-bit quantizer of the sub-block range errs by <= step/2; the fitted scale/min may
  // clip the extremes and the 6-bit scale rounding shrinks the grid (measured 1.09 steps on this
  // data with outliers): allow 1.5 steps.
  EXPECT_LE(s.worst_step_ratio, 1.5f);
  // Uniform 4-bit over a Gaussian sub-block's ~4 sigma range: step/sqrt(12) ~ 0.077 sigma;
  // measured 0.087. 0.10 catches a broken fit or a layout slip.
  EXPECT_LE(s.rel_rms, 0.10f);
}

TEST(KernelsQuant, RoundTripQ5_K) {
  const int64_t n = 256 * 32;
  const auto x = random_values(n, 17);
  std::vector<BlockQ5_K> q(n / 256);
  quantize_row_q5_k_ref(x.data(), q.data(), n);
  const auto y = dequant_ref(GgmlType::Q5_K, q.data(), n);
  const auto s = kquant_stats(x, y, 32, 31.0f, false);
  // As Q4_K with 31 levels: the fitted scale/min may clip the extremes and the 6-bit scales
  // shrink the grid; allow 1.5 steps.
  EXPECT_LE(s.worst_step_ratio, 1.5f);
  // Half Q4_K's step: about half its error (Q4_K measures 0.087).
  EXPECT_LE(s.rel_rms, 0.05f);
  // The fifth bit is used: some values are above 15.
  int high = 0;
  for (const BlockQ5_K& b : q)
    for (uint8_t h : b.qh) high += h != 0;
  EXPECT_GT(high, 0);
}

TEST(KernelsQuant, RoundTripQ6_K) {
  const int64_t n = 256 * 32;
  const auto x = random_values(n, 8);
  std::vector<BlockQ6_K> q(n / 256);
  quantize_row_q6_k_ref(x.data(), q.data(), n);
  const auto y = dequant_ref(GgmlType::Q6_K, q.data(), n);
  const auto s = kquant_stats(x, y, 16, 63.0f, true);
  // Symmetric 6-bit levels [-32, 31] over [-amax, amax] per sub-block of 16. The scale is fitted
  // with x^2 weights (favours large values) and rounded to 8 bits relative to the block's largest
  // scale, which can clip the extreme (measured 1.19 steps): allow 1.5 steps.
  EXPECT_LE(s.worst_step_ratio, 1.5f);
  // Measured 0.024 relative RMS; a 4-bit-like error (~0.08) or a layout slip fails.
  EXPECT_LE(s.rel_rms, 0.03f);
}

TEST(KernelsQuant, RoundTripQ8_K) {
  const int64_t n = 256 * 8;
  const auto x = random_values(n, 9);
  std::vector<BlockQ8_K> q(n / 256);
  quantize_row_q8_k_ref(x.data(), q.data(), n);
  const auto y = dequant_ref(GgmlType::Q8_K, q.data(), n);
  for (int64_t b = 0; b < n / 256; ++b) {
    float amax = 0.0f;
    for (int j = 0; j < 256; ++j) amax = std::max(amax, std::fabs(x[b * 256 + j]));
    for (int j = 0; j < 256; ++j)
      EXPECT_LE(std::fabs(x[b * 256 + j] - y[b * 256 + j]), amax / 127 / 2 * 1.0001f);
    for (int j = 0; j < 16; ++j) {
      int sum = 0;
      for (int l = 0; l < 16; ++l) sum += q[b].qs[16 * j + l];
      EXPECT_EQ(q[b].bsums[j], sum);
    }
  }
}

TEST(KernelsQuant, ZeroBlocksQuantizeToZero) {
  const int64_t n = 256;
  std::vector<float> x(n, 0.0f), y(n, 1.0f);
  for (GgmlType t :
       {GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::Q8_K}) {
    std::vector<uint8_t> q(row_bytes(t, n), 0xAB);
    ASSERT_TRUE(quantize_row_ref(t, x.data(), q.data(), n));
    ASSERT_TRUE(dequantize_row_ref(t, q.data(), y.data(), n));
    for (int64_t i = 0; i < n; ++i) EXPECT_EQ(y[i], 0.0f) << ggml_type_name(t) << " " << i;
  }
}

}  // namespace
}  // namespace hinge::kernels
