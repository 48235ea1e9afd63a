// Scalar references for the 32-element block formats (Q8_0, Q4_0) and the plain float types, plus
// the generic dequantize_row_ref / quantize_row_ref entry points.
// Arithmetic mirrors ggml-quants.c operation for operation so dequantization is bit-exact.
#include "kernels/quant_ref.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "common/half.h"
#include "kernels/quant.h"

namespace hinge::kernels {

void quantize_row_q8_0_ref(const float* x, BlockQ8_0* y, int64_t n) {
  const int64_t nb = n / kQK8_0;
  for (int64_t i = 0; i < nb; ++i, x += kQK8_0) {
    float amax = 0.0f;
    for (int j = 0; j < kQK8_0; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = f32_to_f16(d);
    for (int j = 0; j < kQK8_0; ++j) y[i].qs[j] = static_cast<int8_t>(std::roundf(x[j] * id));
  }
}

void quantize_row_q4_0_ref(const float* x, BlockQ4_0* y, int64_t n) {
  const int64_t nb = n / kQK4_0;
  for (int64_t i = 0; i < nb; ++i, x += kQK4_0) {
    // The signed value of largest magnitude maps to -8, so the full [-8, 7] range is used.
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < kQK4_0; ++j) {
      if (amax < std::fabs(x[j])) {
        amax = std::fabs(x[j]);
        max = x[j];
      }
    }
    const float d = max / -8.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = f32_to_f16(d);
    for (int j = 0; j < kQK4_0 / 2; ++j) {
      // (int8_t) truncation after +8.5 == round half up for the shifted value; as ggml.
      const uint8_t q0 = static_cast<uint8_t>(
          std::min(15, static_cast<int>(static_cast<int8_t>(x[j] * id + 8.5f))));
      const uint8_t q1 = static_cast<uint8_t>(
          std::min(15, static_cast<int>(static_cast<int8_t>(x[j + kQK4_0 / 2] * id + 8.5f))));
      y[i].qs[j] = static_cast<uint8_t>(q0 | (q1 << 4));
    }
  }
}

void dequantize_row_q8_0_ref(const BlockQ8_0* x, float* y, int64_t n) {
  const int64_t nb = n / kQK8_0;
  for (int64_t i = 0; i < nb; ++i) {
    const float d = f16_to_f32(x[i].d);
    for (int j = 0; j < kQK8_0; ++j) y[i * kQK8_0 + j] = x[i].qs[j] * d;
  }
}

void dequantize_row_q4_0_ref(const BlockQ4_0* x, float* y, int64_t n) {
  const int64_t nb = n / kQK4_0;
  for (int64_t i = 0; i < nb; ++i) {
    const float d = f16_to_f32(x[i].d);
    for (int j = 0; j < kQK4_0 / 2; ++j) {
      const int q0 = (x[i].qs[j] & 0x0F) - 8;
      const int q1 = (x[i].qs[j] >> 4) - 8;
      y[i * kQK4_0 + j] = q0 * d;
      y[i * kQK4_0 + j + kQK4_0 / 2] = q1 * d;
    }
  }
}

float vec_dot_q8_0_q8_0_ref(int64_t n, const BlockQ8_0* w, const BlockQ8_0* x) {
  const int64_t nb = n / kQK8_0;
  float sum = 0.0f;
  for (int64_t i = 0; i < nb; ++i) {
    int32_t sumi = 0;
    for (int j = 0; j < kQK8_0; ++j) sumi += w[i].qs[j] * x[i].qs[j];
    sum += sumi * (f16_to_f32(w[i].d) * f16_to_f32(x[i].d));
  }
  return sum;
}

float vec_dot_q4_0_q8_0_ref(int64_t n, const BlockQ4_0* w, const BlockQ8_0* x) {
  const int64_t nb = n / kQK4_0;
  float sum = 0.0f;
  for (int64_t i = 0; i < nb; ++i) {
    int32_t sumi = 0;
    for (int j = 0; j < kQK4_0 / 2; ++j) {
      sumi += ((w[i].qs[j] & 0x0F) - 8) * x[i].qs[j];
      sumi += ((w[i].qs[j] >> 4) - 8) * x[i].qs[j + kQK4_0 / 2];
    }
    sum += sumi * (f16_to_f32(w[i].d) * f16_to_f32(x[i].d));
  }
  return sum;
}

bool dequantize_row_ref(GgmlType type, const void* src, float* dst, int64_t n) {
  switch (type) {
    case GgmlType::F32:
      std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
      return true;
    case GgmlType::F16: {
      const auto* h = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = f16_to_f32(h[i]);
      return true;
    }
    case GgmlType::BF16: {
      const auto* h = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(h[i]);
      return true;
    }
    case GgmlType::Q8_0:
      dequantize_row_q8_0_ref(static_cast<const BlockQ8_0*>(src), dst, n);
      return true;
    case GgmlType::Q4_0:
      dequantize_row_q4_0_ref(static_cast<const BlockQ4_0*>(src), dst, n);
      return true;
    case GgmlType::Q4_K:
      dequantize_row_q4_k_ref(static_cast<const BlockQ4_K*>(src), dst, n);
      return true;
    case GgmlType::Q5_K:
      dequantize_row_q5_k_ref(static_cast<const BlockQ5_K*>(src), dst, n);
      return true;
    case GgmlType::Q6_K:
      dequantize_row_q6_k_ref(static_cast<const BlockQ6_K*>(src), dst, n);
      return true;
    case GgmlType::Q8_K:
      dequantize_row_q8_k_ref(static_cast<const BlockQ8_K*>(src), dst, n);
      return true;
    default:
      return false;
  }
}

bool quantize_row_ref(GgmlType type, const float* src, void* dst, int64_t n) {
  switch (type) {
    case GgmlType::F32:
      std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
      return true;
    case GgmlType::F16: {
      auto* h = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) h[i] = f32_to_f16(src[i]);
      return true;
    }
    case GgmlType::BF16: {
      auto* h = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) h[i] = f32_to_bf16(src[i]);
      return true;
    }
    case GgmlType::Q8_0:
      quantize_row_q8_0_ref(src, static_cast<BlockQ8_0*>(dst), n);
      return true;
    case GgmlType::Q4_0:
      quantize_row_q4_0_ref(src, static_cast<BlockQ4_0*>(dst), n);
      return true;
    case GgmlType::Q4_K:
      quantize_row_q4_k_ref(src, static_cast<BlockQ4_K*>(dst), n);
      return true;
    case GgmlType::Q5_K:
      quantize_row_q5_k_ref(src, static_cast<BlockQ5_K*>(dst), n);
      return true;
    case GgmlType::Q6_K:
      quantize_row_q6_k_ref(src, static_cast<BlockQ6_K*>(dst), n);
      return true;
    case GgmlType::Q8_K:
      quantize_row_q8_k_ref(src, static_cast<BlockQ8_K*>(dst), n);
      return true;
    default:
      return false;
  }
}

}  // namespace hinge::kernels
