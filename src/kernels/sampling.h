// Kernels of token sampling: the vocabulary-wide pass every sampled token makes.
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>

namespace hinge::kernels {

// probs[i] = exp((x[i] - max) * scale) for i < n (each in (0, 1] when max >= every x[i] and
// scale > 0), and returns their sum. SIMD: cephes' expf reduction and polynomial (about 1 ulp),
// values below e^-86.6 (2^-125) flushed to 0; exp_shifted_ref is the scalar definition
// (std::exp) the tests compare to.
// run_sums (optional, ceil(n / kExpRun) entries) receives the sum of each run of kExpRun
// values, so a draw can skip to its run instead of walking the whole vocabulary.
// block_max (optional, ceil(n / kExpBlock) entries) receives the largest value of each block
// of kExpBlock, from which top-k finds a threshold without a pass of its own.
// log_bins (optional, n entries) receives each value's log_bin().
inline constexpr int64_t kExpRun = 1024;
inline constexpr int64_t kExpBlock = 64;
double exp_shifted(const float* x, int64_t n, float max, float scale, float* probs,
                   double* run_sums = nullptr, float* block_max = nullptr,
                   uint16_t* log_bins = nullptr);
double exp_shifted_ref(const float* x, int64_t n, float max, float scale, float* probs,
                       double* run_sums = nullptr, float* block_max = nullptr,
                       uint16_t* log_bins = nullptr);

// A weight w in [0, 1] on a log scale: log_dist(w) = bits(1.0f) - bits(w) (0 for w >= 1;
// larger, smaller w). Its top bits are log_bin(w), 1/32 of an octave each, bin 0 holding the
// top token, everything below 2^-32 in the last bin; the lower bits refine a bin.
inline constexpr uint32_t kLogOne = 0x3F800000u;
inline constexpr int kLogBinShift = 18;
inline constexpr int32_t kLogBins = 1024;
inline uint32_t log_dist(float w) { return kLogOne - std::min(std::bit_cast<uint32_t>(w), kLogOne); }
inline int32_t log_bin(float w) {
  return static_cast<int32_t>(std::min<uint32_t>(log_dist(w) >> kLogBinShift, kLogBins - 1));
}

// The kept set of a truncation, as a cut in the order (weight descending, id ascending): the
// ids with w > w_cut, and those with w == w_cut up to id_cut. block_max (from exp_shifted,
// optional) lets the kernels skip whole blocks below the cut.
struct KeptCut {
  float w_cut;
  int32_t id_cut;
};
inline bool is_kept(float w, int64_t i, KeptCut c) {
  return w > c.w_cut || (w == c.w_cut && i <= c.id_cut);
}

// Sum of w[i] over the kept ids (f32 lanes within runs of kExpRun, then f64).
double kept_sum(const float* w, int64_t n, KeptCut c, const float* block_max);
double kept_sum_ref(const float* w, int64_t n, KeptCut c);

// Writes the ids i (ascending) with lo <= w[i] <= hi to ids and returns how many. ids holds
// n + kGatherSlack entries (vector stores may write past the count).
inline constexpr int64_t kGatherSlack = 64;
int64_t gather_between(const float* w, int64_t n, float lo, float hi, int32_t* ids,
                       const float* block_max);
int64_t gather_between_ref(const float* w, int64_t n, float lo, float hi, int32_t* ids);

// The first kept id at which the running sum (id order, f64) of kept weights exceeds r, or -1
// when rounding leaves r at or past the total (the caller picks a kept token).
int64_t draw_kept(const float* w, int64_t n, KeptCut c, double r, const float* block_max);
int64_t draw_kept_ref(const float* w, int64_t n, KeptCut c, double r);

}  // namespace hinge::kernels
