// Scalar reference of the KV-cache storage formats (see kv_quant.h for layouts and policies),
// plus the fp8 codecs, the scale helper and the row size. The SIMD paths in kv_quant.cpp must
// agree with these.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>

#include "common/half.h"
#include "common/status.h"
#include "kernels/kv_quant.h"

namespace hinge::kernels {
namespace {

constexpr size_t kScaleBytes = 2;  // one f16 per int8/int4 row
constexpr float kF16MaxFinite = 65504.0f;

constexpr float pow2(int e) {
  float r = 1.0f;
  for (; e > 0; --e) r *= 2.0f;
  for (; e < 0; ++e) r *= 0.5f;
  return r;
}

// Generic fp8 encode of |x| with M mantissa bits and exponent bias kBias; codes above kMaxCode
// (the largest finite magnitude) saturate to it. Round to nearest, ties to even.
template <int M, int kBias, uint32_t kMaxCode>
uint8_t fp8_encode(float x) {
  uint32_t bits = fp32_to_bits(x);
  const uint32_t sign = (bits >> 24) & 0x80u;
  bits &= 0x7fffffffu;
  if (bits > 0x7f800000u) return 0x7F;  // NaN: one canonical positive NaN code
  const float a = fp32_from_bits(bits);
  constexpr float kMinNormal = pow2(1 - kBias);
  constexpr float kToSubnormalSteps = pow2(M - 1 + kBias);
  uint32_t code;
  if (a < kMinNormal) {
    // Subnormal range: a = m * 2^(1 - bias - M), m < 2^M; the scaling is exact (power of two).
    // m rounding up to 2^M lands exactly on the smallest normal code.
    const float m = std::nearbyint(a * kToSubnormalSteps);
    code = static_cast<uint32_t>(m);
  } else {
    // Normal: drop 23 - M mantissa bits of the f32 with RNE (carries propagate into the
    // exponent), then rebias the exponent. Huge values and inf come out above kMaxCode.
    constexpr int kShift = 23 - M;
    const uint32_t r = bits + ((1u << (kShift - 1)) - 1u) + ((bits >> kShift) & 1u);
    code = (r >> kShift) - (static_cast<uint32_t>(127 - kBias) << M);
  }
  code = std::min(code, kMaxCode);
  return static_cast<uint8_t>(sign | code);
}

template <int M, int kBias, bool kE4m3>
float fp8_decode(uint8_t b) {
  const bool neg = (b & 0x80u) != 0;
  const int mag = b & 0x7f;
  const int e = mag >> M;
  const int m = mag & ((1 << M) - 1);
  float v;
  if (kE4m3 && mag == 0x7f) {
    v = std::numeric_limits<float>::quiet_NaN();
  } else if (!kE4m3 && e == 31) {
    v = m == 0 ? std::numeric_limits<float>::infinity() : std::numeric_limits<float>::quiet_NaN();
  } else if (e == 0) {
    v = std::ldexp(static_cast<float>(m), 1 - kBias - M);
  } else {
    v = std::ldexp(static_cast<float>((1 << M) + m), e - kBias - M);
  }
  return neg ? -v : v;
}

struct Fp8Tables {
  std::array<float, 256> e4m3;
  std::array<float, 256> e5m2;
};

const Fp8Tables& fp8_tables() {
  static const Fp8Tables tables = [] {
    Fp8Tables t{};
    for (int i = 0; i < 256; ++i) {
      t.e4m3[static_cast<size_t>(i)] = fp8_decode<3, 7, true>(static_cast<uint8_t>(i));
      t.e5m2[static_cast<size_t>(i)] = fp8_decode<2, 15, false>(static_cast<uint8_t>(i));
    }
    return t;
  }();
  return tables;
}

const float* fp8_table(KvDtype dtype) {
  return dtype == KvDtype::kFp8E4m3 ? fp8_tables().e4m3.data() : fp8_tables().e5m2.data();
}


void check_args(KvDtype dtype, int head_dim, float tensor_scale) {
  HINGE_CHECK_MSG(head_dim > 0 && head_dim <= kKvMaxHeadDim, "head_dim {}", head_dim);
  if (kv::kv_dtype_is_fp8(dtype)) {
    HINGE_CHECK_MSG(std::isfinite(tensor_scale) && tensor_scale > 0.0f,
                    "fp8 KV needs a finite positive tensor_scale, got {}", tensor_scale);
  }
}

float load_f16_scale(const void* row) {
  uint16_t h;
  std::memcpy(&h, row, 2);
  return f16_to_f32(h);
}

// Per-row symmetric scale: returns the stored (f16-rounded) d and writes its bits to row[0..2).
float store_row_scale(const float* src, int n, float qmax, void* row) {
  float amax = 0.0f;
  for (int i = 0; i < n; ++i) {
    if (std::isfinite(src[i])) amax = std::max(amax, std::fabs(src[i]));
  }
  const uint16_t h = f32_to_f16(std::min(amax / qmax, kF16MaxFinite));
  std::memcpy(row, &h, 2);
  return f16_to_f32(h);
}

int quantize_symmetric(float x, float d, int qmax) {
  if (std::isnan(x)) return 0;
  if (std::isinf(x)) return x > 0 ? qmax : -qmax;
  if (d == 0.0f) return 0;
  const float t = std::nearbyint(x / d);  // default FP environment: ties to even
  return static_cast<int>(std::clamp(t, static_cast<float>(-qmax), static_cast<float>(qmax)));
}

int int4_at(const uint8_t* packed, int i) {
  const uint8_t b = packed[i >> 1];
  return static_cast<int>((i & 1) ? (b >> 4) : (b & 0x0f)) - 8;
}

}  // namespace

uint8_t fp8_e4m3_from_f32(float x) { return fp8_encode<3, 7, 0x7Eu>(x); }
uint8_t fp8_e5m2_from_f32(float x) { return fp8_encode<2, 15, 0x7Bu>(x); }
float fp8_e4m3_to_f32(uint8_t b) { return fp8_tables().e4m3[b]; }
float fp8_e5m2_to_f32(uint8_t b) { return fp8_tables().e5m2[b]; }

float kv_fp8_max_finite(KvDtype dtype) {
  switch (dtype) {
    case KvDtype::kFp8E4m3:
      return kFp8E4m3MaxFinite;
    case KvDtype::kFp8E5m2:
      return kFp8E5m2MaxFinite;
    default:
      return 0.0f;
  }
}

float kv_fp8_scale_for(KvDtype dtype, const float* data, size_t n, float prev) {
  HINGE_CHECK_MSG(kv::kv_dtype_is_fp8(dtype), "kv_fp8_scale_for on {}", kv::kv_dtype_name(dtype));
  float amax = 0.0f;
  for (size_t i = 0; i < n; ++i) {
    if (std::isfinite(data[i])) amax = std::max(amax, std::fabs(data[i]));
  }
  const float s = std::max(prev, amax / kv_fp8_max_finite(dtype));
  return s > 0.0f ? s : 1.0f;
}

// The row layouts here are exactly what kv/ budgets for, so the size has one definition.
size_t kv_row_bytes(KvDtype dtype, int head_dim) {
  return static_cast<size_t>(kv::kv_dtype_head_bytes(dtype, head_dim));
}

void kv_quantize_row_ref(KvDtype dtype, const float* src, void* dst, int n, float tensor_scale) {
  check_args(dtype, n, tensor_scale);
  auto* out = static_cast<uint8_t*>(dst);
  switch (dtype) {
    case KvDtype::kF32:
      std::memcpy(dst, src, 4 * static_cast<size_t>(n));
      return;
    case KvDtype::kF16:
    case KvDtype::kBf16:
      for (int i = 0; i < n; ++i) {
        const uint16_t h = dtype == KvDtype::kF16 ? f32_to_f16(src[i]) : f32_to_bf16(src[i]);
        std::memcpy(out + 2 * i, &h, 2);
      }
      return;
    case KvDtype::kFp8E4m3:
      for (int i = 0; i < n; ++i) out[i] = fp8_e4m3_from_f32(src[i] / tensor_scale);
      return;
    case KvDtype::kFp8E5m2:
      for (int i = 0; i < n; ++i) out[i] = fp8_e5m2_from_f32(src[i] / tensor_scale);
      return;
    case KvDtype::kInt8: {
      const float d = store_row_scale(src, n, 127.0f, out);
      auto* q = reinterpret_cast<int8_t*>(out + kScaleBytes);
      for (int i = 0; i < n; ++i) q[i] = static_cast<int8_t>(quantize_symmetric(src[i], d, 127));
      return;
    }
    case KvDtype::kInt4: {
      const float d = store_row_scale(src, n, 7.0f, out);
      uint8_t* packed = out + kScaleBytes;
      for (int j = 0; j < (n + 1) / 2; ++j) {
        const int lo = quantize_symmetric(src[2 * j], d, 7) + 8;
        const int hi = (2 * j + 1 < n ? quantize_symmetric(src[2 * j + 1], d, 7) : 0) + 8;
        packed[j] = static_cast<uint8_t>(lo | (hi << 4));
      }
      return;
    }
  }
  HINGE_CHECK_MSG(false, "bad KvDtype {}", static_cast<int>(dtype));
}

// Element i of a row, dequantized, *without* the row/tensor scale (applied by the callers once).
namespace {
struct RowView {
  KvDtype dtype;
  const uint8_t* p;      // element data (past the f16 scale for int8/int4)
  float scale;           // d for int8/int4, tensor_scale for fp8, 1 otherwise
  const float* table;    // fp8 decode table

  RowView(KvDtype t, const void* row, float tensor_scale) : dtype(t), p(nullptr), scale(1.0f),
                                                              table(nullptr) {
    p = static_cast<const uint8_t*>(row);
    if (t == KvDtype::kInt8 || t == KvDtype::kInt4) {
      scale = load_f16_scale(row);
      p += kScaleBytes;
    } else if (kv::kv_dtype_is_fp8(t)) {
      scale = tensor_scale;
      table = fp8_table(t);
    }
  }

  float at(int i) const {
    switch (dtype) {
      case KvDtype::kF32: {
        float v;
        std::memcpy(&v, p + 4 * i, 4);
        return v;
      }
      case KvDtype::kF16:
      case KvDtype::kBf16: {
        uint16_t h;
        std::memcpy(&h, p + 2 * i, 2);
        return dtype == KvDtype::kF16 ? f16_to_f32(h) : bf16_to_f32(h);
      }
      case KvDtype::kFp8E4m3:
      case KvDtype::kFp8E5m2:
        return table[p[i]];
      case KvDtype::kInt8:
        return static_cast<float>(static_cast<int8_t>(p[i]));
      case KvDtype::kInt4:
        return static_cast<float>(int4_at(p, i));
    }
    return 0.0f;
  }
};
}  // namespace

void kv_dequantize_row_ref(KvDtype dtype, const void* src, float* dst, int n, float tensor_scale) {
  check_args(dtype, n, tensor_scale);
  const RowView row(dtype, src, tensor_scale);
  for (int i = 0; i < n; ++i) dst[i] = row.scale * row.at(i);
}

float kv_dot_row_ref(KvDtype dtype, const float* q, const void* k_row, int n, float tensor_scale) {
  check_args(dtype, n, tensor_scale);
  const RowView row(dtype, k_row, tensor_scale);
  float acc = 0.0f;
  for (int i = 0; i < n; ++i) acc += q[i] * row.at(i);
  return acc * row.scale;
}

void kv_axpy_row_ref(KvDtype dtype, float a, const void* v_row, float* out, int n,
                     float tensor_scale) {
  check_args(dtype, n, tensor_scale);
  const RowView row(dtype, v_row, tensor_scale);
  const float as = a * row.scale;
  for (int i = 0; i < n; ++i) out[i] += as * row.at(i);
}

}  // namespace hinge::kernels
