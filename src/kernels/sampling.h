// Kernels of token sampling: the vocabulary-wide pass every sampled token makes.
#pragma once

#include <cstdint>

namespace hinge::kernels {

// probs[i] = exp((x[i] - max) * scale) for i < n (each in (0, 1] when max >= every x[i] and
// scale > 0; tiny values may flush to 0), and returns their sum. Highway's Exp (a few ulp) on
// every SIMD target; exp_shifted_ref is the scalar definition (std::exp) the tests compare to.
// run_sums (optional, ceil(n / kExpRun) entries) receives the sum of each run of kExpRun
// values, so a draw can skip to its run instead of walking the whole vocabulary.
// block_max (optional, ceil(n / kExpBlock) entries) receives the largest value of each block
// of kExpBlock, from which top-k finds a threshold without a pass of its own.
inline constexpr int64_t kExpRun = 1024;
inline constexpr int64_t kExpBlock = 64;
double exp_shifted(const float* x, int64_t n, float max, float scale, float* probs,
                   double* run_sums = nullptr, float* block_max = nullptr);
double exp_shifted_ref(const float* x, int64_t n, float max, float scale, float* probs,
                       double* run_sums = nullptr, float* block_max = nullptr);

}  // namespace hinge::kernels
