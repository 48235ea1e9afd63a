// Element-wise and row-wise operations of the transformer block (f32 activations).
// Each has a scalar definition here that doubles as the reference; they are cheap next to the
// matrix products (O(dim) per token versus O(dim^2)), so they stay simple and auto-vectorized.
#pragma once

#include <cstdint>
#include <vector>

namespace hinge::kernels {

// out[i] = x[i] / sqrt(mean(x^2) + eps) * w[i]   (llama2.c / ggml order of operations)
void rmsnorm(float* out, const float* x, const float* w, int64_t n, float eps);

// In-place softmax over n values (max-subtracted, f32).
void softmax(float* x, int64_t n);

// gate[i] = silu(gate[i]) * up[i]   (SwiGLU)
void swiglu(float* gate, const float* up, int64_t n);

// y[i] += x[i]
void add_inplace(float* y, const float* x, int64_t n);

// How the two halves of each rotated pair are laid out inside a head.
enum class RopeStyle {
  kInterleaved,  // pairs (2i, 2i+1): GGUF llama, llama2.c
  kNeox,         // pairs (i, i + head_dim/2): Hugging Face rotate-half
};

// RoPE as llama.cpp's ggml_rope_ext computes it, precomputed for one layer kind: the first
// n_rot dimensions of each head rotate (partial rotary leaves the rest), pairs laid out by
// `style`; pair i turns by theta_i = pos * base^(-2i/n_rot) / freq_factor_i, scaled by
// freq_scale (linear interpolation) and, with YaRN (ext_factor != 0), blended back towards the
// unscaled angle on the fast-rotating pairs; cos and sin are multiplied by mscale.
struct RopeTable {
  RopeStyle style = RopeStyle::kInterleaved;
  int64_t n_rot = 0;
  std::vector<float> inv_freq;  // [n_rot / 2] base^(-2i/n_rot) / freq_factor_i
  std::vector<float> mix;       // [n_rot / 2] YaRN ramp x ext_factor (empty: none)
  float freq_scale = 1.0f;
  float mscale = 1.0f;
};
struct RopeSpec {
  RopeStyle style = RopeStyle::kInterleaved;
  int64_t n_rot = 0;
  float theta = 10000.0f;
  float freq_scale = 1.0f;
  float ext_factor = 0.0f;
  float attn_factor = 1.0f;
  float beta_fast = 32.0f, beta_slow = 1.0f;
  int64_t n_ctx_orig = 0;
  const float* freq_factors = nullptr;  // [n_rot / 2] or null
};
RopeTable make_rope_table(const RopeSpec& spec);
// Rotates `num_heads` heads of `head_dim` values at position `pos`, in place. With no scaling
// the angle of pair i is pos * inv_freq[i] (llama2.c's expression, bit for bit).
void rope_ext(float* x, int64_t num_heads, int64_t head_dim, int64_t pos, const RopeTable& t);
// rope_ext of q (q_heads heads) and k (k_heads) at the same position, each angle's cos and sin
// computed once for both (the same results as two rope_ext calls).
void rope_ext_qk(float* q, int64_t q_heads, float* k, int64_t k_heads, int64_t head_dim,
                 int64_t pos, const RopeTable& t);
// The rotation rope_ext applies at position `delta`, at unit length (no mscale): cos_sin gets
// [n_rot / 2] cosines then [n_rot / 2] sines. Rotations compose (angles are linear in the
// position, YaRN's mix included), so rotating a vector already rotated at p by this table gives
// it the angle of p + delta (up to float rounding): the shift context policy rotates queries
// instead of re-rotating cached keys.
void rope_rotation(const RopeTable& t, int64_t delta, float* cos_sin);
// Rotates one head of head_dim values by a rope_rotation table (pairs as `style` pairs them).
void rope_rotate_head(float* head, RopeStyle style, int64_t n_rot, const float* cos_sin);

// GELU with the tanh approximation, gate[i] = gelu(gate[i]) * up[i] (GEGLU, Gemma): SIMD
// (ops_simd.cpp), and the scalar reference over gelu_tanh.
void geglu_tanh(float* gate, const float* up, int64_t n);
void geglu_tanh_ref(float* gate, const float* up, int64_t n);
float gelu_tanh(float x);
// x[i] = cap * tanh(x[i] / cap) (soft-capping, Gemma 2's logits), SIMD.
void softcap_inplace(float* x, int64_t n, float cap);

// Fills inv_freq[head_dim/2] = 1 / theta^(2i/head_dim), divided by freq_factors[i] when given
// (GGUF's rope_freqs.weight, Llama 3).
void rope_inv_freq(float* inv_freq, int64_t head_dim, float theta, const float* freq_factors);

// Llama-3 rope_scaling: per-pair divisors from (factor, low_freq_factor, high_freq_factor,
// original_max_position_embeddings), as in Hugging Face's _compute_llama3_parameters.
void llama3_freq_factors(float* factors, int64_t head_dim, float theta, float factor,
                         float low_freq_factor, float high_freq_factor, float original_context);

// Orthonormal Walsh-Hadamard transform of `count` vectors of d values each, in place (d a power
// of two; H = H^T = H^-1 after the 1/sqrt(d) scaling). Rotating both queries and keys leaves
// every score q . k unchanged while spreading a key's energy evenly over its channels, so a
// quantizer sees no outlier channel.
void hadamard_inplace(float* x, int64_t count, int64_t d);

// Index of the largest value (the first on ties), as llama2.c's argmax. SIMD (a max pass, then
// the first position holding it); argmax_ref is the scalar definition. No NaN in x.
int64_t argmax(const float* x, int64_t n);
int64_t argmax_ref(const float* x, int64_t n);

// Dot product of two f32 vectors.
float dot_f32(const float* a, const float* b, int64_t n);
// y[i] += a * x[i]
void axpy_f32(float* y, float a, const float* x, int64_t n);

}  // namespace hinge::kernels
