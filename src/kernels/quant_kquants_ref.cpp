// Scalar references for the 256-element super-block formats: Q4_K, Q5_K, Q6_K (weights) and
// Q8_K (activations). Quantizers follow ggml's reference algorithms (make_qkx2_quants for Q4_K
// and Q5_K, make_qx_quants with rmse_type 1 for Q6_K) so files we write quantize like
// llama.cpp's.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "common/half.h"
#include "kernels/quant_ref.h"

namespace hinge::kernels {
namespace {

constexpr float kGroupMaxEps = 1e-15f;

// Symmetric quantization of n values to [-nmax, nmax - 1] with a weighted-RMSE search over 19
// candidate scales (weights x^2). Writes L[i] = q + nmax (unsigned) and returns the scale.
float make_qx_quants(int n, int nmax, const float* x, int8_t* L) {
  float max = 0.0f, amax = 0.0f;
  for (int i = 0; i < n; ++i) {
    const float ax = std::fabs(x[i]);
    if (ax > amax) {
      amax = ax;
      max = x[i];
    }
  }
  if (amax < kGroupMaxEps) {
    std::fill(L, L + n, int8_t{0});
    return 0.0f;
  }
  float iscale = -nmax / max;
  float sumlx = 0.0f, suml2 = 0.0f;
  for (int i = 0; i < n; ++i) {
    int l = nearest_int(iscale * x[i]);
    l = std::max(-nmax, std::min(nmax - 1, l));
    L[i] = static_cast<int8_t>(l + nmax);
    const float w = x[i] * x[i];
    sumlx += w * x[i] * l;
    suml2 += w * l * l;
  }
  float scale = suml2 != 0.0f ? sumlx / suml2 : 0.0f;
  float best = scale * sumlx;
  for (int is = -9; is <= 9; ++is) {
    if (is == 0) continue;
    iscale = -(nmax + 0.1f * is) / max;
    sumlx = suml2 = 0.0f;
    for (int i = 0; i < n; ++i) {
      int l = nearest_int(iscale * x[i]);
      l = std::max(-nmax, std::min(nmax - 1, l));
      const float w = x[i] * x[i];
      sumlx += w * x[i] * l;
      suml2 += w * l * l;
    }
    if (suml2 > 0 && sumlx * sumlx > best * suml2) {
      for (int i = 0; i < n; ++i) {
        const int l = nearest_int(iscale * x[i]);
        L[i] = static_cast<int8_t>(nmax + std::max(-nmax, std::min(nmax - 1, l)));
      }
      scale = sumlx / suml2;
      best = scale * sumlx;
    }
  }
  return scale;
}

// Asymmetric quantization x ~ scale * L - min with L in [0, nmax]: weighted least squares over
// nstep + 1 candidate scales. Returns the scale and writes the (non-negative) min to *the_min.
float make_qkx2_quants(int n, int nmax, const float* x, const float* weights, uint8_t* L,
                       float* the_min, uint8_t* Laux, float rmin, float rdelta, int nstep) {
  float min = x[0], max = x[0];
  float sum_w = weights[0];
  float sum_x = sum_w * x[0];
  for (int i = 1; i < n; ++i) {
    if (x[i] < min) min = x[i];
    if (x[i] > max) max = x[i];
    const float w = weights[i];
    sum_w += w;
    sum_x += w * x[i];
  }
  if (min > 0) min = 0;
  if (max == min) {
    std::fill(L, L + n, uint8_t{0});
    *the_min = -min;
    return 0.0f;
  }
  float iscale = nmax / (max - min);
  float scale = 1 / iscale;
  float best_error = 0;
  for (int i = 0; i < n; ++i) {
    const int l = nearest_int(iscale * (x[i] - min));
    L[i] = static_cast<uint8_t>(std::max(0, std::min(nmax, l)));
    const float diff = scale * L[i] + min - x[i];
    best_error += weights[i] * (diff * diff);
  }
  for (int is = 0; is <= nstep; ++is) {
    iscale = (rmin + rdelta * is + nmax) / (max - min);
    float sum_l = 0, sum_l2 = 0, sum_xl = 0;
    for (int i = 0; i < n; ++i) {
      int l = nearest_int(iscale * (x[i] - min));
      l = std::max(0, std::min(nmax, l));
      Laux[i] = static_cast<uint8_t>(l);
      const float w = weights[i];
      sum_l += w * l;
      sum_l2 += w * l * l;
      sum_xl += w * l * x[i];
    }
    const float D = sum_w * sum_l2 - sum_l * sum_l;
    if (D > 0) {
      float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
      float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
      if (this_min > 0) {
        this_min = 0;
        this_scale = sum_xl / sum_l2;
      }
      float cur_error = 0;
      for (int i = 0; i < n; ++i) {
        const float diff = this_scale * Laux[i] + this_min - x[i];
        cur_error += weights[i] * (diff * diff);
      }
      if (cur_error < best_error) {
        std::copy(Laux, Laux + n, L);
        best_error = cur_error;
        scale = this_scale;
        min = this_min;
      }
    }
  }
  *the_min = -min;
  return scale;
}

}  // namespace

namespace {

// One super-block of Q4_K / Q5_K: 8 sub-blocks of 32 asymmetric values in [0, nmax] (ggml's
// quantize_row_q{4,5}_K_ref: make_qkx2_quants with rmin, rdelta, nstep), 6-bit scales and mins
// packed into scales[12], then the values re-quantized against the stored scales into L.
void quantize_k_super_block(const float* x, int nmax, float rmin, float rdelta, int nstep,
                            uint8_t L[kQK_K], uint16_t* d, uint16_t* dmin, uint8_t packed[12]) {
  uint8_t Laux[32];
  float weights[32];
  float mins[kQK_K / 32];
  float scales[kQK_K / 32];
  float max_scale = 0, max_min = 0;  // scales and mins are >= 0 (the min is subtracted)
  for (int j = 0; j < kQK_K / 32; ++j) {
    float sum_x2 = 0;
    for (int l = 0; l < 32; ++l) sum_x2 += x[32 * j + l] * x[32 * j + l];
    const float av_x = std::sqrt(sum_x2 / 32);
    for (int l = 0; l < 32; ++l) weights[l] = av_x + std::fabs(x[32 * j + l]);
    scales[j] = make_qkx2_quants(32, nmax, x + 32 * j, weights, L + 32 * j, &mins[j], Laux, rmin,
                                 rdelta, nstep);
    max_scale = std::max(max_scale, scales[j]);
    max_min = std::max(max_min, mins[j]);
  }
  const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
  const float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
  std::memset(packed, 0, 12);
  for (int j = 0; j < kQK_K / 32; ++j) {
    const uint8_t ls = static_cast<uint8_t>(std::min(63, nearest_int(inv_scale * scales[j])));
    const uint8_t lm = static_cast<uint8_t>(std::min(63, nearest_int(inv_min * mins[j])));
    if (j < 4) {
      packed[j] = ls;
      packed[j + 4] = lm;
    } else {
      packed[j + 4] = static_cast<uint8_t>((ls & 0xF) | ((lm & 0xF) << 4));
      packed[j - 4] |= static_cast<uint8_t>((ls >> 4) << 6);
      packed[j] |= static_cast<uint8_t>((lm >> 4) << 6);
    }
  }
  *d = f32_to_f16(max_scale / 63.f);
  *dmin = f32_to_f16(max_min / 63.f);
  // Re-quantize against the rounded 6-bit scales actually stored.
  for (int j = 0; j < kQK_K / 32; ++j) {
    uint8_t sc, m;
    scale_min_k4(j, packed, &sc, &m);
    const float dj = f16_to_f32(*d) * sc;
    if (dj == 0.0f) continue;
    const float dm = f16_to_f32(*dmin) * m;
    for (int l = 0; l < 32; ++l) {
      const int q = nearest_int((x[32 * j + l] + dm) / dj);
      L[32 * j + l] = static_cast<uint8_t>(std::max(0, std::min(nmax, q)));
    }
  }
}

}  // namespace

void quantize_row_q4_k_ref(const float* x, BlockQ4_K* y, int64_t n) {
  const int64_t nb = n / kQK_K;
  uint8_t L[kQK_K];
  for (int64_t i = 0; i < nb; ++i, x += kQK_K) {
    BlockQ4_K& b = y[i];
    quantize_k_super_block(x, 15, -1.f, 0.1f, 20, L, &b.d, &b.dmin, b.scales);
    for (int c = 0; c < 4; ++c)
      for (int l = 0; l < 32; ++l)
        b.qs[32 * c + l] = static_cast<uint8_t>(L[64 * c + l] | (L[64 * c + 32 + l] << 4));
  }
}

void quantize_row_q5_k_ref(const float* x, BlockQ5_K* y, int64_t n) {
  const int64_t nb = n / kQK_K;
  uint8_t L[kQK_K];
  for (int64_t i = 0; i < nb; ++i, x += kQK_K) {
    BlockQ5_K& b = y[i];
    quantize_k_super_block(x, 31, -0.5f, 0.1f, 15, L, &b.d, &b.dmin, b.scales);
    std::memset(b.qh, 0, sizeof b.qh);
    for (int c = 0; c < 4; ++c)
      for (int l = 0; l < 32; ++l) {
        const int l1 = L[64 * c + l], l2 = L[64 * c + 32 + l];
        b.qs[32 * c + l] = static_cast<uint8_t>((l1 & 0xF) | ((l2 & 0xF) << 4));
        b.qh[l] |= static_cast<uint8_t>(((l1 >> 4) << (2 * c)) | ((l2 >> 4) << (2 * c + 1)));
      }
  }
}

namespace {

// Element l of sub-block j (0..15 / 0..31).
int k_quant_value(const BlockQ4_K& b, int j, int l) {
  return (b.qs[32 * (j / 2) + l] >> (4 * (j % 2))) & 0xF;
}
int k_quant_value(const BlockQ5_K& b, int j, int l) {
  return ((b.qs[32 * (j / 2) + l] >> (4 * (j % 2))) & 0xF) | (((b.qh[l] >> j) & 1) << 4);
}

// Q4_K / Q5_K: x = d * sc[j] * q - dmin * m[j] (ggml's dequantize_row_q{4,5}_K arithmetic).
template <typename WB>
void dequantize_k_mins_ref(const WB* x, float* y, int64_t n) {
  const int64_t nb = n / kQK_K;
  for (int64_t i = 0; i < nb; ++i) {
    const float d = f16_to_f32(x[i].d);
    const float min = f16_to_f32(x[i].dmin);
    for (int j = 0; j < 8; ++j) {
      uint8_t sc, m;
      scale_min_k4(j, x[i].scales, &sc, &m);
      const float dj = d * sc, mj = min * m;
      for (int l = 0; l < 32; ++l) *y++ = dj * k_quant_value(x[i], j, l) - mj;
    }
  }
}

}  // namespace

void dequantize_row_q4_k_ref(const BlockQ4_K* x, float* y, int64_t n) {
  dequantize_k_mins_ref(x, y, n);
}

void dequantize_row_q5_k_ref(const BlockQ5_K* x, float* y, int64_t n) {
  dequantize_k_mins_ref(x, y, n);
}

void quantize_row_q6_k_ref(const float* x, BlockQ6_K* y, int64_t n) {
  const int64_t nb = n / kQK_K;
  int8_t L[kQK_K];
  float scales[kQK_K / 16];
  for (int64_t i = 0; i < nb; ++i, x += kQK_K) {
    float max_scale = 0, max_abs_scale = 0;
    for (int ib = 0; ib < kQK_K / 16; ++ib) {
      const float scale = make_qx_quants(16, 32, x + 16 * ib, L + 16 * ib);
      scales[ib] = scale;
      if (std::fabs(scale) > max_abs_scale) {
        max_abs_scale = std::fabs(scale);
        max_scale = scale;
      }
    }
    BlockQ6_K& b = y[i];
    if (max_abs_scale < kGroupMaxEps) {
      std::memset(&b, 0, sizeof b);
      continue;
    }
    const float iscale = -128.f / max_scale;
    b.d = f32_to_f16(1 / iscale);
    for (int ib = 0; ib < kQK_K / 16; ++ib)
      b.scales[ib] = static_cast<int8_t>(std::min(127, nearest_int(iscale * scales[ib])));
    for (int j = 0; j < kQK_K / 16; ++j) {
      const float d = f16_to_f32(b.d) * b.scales[j];
      if (d == 0.0f) continue;
      for (int l = 0; l < 16; ++l) {
        const int q = nearest_int(x[16 * j + l] / d);
        L[16 * j + l] = static_cast<int8_t>(std::max(-32, std::min(31, q)) + 32);
      }
    }
    uint8_t* ql = b.ql;
    uint8_t* qh = b.qh;
    for (int h = 0; h < kQK_K; h += 128, ql += 64, qh += 32) {
      for (int l = 0; l < 32; ++l) {
        const uint8_t q1 = L[h + l] & 0xF;
        const uint8_t q2 = L[h + l + 32] & 0xF;
        const uint8_t q3 = L[h + l + 64] & 0xF;
        const uint8_t q4 = L[h + l + 96] & 0xF;
        ql[l] = static_cast<uint8_t>(q1 | (q3 << 4));
        ql[l + 32] = static_cast<uint8_t>(q2 | (q4 << 4));
        qh[l] = static_cast<uint8_t>((L[h + l] >> 4) | ((L[h + l + 32] >> 4) << 2) |
                                     ((L[h + l + 64] >> 4) << 4) | ((L[h + l + 96] >> 4) << 6));
      }
    }
  }
}

void dequantize_row_q6_k_ref(const BlockQ6_K* x, float* y, int64_t n) {
  const int64_t nb = n / kQK_K;
  for (int64_t i = 0; i < nb; ++i) {
    const float d = f16_to_f32(x[i].d);
    const uint8_t* ql = x[i].ql;
    const uint8_t* qh = x[i].qh;
    const int8_t* sc = x[i].scales;
    for (int h = 0; h < kQK_K; h += 128, y += 128, ql += 64, qh += 32, sc += 8) {
      for (int l = 0; l < 32; ++l) {
        const int is = l / 16;
        const int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
        const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        y[l] = d * sc[is] * q1;
        y[l + 32] = d * sc[is + 2] * q2;
        y[l + 64] = d * sc[is + 4] * q3;
        y[l + 96] = d * sc[is + 6] * q4;
      }
    }
  }
}

void quantize_row_q8_k_ref(const float* x, BlockQ8_K* y, int64_t n) {
  const int64_t nb = n / kQK_K;
  for (int64_t i = 0; i < nb; ++i, x += kQK_K) {
    float max = 0, amax = 0;
    for (int j = 0; j < kQK_K; ++j) {
      const float ax = std::fabs(x[j]);
      if (ax > amax) {
        amax = ax;
        max = x[j];
      }
    }
    if (amax == 0.0f) {
      std::memset(&y[i], 0, sizeof y[i]);
      continue;
    }
    // -127 (not -128) keeps every value in [-127, 127], as ggml does.
    const float iscale = -127.f / max;
    for (int j = 0; j < kQK_K; ++j)
      y[i].qs[j] = static_cast<int8_t>(std::min(127, nearest_int(iscale * x[j])));
    for (int j = 0; j < kQK_K / 16; ++j) {
      int sum = 0;
      for (int l = 0; l < 16; ++l) sum += y[i].qs[16 * j + l];
      y[i].bsums[j] = static_cast<int16_t>(sum);
    }
    y[i].d = 1 / iscale;
  }
}

void dequantize_row_q8_k_ref(const BlockQ8_K* x, float* y, int64_t n) {
  const int64_t nb = n / kQK_K;
  for (int64_t i = 0; i < nb; ++i)
    for (int j = 0; j < kQK_K; ++j) *y++ = x[i].d * x[i].qs[j];
}

namespace {

// Q4_K / Q5_K: sum_j d sc[j] <q_j, q8_j> - dmin m[j] (sum of q8 over sub-block j).
template <typename WB>
float vec_dot_k_mins_ref(int64_t n, const WB* w, const BlockQ8_K* x) {
  const int64_t nb = n / kQK_K;
  float sum = 0.0f;
  for (int64_t i = 0; i < nb; ++i) {
    int32_t sumi = 0;   // sum_j sc[j] * <q_j, q8_j>
    int32_t summs = 0;  // sum_j m[j] * (sum of q8 over sub-block j)
    for (int j = 0; j < 8; ++j) {
      uint8_t sc, m;
      scale_min_k4(j, w[i].scales, &sc, &m);
      const int8_t* q8 = x[i].qs + 32 * j;
      int32_t dot = 0;
      for (int l = 0; l < 32; ++l) dot += k_quant_value(w[i], j, l) * q8[l];
      sumi += sc * dot;
      summs += m * (x[i].bsums[2 * j] + x[i].bsums[2 * j + 1]);
    }
    const float d = x[i].d * f16_to_f32(w[i].d);
    const float dmin = x[i].d * f16_to_f32(w[i].dmin);
    sum += d * static_cast<float>(sumi) - dmin * static_cast<float>(summs);
  }
  return sum;
}

}  // namespace

float vec_dot_q4_k_q8_k_ref(int64_t n, const BlockQ4_K* w, const BlockQ8_K* x) {
  return vec_dot_k_mins_ref(n, w, x);
}

float vec_dot_q5_k_q8_k_ref(int64_t n, const BlockQ5_K* w, const BlockQ8_K* x) {
  return vec_dot_k_mins_ref(n, w, x);
}

float vec_dot_q6_k_q8_k_ref(int64_t n, const BlockQ6_K* w, const BlockQ8_K* x) {
  const int64_t nb = n / kQK_K;
  float sum = 0.0f;
  for (int64_t i = 0; i < nb; ++i) {
    int8_t q[kQK_K];  // q - 32, in element order
    for (int e = 0; e < kQK_K; ++e) q[e] = static_cast<int8_t>(q6_k_value(w[i], e) - 32);
    int32_t sumi = 0;
    for (int j = 0; j < kQK_K / 16; ++j) {
      int32_t dot = 0;
      for (int l = 0; l < 16; ++l) dot += q[16 * j + l] * x[i].qs[16 * j + l];
      sumi += w[i].scales[j] * dot;
    }
    sum += f16_to_f32(w[i].d) * x[i].d * static_cast<float>(sumi);
  }
  return sum;
}

}  // namespace hinge::kernels
