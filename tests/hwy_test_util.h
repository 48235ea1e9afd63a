// Highway target sweeps for kernel tests: each SIMD path checked on every target the CPU runs.
#pragma once

#include <gtest/gtest.h>
#include <hwy/targets.h>

#include <cstdint>

namespace hinge::testing {

// Runs fn(target) once for each of AVX3_DL, AVX3, AVX2, SSE4, SSSE3, EMU128 and SCALAR that
// this CPU runs, with dispatch forced to it (hwy::SetSupportedTargetsForTest), and restores
// the normal dispatch after each, also when fn stops at a fatal failure (then the sweep stops).
// Returns how many targets ran.
template <class Fn>
int for_each_cpu_target(Fn&& fn) {
  struct Restore {
    ~Restore() { hwy::SetSupportedTargetsForTest(0); }
  };
  const int64_t supported = hwy::SupportedTargets();
  int ran = 0;
  for (int64_t target :
       {int64_t{HWY_AVX3_DL}, int64_t{HWY_AVX3}, int64_t{HWY_AVX2}, int64_t{HWY_SSE4},
        int64_t{HWY_SSSE3}, int64_t{HWY_EMU128}, int64_t{HWY_SCALAR}}) {
    if (!(supported & target)) continue;
    ++ran;
    const Restore restore;
    hwy::SetSupportedTargetsForTest(target);
    fn(target);
    if (::testing::Test::HasFatalFailure()) break;
  }
  return ran;
}

}  // namespace hinge::testing
