// CPU features the Highway targets do not cover, checked at run time (never assumed from the
// build machine). Thread-safe: the CPUID result is computed once.
#pragma once

namespace hinge::kernels {

// AVX-512 VNNI (vpdpbusd on 256-bit vectors with AVX-512 VL), used by the Q8_0/Q4_0 matmul on
// the AVX3 targets. False when HINGE_DISABLE_VNNI=1 is set or a test turned it off.
bool cpu_has_avx512_vnni();
// AVX-VNNI (the VEX-encoded 256-bit vpdpbusd of CPUs without AVX-512, e.g. Alder Lake, Zen 5),
// used by the Q8_0/Q4_0 matmul on the AVX2 target. Off with HINGE_DISABLE_VNNI=1 as well.
bool cpu_has_avx_vnni();
// Tests: run the non-VNNI paths on a VNNI machine (false: both AVX-512 VNNI and AVX-VNNI), or
// restore detection (true).
void set_vnni_allowed_for_test(bool allowed);

// AMX-INT8 tiles usable by this process: the CPU has AMX-TILE and AMX-INT8 (with AVX-512 VNNI
// for the kernel's vector half), the OS enables the tile state in XCR0, and the kernel granted
// this process the XTILEDATA permission (arch_prctl ARCH_REQ_XCOMP_PERM, requested once here;
// Linux 5.16+). False when HINGE_DISABLE_AMX=1 is set, a test turned it off, or VNNI is off.
bool cpu_has_amx_int8();
// Tests: take the VNNI path on an AMX machine (false), or restore detection (true).
void set_amx_allowed_for_test(bool allowed);

}  // namespace hinge::kernels
