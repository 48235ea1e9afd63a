// KV-cache row formats: hand-computed fp8/int8/int4 encodings (so a layout or rounding mistake
// cannot pass), an exhaustive nearest-even check of the fp8 encoders against a brute-force search,
// round-trip error bounds per dtype, zero / non-finite rows, and SIMD == scalar reference on every
// CPU target this machine supports.
#include <gtest/gtest.h>
#include <hwy/targets.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "common/half.h"
#include "kernels/kv_quant.h"
#include "kv/kv_spec.h"
#include "hwy_test_util.h"

namespace hinge::kernels {
namespace {

constexpr KvDtype kAllDtypes[] = {KvDtype::kF32,     KvDtype::kF16,  KvDtype::kBf16,
                                  KvDtype::kFp8E4m3, KvDtype::kFp8E5m2, KvDtype::kInt8,
                                  KvDtype::kInt4};
constexpr int kHeadDims[] = {2, 6, 64, 80, 128, 256};
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

std::vector<float> random_row(int n, uint32_t seed, float sigma = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, sigma);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = dist(rng);
  v[static_cast<size_t>(seed % static_cast<uint32_t>(n))] *= 8.0f;  // one outlier, as K rows have
  return v;
}

std::vector<uint8_t> quantize(KvDtype t, const std::vector<float>& x, float scale) {
  std::vector<uint8_t> row(kv_row_bytes(t, static_cast<int>(x.size())));
  kv_quantize_row_ref(t, x.data(), row.data(), static_cast<int>(x.size()), scale);
  return row;
}

std::vector<float> dequantize_ref(KvDtype t, const std::vector<uint8_t>& row, int n, float scale) {
  std::vector<float> out(static_cast<size_t>(n));
  kv_dequantize_row_ref(t, row.data(), out.data(), n, scale);
  return out;
}

float stored_scale(const std::vector<uint8_t>& row) {
  uint16_t h;
  std::memcpy(&h, row.data(), 2);
  return f16_to_f32(h);
}

// A scale fit for the dtype: fp8 from the data, 1 (ignored) otherwise.
float scale_for(KvDtype t, const std::vector<float>& x) {
  if (t == KvDtype::kFp8E4m3 || t == KvDtype::kFp8E5m2) {
    return kv_fp8_scale_for(t, x.data(), x.size());
  }
  return 1.0f;
}

TEST(KernelsKvQuant, RowBytesMatchKvSpec) {
  for (KvDtype t : kAllDtypes) {
    for (int n : {1, 2, 3, 6, 63, 64, 80, 128, 256}) {
      EXPECT_EQ(static_cast<int64_t>(kv_row_bytes(t, n)), kv::kv_dtype_head_bytes(t, n))
          << kv::kv_dtype_name(t) << " head_dim " << n;
    }
  }
  EXPECT_EQ(kv_row_bytes(KvDtype::kInt8, 128), 130u);
  EXPECT_EQ(kv_row_bytes(KvDtype::kInt4, 128), 66u);
}

TEST(KernelsKvQuant, Fp8E4m3KnownAnswers) {
  EXPECT_EQ(fp8_e4m3_from_f32(1.0f), 0x38);
  EXPECT_EQ(fp8_e4m3_from_f32(-0.5f), 0xB0);
  EXPECT_EQ(fp8_e4m3_from_f32(448.0f), 0x7E);
  EXPECT_EQ(fp8_e4m3_from_f32(0.0f), 0x00);
  EXPECT_EQ(fp8_e4m3_from_f32(-0.0f), 0x80);
  EXPECT_EQ(fp8_e4m3_from_f32(1.75f), 0x3E);
  // Saturation: above max, the halfway point to the (NaN) next code, huge, inf.
  EXPECT_EQ(fp8_e4m3_from_f32(464.0f), 0x7E);
  EXPECT_EQ(fp8_e4m3_from_f32(500.0f), 0x7E);
  EXPECT_EQ(fp8_e4m3_from_f32(-1e30f), 0xFE);
  EXPECT_EQ(fp8_e4m3_from_f32(kInf), 0x7E);
  EXPECT_EQ(fp8_e4m3_from_f32(-kInf), 0xFE);
  EXPECT_EQ(fp8_e4m3_from_f32(kNaN), 0x7F);
  EXPECT_EQ(fp8_e4m3_from_f32(-kNaN), 0x7F);
  // Subnormals: step 2^-9; min normal 2^-6 = 0x08.
  EXPECT_EQ(fp8_e4m3_from_f32(std::ldexp(1.0f, -9)), 0x01);
  EXPECT_EQ(fp8_e4m3_from_f32(std::ldexp(7.0f, -9)), 0x07);
  EXPECT_EQ(fp8_e4m3_from_f32(std::ldexp(1.0f, -6)), 0x08);
  EXPECT_EQ(fp8_e4m3_from_f32(std::ldexp(-3.0f, -9)), 0x83);
  // Ties to even: subnormal, subnormal->normal carry, normal.
  EXPECT_EQ(fp8_e4m3_from_f32(std::ldexp(1.0f, -10)), 0x00);   // 0.5 ulp -> 0
  EXPECT_EQ(fp8_e4m3_from_f32(std::ldexp(1.01f, -10)), 0x01);  // just above the tie
  EXPECT_EQ(fp8_e4m3_from_f32(std::ldexp(3.0f, -10)), 0x02);   // 1.5 -> 2
  EXPECT_EQ(fp8_e4m3_from_f32(std::ldexp(15.0f, -10)), 0x08);  // 7.5 -> 8 = min normal
  EXPECT_EQ(fp8_e4m3_from_f32(1.0625f), 0x38);                 // 1 + 1/16 -> 1.0
  EXPECT_EQ(fp8_e4m3_from_f32(1.1875f), 0x3A);                 // 1.125 + 1/16 -> 1.25
  EXPECT_EQ(fp8_e4m3_from_f32(1.9375f), 0x40);                 // 1.875 + 1/16 -> 2.0 (carry)
  EXPECT_EQ(fp8_e4m3_from_f32(1.07f), 0x39);
  // Decode.
  EXPECT_EQ(fp8_e4m3_to_f32(0x38), 1.0f);
  EXPECT_EQ(fp8_e4m3_to_f32(0x7E), 448.0f);
  EXPECT_EQ(fp8_e4m3_to_f32(0xFE), -448.0f);
  EXPECT_EQ(fp8_e4m3_to_f32(0x01), std::ldexp(1.0f, -9));
  EXPECT_EQ(fp8_e4m3_to_f32(0x08), std::ldexp(1.0f, -6));
  EXPECT_TRUE(std::isnan(fp8_e4m3_to_f32(0x7F)));
  EXPECT_TRUE(std::isnan(fp8_e4m3_to_f32(0xFF)));
  EXPECT_EQ(fp8_e4m3_to_f32(0x78), 256.0f);  // exponent 15 is finite in e4m3
}

TEST(KernelsKvQuant, Fp8E5m2KnownAnswers) {
  EXPECT_EQ(fp8_e5m2_from_f32(1.0f), 0x3C);
  EXPECT_EQ(fp8_e5m2_from_f32(-2.0f), 0xC0);
  EXPECT_EQ(fp8_e5m2_from_f32(57344.0f), 0x7B);
  EXPECT_EQ(fp8_e5m2_from_f32(61440.0f), 0x7B);  // tie with inf: saturates
  EXPECT_EQ(fp8_e5m2_from_f32(1e9f), 0x7B);
  EXPECT_EQ(fp8_e5m2_from_f32(kInf), 0x7B);
  EXPECT_EQ(fp8_e5m2_from_f32(-kInf), 0xFB);
  EXPECT_EQ(fp8_e5m2_from_f32(kNaN), 0x7F);
  EXPECT_EQ(fp8_e5m2_from_f32(std::ldexp(1.0f, -16)), 0x01);
  EXPECT_EQ(fp8_e5m2_from_f32(std::ldexp(3.0f, -16)), 0x03);
  EXPECT_EQ(fp8_e5m2_from_f32(std::ldexp(1.0f, -14)), 0x04);
  EXPECT_EQ(fp8_e5m2_from_f32(std::ldexp(1.0f, -17)), 0x00);  // tie -> 0
  EXPECT_EQ(fp8_e5m2_from_f32(std::ldexp(3.0f, -17)), 0x02);  // 1.5 -> 2
  EXPECT_EQ(fp8_e5m2_from_f32(1.125f), 0x3C);                 // tie -> 1.0
  EXPECT_EQ(fp8_e5m2_from_f32(1.375f), 0x3E);                 // tie -> 1.5
  EXPECT_EQ(fp8_e5m2_to_f32(0x3C), 1.0f);
  EXPECT_EQ(fp8_e5m2_to_f32(0x7B), 57344.0f);
  EXPECT_EQ(fp8_e5m2_to_f32(0x01), std::ldexp(1.0f, -16));
  EXPECT_EQ(fp8_e5m2_to_f32(0x7C), kInf);
  EXPECT_EQ(fp8_e5m2_to_f32(0xFC), -kInf);
  EXPECT_TRUE(std::isnan(fp8_e5m2_to_f32(0x7D)));
  EXPECT_TRUE(std::isnan(fp8_e5m2_to_f32(0xFF)));
}

// Brute force: the finite code of the right sign nearest to x, ties to the even code.
uint8_t nearest_code(float x, float (*decode)(uint8_t), float max_finite) {
  const uint8_t sign = std::signbit(x) ? 0x80 : 0x00;
  const double a = std::min<double>(std::fabs(x), max_finite);
  int best = -1;
  double best_err = 0.0;
  for (int c = 0; c < 128; ++c) {
    const float v = decode(static_cast<uint8_t>(c));
    if (!std::isfinite(v)) continue;
    const double err = std::fabs(static_cast<double>(v) - a);
    if (best < 0 || err < best_err || (err == best_err && (c & 1) == 0)) {
      best = c;
      best_err = err;
    }
  }
  return static_cast<uint8_t>(sign | best);
}

TEST(KernelsKvQuant, Fp8EncodersAreNearestEvenAndInvertDecode) {
  struct Codec {
    uint8_t (*encode)(float);
    float (*decode)(uint8_t);
    float max_finite;
  };
  for (const Codec& c : {Codec{fp8_e4m3_from_f32, fp8_e4m3_to_f32, kFp8E4m3MaxFinite},
                         Codec{fp8_e5m2_from_f32, fp8_e5m2_to_f32, kFp8E5m2MaxFinite}}) {
    for (int b = 0; b < 256; ++b) {
      const float v = c.decode(static_cast<uint8_t>(b));
      if (std::isfinite(v)) {
        EXPECT_EQ(c.encode(v), b) << "code " << b;
      }
    }
    // Random magnitudes over the whole range, plus every midpoint between neighbouring codes.
    std::mt19937 rng(5);
    std::uniform_real_distribution<float> log2mag(-20.0f, 17.0f);
    for (int i = 0; i < 20000; ++i) {
      float x = std::exp2(log2mag(rng));
      if (i & 1) x = -x;
      ASSERT_EQ(c.encode(x), nearest_code(x, c.decode, c.max_finite)) << x;
    }
    for (int b = 0; b + 1 < 127; ++b) {
      const float lo = c.decode(static_cast<uint8_t>(b)), hi = c.decode(static_cast<uint8_t>(b + 1));
      if (!std::isfinite(hi)) continue;
      const float mid = 0.5f * (lo + hi);  // exact: fits in f32
      EXPECT_EQ(c.encode(mid), (b & 1) ? b + 1 : b) << "midpoint above code " << b;
    }
  }
}

TEST(KernelsKvQuant, Fp8ScaleHelper) {
  const std::vector<float> x = {0.5f, -3.5f, 1.0f, kNaN, kInf, 2.0f};
  EXPECT_FLOAT_EQ(kv_fp8_scale_for(KvDtype::kFp8E4m3, x.data(), x.size()), 3.5f / 448.0f);
  EXPECT_FLOAT_EQ(kv_fp8_scale_for(KvDtype::kFp8E5m2, x.data(), x.size()), 3.5f / 57344.0f);
  // Folding calibration batches keeps the max; all-zero data without history gives 1.
  EXPECT_FLOAT_EQ(kv_fp8_scale_for(KvDtype::kFp8E4m3, x.data(), x.size(), 0.5f), 0.5f);
  const std::vector<float> zeros(8, 0.0f);
  EXPECT_EQ(kv_fp8_scale_for(KvDtype::kFp8E4m3, zeros.data(), zeros.size()), 1.0f);
  EXPECT_EQ(kv_fp8_scale_for(KvDtype::kFp8E4m3, zeros.data(), zeros.size(), 0.25f), 0.25f);
  // The absmax element lands on the max finite code.
  const float s = kv_fp8_scale_for(KvDtype::kFp8E4m3, x.data(), x.size());
  const auto row = quantize(KvDtype::kFp8E4m3, x, s);
  EXPECT_EQ(row[1], 0xFE);
  EXPECT_EQ(row[3], 0x7F);  // NaN
  EXPECT_EQ(row[4], 0x7E);  // inf saturates
}

TEST(KernelsKvQuant, Int8KnownAnswer) {
  // absmax 127 -> d = 1 exactly (f16 0x3C00); q = round-half-even(x).
  const std::vector<float> x = {127.0f, -63.5f, 2.5f, -2.5f, 0.5f, 1.5f, 3.49f, -127.0f};
  const auto row = quantize(KvDtype::kInt8, x, 1.0f);
  const std::vector<uint8_t> want = {0x00, 0x3C, 127, static_cast<uint8_t>(-64), 2,
                                     static_cast<uint8_t>(-2), 0, 2, 3, static_cast<uint8_t>(-127)};
  EXPECT_EQ(row, want);
  const auto back = dequantize_ref(KvDtype::kInt8, row, 8, 1.0f);
  EXPECT_EQ(back, (std::vector<float>{127, -64, 2, -2, 0, 2, 3, -127}));
}

TEST(KernelsKvQuant, Int4KnownAnswer) {
  // absmax 7 -> d = 1; nibble = q + 8, element 2j low.
  const std::vector<float> x = {7.0f, -7.0f, 2.5f, -0.5f, 3.5f, 1.0f, -3.0f, 0.0f};
  const auto row = quantize(KvDtype::kInt4, x, 1.0f);
  EXPECT_EQ(row, (std::vector<uint8_t>{0x00, 0x3C, 0x1F, 0x8A, 0x9C, 0x85}));
  const auto back = dequantize_ref(KvDtype::kInt4, row, 8, 1.0f);
  EXPECT_EQ(back, (std::vector<float>{7, -7, 2, 0, 4, 1, -3, 0}));
  // Odd head_dim: the padding nibble is 8 (zero).
  const auto odd = quantize(KvDtype::kInt4, {7.0f, -7.0f, 1.0f}, 1.0f);
  EXPECT_EQ(odd, (std::vector<uint8_t>{0x00, 0x3C, 0x1F, 0x89}));
}

TEST(KernelsKvQuant, RoundTripErrorBounds) {
  for (int n : kHeadDims) {
    for (uint32_t seed = 1; seed <= 20; ++seed) {
      const auto x = random_row(n, seed * 31 + static_cast<uint32_t>(n), seed % 3 ? 1.0f : 40.0f);
      float amax = 0.0f;
      for (float v : x) amax = std::max(amax, std::fabs(v));
      for (KvDtype t : kAllDtypes) {
        const float scale = scale_for(t, x);
        const auto row = quantize(t, x, scale);
        const auto y = dequantize_ref(t, row, n, scale);
        for (int i = 0; i < n; ++i) {
          const float xi = x[static_cast<size_t>(i)], yi = y[static_cast<size_t>(i)];
          const float err = std::fabs(xi - yi);
          float bound = 0.0f;
          switch (t) {
            case KvDtype::kF32:
              bound = 0.0f;
              break;
            case KvDtype::kF16:
              bound = std::fabs(xi) * 0x1p-11f;
              break;
            case KvDtype::kBf16:
              bound = std::fabs(xi) * 0x1p-8f;
              break;
            case KvDtype::kFp8E4m3:  // 3 mantissa bits; subnormal step 2^-9
              bound = std::max(std::fabs(xi) * 0x1p-4f, 0x1p-10f * scale) * 1.0001f;
              break;
            case KvDtype::kFp8E5m2:  // 2 mantissa bits; subnormal step 2^-16
              bound = std::max(std::fabs(xi) * 0x1p-3f, 0x1p-17f * scale) * 1.0001f;
              break;
            case KvDtype::kInt8:
            case KvDtype::kInt4: {
              const float qmax = t == KvDtype::kInt8 ? 127.0f : 7.0f;
              const float d = stored_scale(row);
              EXPECT_GT(d, 0.0f);
              EXPECT_LE(std::fabs(d - amax / qmax), amax / qmax * 0x1p-11f);
              bound = d / 2 + qmax * std::fabs(d - amax / qmax) + std::fabs(xi) * 1e-6f;
              break;
            }
          }
          ASSERT_LE(err, bound) << kv::kv_dtype_name(t) << " n=" << n << " i=" << i << " x=" << xi;
        }
      }
    }
  }
}

TEST(KernelsKvQuant, ZeroRowsDecodeToZeros) {
  for (int n : kHeadDims) {
    const std::vector<float> zeros(static_cast<size_t>(n), 0.0f);
    std::vector<float> q = random_row(n, 3);
    for (KvDtype t : kAllDtypes) {
      const float scale = scale_for(t, zeros);  // 1.0 for fp8: nothing to calibrate on
      const auto row = quantize(t, zeros, scale);
      EXPECT_EQ(dequantize_ref(t, row, n, scale), zeros) << kv::kv_dtype_name(t);
      std::vector<float> back(static_cast<size_t>(n), -1.0f);
      kv_dequantize_row(t, row.data(), back.data(), n, scale);
      EXPECT_EQ(back, zeros) << kv::kv_dtype_name(t);
      EXPECT_EQ(kv_dot_row(t, q.data(), row.data(), n, scale), 0.0f);
      EXPECT_EQ(kv_dot_row_ref(t, q.data(), row.data(), n, scale), 0.0f);
      std::vector<float> out = q;
      kv_axpy_row(t, 2.0f, row.data(), out.data(), n, scale);
      EXPECT_EQ(out, q);
      if (t == KvDtype::kInt8 || t == KvDtype::kInt4) {
        EXPECT_EQ(stored_scale(row), 0.0f);
      }
    }
  }
  // Values too small for an f16 scale (d underflows to 0) also store zeros, not NaN.
  const std::vector<float> tiny = {1e-12f, -2e-12f, 0.0f, 5e-13f};
  for (KvDtype t : {KvDtype::kInt8, KvDtype::kInt4}) {
    const auto y = dequantize_ref(t, quantize(t, tiny, 1.0f), 4, 1.0f);
    for (float v : y) EXPECT_EQ(v, 0.0f);
  }
}

TEST(KernelsKvQuant, NonFiniteInputsAreDeterministic) {
  const std::vector<float> x = {kNaN, kInf, -kInf, 1.0f, -0.5f, 0.0f};
  // int8: NaN -> 0, +-inf -> +-127, scale from the finite values only (amax 1).
  const auto r8 = quantize(KvDtype::kInt8, x, 1.0f);
  EXPECT_EQ(stored_scale(r8), f16_to_f32(f32_to_f16(1.0f / 127.0f)));
  EXPECT_EQ(static_cast<int8_t>(r8[2]), 0);
  EXPECT_EQ(static_cast<int8_t>(r8[3]), 127);
  EXPECT_EQ(static_cast<int8_t>(r8[4]), -127);
  EXPECT_EQ(static_cast<int8_t>(r8[5]), 127);
  EXPECT_EQ(static_cast<int8_t>(r8[6]), -64);  // -0.5 / d = -63.504 (d rounded down to f16)
  // int4: same policy with qmax 7.
  const auto r4 = quantize(KvDtype::kInt4, x, 1.0f);
  EXPECT_EQ(r4[2], 0xF8);  // NaN -> 8 (low), +inf -> 15 (high)
  EXPECT_EQ(r4[3], 0xF1);  // -inf -> 1, 1.0 -> 15
  // Only-non-finite row: scale 0; infinities still saturate, decode is 0 * q = 0, never NaN.
  const std::vector<float> bad = {kNaN, kInf, -kInf, kNaN};
  for (KvDtype t : {KvDtype::kInt8, KvDtype::kInt4}) {
    const auto row = quantize(t, bad, 1.0f);
    EXPECT_EQ(stored_scale(row), 0.0f);
    for (float v : dequantize_ref(t, row, 4, 1.0f)) EXPECT_EQ(v, 0.0f);
  }
  // fp8: NaN -> 0x7F, inf -> max finite.
  EXPECT_EQ(quantize(KvDtype::kFp8E4m3, x, 1.0f),
            (std::vector<uint8_t>{0x7F, 0x7E, 0xFE, 0x38, 0xB0, 0x00}));
  EXPECT_EQ(quantize(KvDtype::kFp8E5m2, x, 1.0f),
            (std::vector<uint8_t>{0x7F, 0x7B, 0xFB, 0x3C, 0xB8, 0x00}));
  // f16/bf16 keep IEEE specials.
  const auto h = dequantize_ref(KvDtype::kF16, quantize(KvDtype::kF16, x, 1.0f), 6, 1.0f);
  EXPECT_TRUE(std::isnan(h[0]));
  EXPECT_EQ(h[1], kInf);
  EXPECT_EQ(h[2], -kInf);
}

// f16 rows keep inf / NaN / denormals on every target: Highway 1.0.3's emulated f16 -> f32
// (SSE4 / SSSE3 / EMU128) turns inf and NaN into finite numbers, so the kernels use their own
// exact conversion. Specials sit at every position of a 64-element row (all vector lanes and
// the scalar tail of a 67-element row).
TEST(KernelsKvQuant, F16SpecialsRoundTripOnEveryCpuTarget) {
  const uint16_t specials[] = {0x7C00, 0xFC00, 0x7E00, 0xFE01, 0x7BFF, 0x0001, 0x83FF, 0x8000};
  const int tested = testing::for_each_cpu_target([&](int64_t target) {
    for (int n : {64, 67}) {
      for (int shift = 0; shift < 8; ++shift) {
        std::vector<uint16_t> bits(static_cast<size_t>(n));
        for (int i = 0; i < n; ++i)
          bits[static_cast<size_t>(i)] =
              (i + shift) % 3 == 0 ? specials[(i + shift) % 8] : f32_to_f16(0.25f * (i % 9) - 1.0f);
        ASSERT_EQ(kv_row_bytes(KvDtype::kF16, n), bits.size() * sizeof(uint16_t));
        std::vector<float> out(static_cast<size_t>(n));
        kv_dequantize_row(KvDtype::kF16, bits.data(), out.data(), n, 1.0f);
        for (int i = 0; i < n; ++i) {
          const size_t k = static_cast<size_t>(i);
          const float want = f16_to_f32(bits[k]);
          if (std::isnan(want)) {
            EXPECT_TRUE(std::isnan(out[k])) << "i=" << i << " on " << hwy::TargetName(target);
          } else {
            EXPECT_EQ(0, std::memcmp(&out[k], &want, sizeof(float)))
                << "bits=" << bits[k] << " got " << out[k] << " on " << hwy::TargetName(target);
          }
        }
        // The fused dot sees the same values: one +inf among finite terms gives +inf (or NaN
        // when the row also holds -inf or NaN).
        std::vector<float> q(static_cast<size_t>(n), 1.0f);
        bool has_nan = false, has_pos_inf = false, has_neg_inf = false;
        for (uint16_t b : bits) {
          const float v = f16_to_f32(b);
          has_nan |= std::isnan(v);
          has_pos_inf |= v == kInf;
          has_neg_inf |= v == -kInf;
        }
        const float dot = kv_dot_row(KvDtype::kF16, q.data(), bits.data(), n, 1.0f);
        if (has_nan || (has_pos_inf && has_neg_inf)) {
          EXPECT_TRUE(std::isnan(dot)) << hwy::TargetName(target);
        } else if (has_pos_inf) {
          EXPECT_EQ(dot, kInf) << hwy::TargetName(target);
        } else if (has_neg_inf) {
          EXPECT_EQ(dot, -kInf) << hwy::TargetName(target);
        }
      }
    }
  });
  EXPECT_GE(tested, 2);
}

// Fused dot/axpy agree with dequantize-then-compute, and every SIMD target agrees with the
// reference: dequantize and quantize bit for bit, dot/axpy to accumulation-order rounding.
TEST(KernelsKvQuant, EveryCpuTargetMatchesRef) {
  const int tested = testing::for_each_cpu_target([&](int64_t target) {
    for (int n : kHeadDims) {
      const auto x = random_row(n, static_cast<uint32_t>(n) + 7);
      const auto q = random_row(n, static_cast<uint32_t>(n) + 8);
      const auto out0 = random_row(n, static_cast<uint32_t>(n) + 9);
      for (KvDtype t : kAllDtypes) {
        const float scale = scale_for(t, x);
        const auto row = quantize(t, x, scale);
        std::vector<uint8_t> row_simd(row.size());
        kv_quantize_row(t, x.data(), row_simd.data(), n, scale);
        EXPECT_EQ(row_simd, row);
        const auto deq = dequantize_ref(t, row, n, scale);
        std::vector<float> deq_simd(static_cast<size_t>(n));
        kv_dequantize_row(t, row.data(), deq_simd.data(), n, scale);
        EXPECT_EQ(0, std::memcmp(deq.data(), deq_simd.data(), deq.size() * sizeof(float)))
            << kv::kv_dtype_name(t) << " n=" << n << " on " << hwy::TargetName(target);

        double exact = 0.0, mag = 0.0;
        for (int i = 0; i < n; ++i) {
          exact += static_cast<double>(q[static_cast<size_t>(i)]) * deq[static_cast<size_t>(i)];
          mag += std::fabs(static_cast<double>(q[static_cast<size_t>(i)]) *
                           deq[static_cast<size_t>(i)]);
        }
        // Rigorous f32 summation bound: (n + 2) ulps of the sum of |terms|.
        const double tol = mag * (n + 2) * 0x1p-24 + 1e-30;
        EXPECT_NEAR(kv_dot_row_ref(t, q.data(), row.data(), n, scale), exact, tol)
            << kv::kv_dtype_name(t) << " n=" << n;
        EXPECT_NEAR(kv_dot_row(t, q.data(), row.data(), n, scale), exact, tol)
            << kv::kv_dtype_name(t) << " n=" << n << " on " << hwy::TargetName(target);

        const float a = -0.37f;
        std::vector<float> o_ref = out0, o_simd = out0;
        kv_axpy_row_ref(t, a, row.data(), o_ref.data(), n, scale);
        kv_axpy_row(t, a, row.data(), o_simd.data(), n, scale);
        for (int i = 0; i < n; ++i) {
          const size_t k = static_cast<size_t>(i);
          const double want = out0[k] + static_cast<double>(a) * deq[k];
          const double tol_i = 1e-6 * (std::fabs(out0[k]) + std::fabs(a * deq[k])) + 1e-30;
          ASSERT_NEAR(o_ref[k], want, tol_i) << kv::kv_dtype_name(t) << " i=" << i;
          ASSERT_NEAR(o_simd[k], want, tol_i)
              << kv::kv_dtype_name(t) << " i=" << i << " on " << hwy::TargetName(target);
        }
      }
    }
  });
  EXPECT_GT(tested, 0);
}

// The f16 write (the default KV dtype's quantize runs in SIMD) gives f32_to_f16's bits for
// every input on every CPU target: each f16 value, the f32 values next to it and the midpoints
// to its neighbour (ties to even), signed zeros, f32 subnormals, values past the f16 range,
// infinities, NaNs with payloads, and random bit patterns; at every lane and in the scalar tail.
TEST(KernelsKvQuant, F16WriteIsBitExactOnEveryCpuTarget) {
  std::vector<float> x;
  auto add = [&](uint32_t bits) {
    float f;
    std::memcpy(&f, &bits, sizeof f);
    x.push_back(f);
  };
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float v = f16_to_f32(static_cast<uint16_t>(h));
    uint32_t b;
    std::memcpy(&b, &v, sizeof b);
    for (uint32_t d : {0u, 1u, 0xFFFFFFFFu, 0x1000u, 0xFFFFF000u, 0x0FFFu, 0x1001u}) add(b + d);
  }
  for (uint32_t b : {0x00000001u, 0x807FFFFFu, 0x477FF000u, 0x477FEFFFu, 0x47800000u, 0x7F7FFFFFu,
                     0x7F800000u, 0xFF800000u, 0x7FC00000u, 0xFFC00001u, 0x7F800001u, 0x7FBFFFFFu,
                     0x33000000u, 0x33000001u, 0xB3000000u, 0x387FC000u, 0x38800000u})
    add(b);
  std::mt19937 rng(1234);
  for (int i = 0; i < 200000; ++i) add(rng());
  x.resize((x.size() + 63) / 64 * 64 + 3);  // a 3-element tail after whole rows
  std::vector<uint16_t> want(x.size());
  for (size_t i = 0; i < x.size(); ++i) want[i] = f32_to_f16(x[i]);

  const int tested = testing::for_each_cpu_target([&](int64_t target) {
    std::vector<uint16_t> got(x.size());
    for (size_t r = 0; r + 64 <= x.size(); r += 64)
      kv_quantize_row(KvDtype::kF16, x.data() + r, got.data() + r, 64, 1.0f);
    const size_t tail = x.size() / 64 * 64;
    kv_quantize_row(KvDtype::kF16, x.data() + tail, got.data() + tail,
                    static_cast<int>(x.size() - tail), 1.0f);
    size_t bad = 0;
    for (size_t i = 0; i < x.size(); ++i)
      if (got[i] != want[i] && bad++ < 5)
        ADD_FAILURE() << "x=" << x[i] << " got " << got[i] << " want " << want[i] << " on "
                      << hwy::TargetName(target);
    EXPECT_EQ(bad, 0u) << hwy::TargetName(target);
  });
  EXPECT_GE(tested, 2);
}

TEST(KernelsKvQuantDeathTest, Fp8RejectsBadTensorScale) {
  const std::vector<float> x(4, 1.0f);
  std::vector<uint8_t> row(4);
  EXPECT_DEATH(kv_quantize_row(KvDtype::kFp8E4m3, x.data(), row.data(), 4, 0.0f), "tensor_scale");
  EXPECT_DEATH(kv_quantize_row(KvDtype::kFp8E5m2, x.data(), row.data(), 4, kNaN), "tensor_scale");
}

}  // namespace
}  // namespace hinge::kernels
