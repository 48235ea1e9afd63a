// CPU features the Highway targets do not cover, checked at run time (never assumed from the
// build machine). Thread-safe: the CPUID result is computed once.
#pragma once

namespace hinge::kernels {

// AVX-512 VNNI (vpdpbusd on 256-bit vectors with AVX-512 VL), used by the Q8_0/Q4_0 matmul on
// the AVX3 targets. False when HINGE_DISABLE_VNNI=1 is set or a test turned it off.
bool cpu_has_avx512_vnni();
// Tests: run the non-VNNI path on a VNNI machine (false), or restore detection (true).
void set_vnni_allowed_for_test(bool allowed);

}  // namespace hinge::kernels
