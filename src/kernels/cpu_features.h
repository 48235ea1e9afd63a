// CPU features the Highway targets do not cover, checked at run time (never assumed from the
// build machine). Thread-safe: the CPUID result is computed once.
#pragma once

#include <string>

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

// What this CPU is, read once with CPUID (x86) or left generic: the dispatcher's per-
// microarchitecture choices (kernel_policy.h) and every benchmark figure name it.
enum class CpuVendor { kOther, kIntel, kAmd };
struct CpuIdentity {
  CpuVendor vendor = CpuVendor::kOther;
  int family = 0;  // display family (base + extended), as /proc/cpuinfo prints it
  int model = 0;   // display model (extended << 4 | base)
  int stepping = 0;
  std::string brand;       // the brand string, trimmed ("Intel(R) Xeon(R) Processor")
  std::string microarch;   // "Zen 4", "Sapphire Rapids class", ... or "" when not known
  // Instruction families the CPU and OS provide, whatever the HINGE_DISABLE_* switches say
  // (AMX counts only with the tile permission granted).
  bool amx_int8 = false, amx_bf16 = false, avx512_vnni = false, avx512_bf16 = false;
  bool avx512f = false, avx2_fma = false;
  bool f16c = false;  // vcvtph2ps / vcvtps2ph (CPUID leaf 1 ECX bit 29); not listed in `isa`
  // The same as words for output: "amx-int8 amx-bf16 avx512-vnni avx512-bf16 avx512 avx2-fma",
  // those it has, in that order.
  std::string isa;
};
const CpuIdentity& cpu_identity();
// One line for benchmark output: brand (vendor family F model M, microarch; isa).
std::string cpu_label();
// AVX-512 BF16 (vdpbf16ps) and AMX-BF16 (tdpbf16ps) as the CPU reports them; AMX-BF16 also
// needs the tile permission (as AMX-INT8). Off with HINGE_DISABLE_BF16=1 / HINGE_DISABLE_AMX=1.
bool cpu_has_avx512_bf16();
bool cpu_has_amx_bf16();
void set_bf16_allowed_for_test(bool allowed);

}  // namespace hinge::kernels
