#include "kernels/ops.h"

#include <algorithm>
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

namespace hinge::kernels {
namespace {
// ggml_rope_yarn_corr_dim: the dimension at which pairs make n_rot_turns turns over the
// original context.
float yarn_corr_dim(int64_t n_dims, int64_t n_ctx_orig, float n_rot_turns, float base) {
  return static_cast<float>(n_dims) *
         std::log(static_cast<float>(n_ctx_orig) / (n_rot_turns * 2.0f * std::numbers::pi_v<float>)) /
         (2.0f * std::log(base));
}
}  // namespace

RopeTable make_rope_table(const RopeSpec& s) {
  RopeTable t;
  t.style = s.style;
  t.n_rot = s.n_rot;
  t.freq_scale = s.freq_scale;
  const int64_t half = s.n_rot / 2;
  t.inv_freq.resize(static_cast<size_t>(half));
  rope_inv_freq(t.inv_freq.data(), s.n_rot, s.theta, s.freq_factors);  // over the rotated dims
  t.mscale = s.attn_factor;
  if (s.ext_factor != 0.0f) {
    const float lo = std::max(0.0f, std::floor(yarn_corr_dim(s.n_rot, s.n_ctx_orig, s.beta_fast, s.theta)));
    const float hi = std::min(static_cast<float>(s.n_rot - 1),
                              std::ceil(yarn_corr_dim(s.n_rot, s.n_ctx_orig, s.beta_slow, s.theta)));
    t.mix.resize(static_cast<size_t>(half));
    for (int64_t i = 0; i < half; ++i) {
      const float y = (static_cast<float>(i) - lo) / std::max(0.001f, hi - lo);
      t.mix[static_cast<size_t>(i)] = (1.0f - std::min(1.0f, std::max(0.0f, y))) * s.ext_factor;
    }
    t.mscale *= 1.0f + 0.1f * std::log(1.0f / s.freq_scale);
  }
  return t;
}

namespace {
// The angle of pair i at position pos (YaRN's mix of interpolated and extrapolated angles when
// the table has one): linear in pos.
inline float rope_angle(const RopeTable& t, int64_t pos, int64_t i) {
  float val = static_cast<float>(pos) * t.inv_freq[static_cast<size_t>(i)];
  if (t.freq_scale != 1.0f || !t.mix.empty()) {
    const float interp = t.freq_scale * val;
    const float mix = t.mix.empty() ? 0.0f : t.mix[static_cast<size_t>(i)];
    val = interp * (1.0f - mix) + val * mix;
  }
  return val;
}
}  // namespace

void rope_ext(float* x, int64_t num_heads, int64_t head_dim, int64_t pos, const RopeTable& t) {
  rope_ext_qk(x, num_heads, nullptr, 0, head_dim, pos, t);
}

void rope_ext_qk(float* q, int64_t q_heads, float* k, int64_t k_heads, int64_t head_dim,
                 int64_t pos, const RopeTable& t) {
  const int64_t half = t.n_rot / 2;
  auto rotate = [&](float* x, int64_t heads, int64_t a, int64_t b, float fcr, float fci) {
    for (int64_t h = 0; h < heads; ++h) {
      float* head = x + h * head_dim;
      const float v0 = head[a];
      const float v1 = head[b];
      head[a] = v0 * fcr - v1 * fci;
      head[b] = v0 * fci + v1 * fcr;
    }
  };
  for (int64_t i = 0; i < half; ++i) {
    const float val = rope_angle(t, pos, i);
    float fcr = std::cos(val), fci = std::sin(val);
    if (t.mscale != 1.0f) {
      fcr *= t.mscale;
      fci *= t.mscale;
    }
    const int64_t a = t.style == RopeStyle::kInterleaved ? 2 * i : i;
    const int64_t b = t.style == RopeStyle::kInterleaved ? 2 * i + 1 : i + half;
    rotate(q, q_heads, a, b, fcr, fci);
    if (k != nullptr) rotate(k, k_heads, a, b, fcr, fci);
  }
}

void rope_rotation(const RopeTable& t, int64_t delta, float* cos_sin) {
  const int64_t half = t.n_rot / 2;
  for (int64_t i = 0; i < half; ++i) {
    const float val = rope_angle(t, delta, i);
    cos_sin[i] = std::cos(val);
    cos_sin[half + i] = std::sin(val);
  }
}

void rope_rotate_head(float* head, RopeStyle style, int64_t n_rot, const float* cos_sin) {
  const int64_t half = n_rot / 2;
  for (int64_t i = 0; i < half; ++i) {
    const int64_t a = style == RopeStyle::kInterleaved ? 2 * i : i;
    const int64_t b = style == RopeStyle::kInterleaved ? 2 * i + 1 : i + half;
    const float c = cos_sin[i], sn = cos_sin[half + i];
    const float v0 = head[a], v1 = head[b];
    head[a] = v0 * c - v1 * sn;
    head[b] = v0 * sn + v1 * c;
  }
}

float gelu_tanh(float x) {
  constexpr float kSqrt2OverPi = 0.79788456080286535588f;
  return 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * x * (1.0f + 0.044715f * x * x)));
}

void geglu_tanh_ref(float* gate, const float* up, int64_t n) {
  for (int64_t i = 0; i < n; ++i) gate[i] = gelu_tanh(gate[i]) * up[i];
}

}  // namespace hinge::kernels
