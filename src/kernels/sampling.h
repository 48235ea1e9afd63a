// Kernels of token sampling: the vocabulary-wide pass every sampled token makes.
#pragma once

#include <cstdint>

namespace hinge::kernels {

// probs[i] = exp((x[i] - max) * scale) for i < n (each in (0, 1] when max >= every x[i] and
// scale > 0; tiny values may flush to 0), and returns their sum. Highway's Exp (a few ulp) on
// every SIMD target; exp_shifted_ref is the scalar definition (std::exp) the tests compare to.
double exp_shifted(const float* x, int64_t n, float max, float scale, float* probs);
double exp_shifted_ref(const float* x, int64_t n, float max, float scale, float* probs);

}  // namespace hinge::kernels
