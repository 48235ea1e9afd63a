#include "kernels/ops.h"

#include <cmath>
#include <numbers>

namespace hinge::kernels {

void rmsnorm(float* out, const float* x, const float* w, int64_t n, float eps) {
  float ss = 0.0f;
  for (int64_t i = 0; i < n; ++i) ss += x[i] * x[i];
  ss /= static_cast<float>(n);
  ss += eps;
  ss = 1.0f / std::sqrt(ss);
  for (int64_t i = 0; i < n; ++i) out[i] = w[i] * (ss * x[i]);
}

void softmax(float* x, int64_t n) {
  if (n <= 0) return;
  float max_val = x[0];
  for (int64_t i = 1; i < n; ++i) max_val = x[i] > max_val ? x[i] : max_val;
  float sum = 0.0f;
  for (int64_t i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - max_val);
    sum += x[i];
  }
  const float inv = 1.0f / sum;
  for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

// swiglu: ops_simd.cpp.

void add_inplace(float* y, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += x[i];
}

void rope(float* x, int64_t num_heads, int64_t head_dim, int64_t pos, const float* inv_freq,
          RopeStyle style) {
  const int64_t half = head_dim / 2;
  for (int64_t i = 0; i < half; ++i) {
    const float val = static_cast<float>(pos) * inv_freq[i];
    const float fcr = std::cos(val);
    const float fci = std::sin(val);
    for (int64_t h = 0; h < num_heads; ++h) {
      float* head = x + h * head_dim;
      const int64_t a = style == RopeStyle::kInterleaved ? 2 * i : i;
      const int64_t b = style == RopeStyle::kInterleaved ? 2 * i + 1 : i + half;
      const float v0 = head[a];
      const float v1 = head[b];
      head[a] = v0 * fcr - v1 * fci;
      head[b] = v0 * fci + v1 * fcr;
    }
  }
}

void rope_inv_freq(float* inv_freq, int64_t head_dim, float theta, const float* freq_factors) {
  for (int64_t i = 0; i < head_dim / 2; ++i) {
    // Same expression as llama2.c's run.c, so f32 results match it bit for bit.
    float f = 1.0f / std::pow(theta, static_cast<float>(2 * i) / static_cast<float>(head_dim));
    if (freq_factors) f /= freq_factors[i];
    inv_freq[i] = f;
  }
}

void llama3_freq_factors(float* factors, int64_t head_dim, float theta, float factor,
                         float low_freq_factor, float high_freq_factor, float original_context) {
  const float low_freq_wavelen = original_context / low_freq_factor;
  const float high_freq_wavelen = original_context / high_freq_factor;
  for (int64_t i = 0; i < head_dim / 2; ++i) {
    const float freq =
        1.0f / std::pow(theta, static_cast<float>(2 * i) / static_cast<float>(head_dim));
    const float wavelen = 2.0f * std::numbers::pi_v<float> / freq;
    if (wavelen < high_freq_wavelen) {
      factors[i] = 1.0f;
    } else if (wavelen > low_freq_wavelen) {
      factors[i] = factor;
    } else {
      const float smooth = (original_context / wavelen - low_freq_factor) /
                           (high_freq_factor - low_freq_factor);
      // new_freq = (1 - smooth) * freq / factor + smooth * freq  =>  divisor below.
      factors[i] = 1.0f / ((1.0f - smooth) / factor + smooth);
    }
  }
}

int64_t argmax_ref(const float* x, int64_t n) {
  int64_t best = 0;
  for (int64_t i = 1; i < n; ++i)
    if (x[i] > x[best]) best = i;
  return best;
}

float dot_f32(const float* a, const float* b, int64_t n) {
  float s = 0.0f;
  for (int64_t i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}

void axpy_f32(float* y, float a, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += a * x[i];
}

void hadamard_inplace(float* x, int64_t count, int64_t d) {
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  for (int64_t v = 0; v < count; ++v) {
    float* p = x + v * d;
    for (int64_t h = 1; h < d; h *= 2)
      for (int64_t i = 0; i < d; i += 2 * h)
        for (int64_t j = i; j < i + h; ++j) {
          const float a = p[j], b = p[j + h];
          p[j] = a + b;
          p[j + h] = a - b;
        }
    for (int64_t i = 0; i < d; ++i) p[i] *= scale;
  }
}

}  // namespace hinge::kernels
