#include "kernels/cpu_features.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>

#include <fmt/format.h>

#if defined(__x86_64__)
#include <cpuid.h>
#endif
#if defined(__x86_64__) && defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace hinge::kernels {

namespace {
std::atomic<bool> g_allowed{true};
std::atomic<bool> g_amx_allowed{true};
std::atomic<bool> g_bf16_allowed{true};

bool env_off(const char* name) {
  const char* off = std::getenv(name);
  return off && std::strcmp(off, "1") == 0;
}

bool detect_vnni() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx512vnni") || !__builtin_cpu_supports("avx512vl") ||
      !__builtin_cpu_supports("avx512bw"))
    return false;
  return !env_off("HINGE_DISABLE_VNNI");
#else
  return false;
#endif
}

bool detect_avx_vnni() {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  if (env_off("HINGE_DISABLE_VNNI")) return false;
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid_max(0, nullptr) < 7) return false;
  __cpuid_count(7, 1, a, b, c, d);
  __builtin_cpu_init();
  return ((a >> 4) & 1) && __builtin_cpu_supports("avx2");
#else
  return false;
#endif
}

// CPUID leaf 7, sub-leaf `sub`: register EAX (0), EBX (1), ECX (2) or EDX (3); 0 when the leaf
// is missing.
unsigned cpuid7(unsigned sub, int reg) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  unsigned r[4] = {0, 0, 0, 0};
  if (__get_cpuid_max(0, nullptr) < 7) return 0;
  __cpuid_count(7, sub, r[0], r[1], r[2], r[3]);
  return r[reg];
#else
  (void)sub;
  (void)reg;
  return 0;
#endif
}
unsigned cpuid7_edx() { return cpuid7(0, 3); }
unsigned cpuid7_1_eax() { return cpuid7(1, 0); }

// The tile unit as the OS lets this process use it: AMX-TILE, XCR0's tile state, and the
// XTILEDATA permission (requested once; Linux 5.16+). Computed once.
bool amx_tiles_usable() {
#if defined(__x86_64__) && defined(__linux__)
  static const bool usable = [] {
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (__get_cpuid_max(0, nullptr) < 0xD) return false;
    if (!((cpuid7_edx() >> 24) & 1)) return false;  // AMX-TILE
    __cpuid(1, a, b, c, d);
    if (!((c >> 27) & 1)) return false;  // OSXSAVE: xgetbv is allowed
    unsigned lo = 0, hi = 0;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    const unsigned kTileCfg = 1u << 17, kTileData = 1u << 18;
    if ((lo & (kTileCfg | kTileData)) != (kTileCfg | kTileData)) return false;
    constexpr long kArchGetXcompPerm = 0x1022, kArchReqXcompPerm = 0x1023;
    constexpr unsigned long kXfeatureXtiledata = 18;
    if (syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) != 0) return false;
    unsigned long perm = 0;
    if (syscall(SYS_arch_prctl, kArchGetXcompPerm, &perm) != 0) return false;
    return ((perm >> kXfeatureXtiledata) & 1) != 0;
  }();
  return usable;
#else
  return false;
#endif
}

bool detect_amx() {
  if (env_off("HINGE_DISABLE_AMX") || !detect_vnni()) return false;
  return ((cpuid7_edx() >> 25) & 1) && amx_tiles_usable();  // AMX-INT8
}

bool detect_avx512_bf16() {
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx512bw") || !__builtin_cpu_supports("avx512vl")) return false;
  return ((cpuid7_1_eax() >> 5) & 1) != 0;  // AVX512_BF16
#else
  return false;
#endif
}

bool detect_amx_bf16() {
  return detect_avx512_bf16() && ((cpuid7_edx() >> 22) & 1) && amx_tiles_usable();
}

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == ' ' || s.back() == '\0')) s.pop_back();
  size_t i = 0;
  while (i < s.size() && s[i] == ' ') ++i;
  return s.substr(i);
}

std::string microarch_of(const CpuIdentity& id, bool amx) {
  if (id.vendor == CpuVendor::kAmd) {
    if (id.family == 0x17) return "Zen 2 or earlier";
    if (id.family == 0x19) {
      const int m = id.model;
      if ((m >= 0x10 && m <= 0x1F) || (m >= 0x60 && m <= 0x7F) || (m >= 0xA0 && m <= 0xAF))
        return "Zen 4";
      return "Zen 3";
    }
    if (id.family == 0x1A) return "Zen 5";
    return "";
  }
  if (id.vendor == CpuVendor::kIntel && id.family == 6) {
    switch (id.model) {
      case 0x8F: return "Sapphire Rapids";
      case 0xCF: return "Emerald Rapids";
      case 0xAD: case 0xAE: return "Granite Rapids";
      case 0x6A: case 0x6C: return "Ice Lake";
      case 0x55: return "Skylake/Cascade Lake";
      default: break;
    }
    // Hypervisors often report another model; the instruction set still tells the class.
    if (amx) return "Sapphire Rapids class";
  }
  return "";
}

CpuIdentity detect_identity() {
  CpuIdentity id;
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  unsigned a = 0, b = 0, c = 0, d = 0;
  const unsigned max = __get_cpuid_max(0, nullptr);
  if (max >= 1) {
    __cpuid(0, a, b, c, d);
    char vendor[13] = {};
    std::memcpy(vendor, &b, 4);
    std::memcpy(vendor + 4, &d, 4);
    std::memcpy(vendor + 8, &c, 4);
    if (std::strcmp(vendor, "GenuineIntel") == 0) id.vendor = CpuVendor::kIntel;
    if (std::strcmp(vendor, "AuthenticAMD") == 0) id.vendor = CpuVendor::kAmd;
    __cpuid(1, a, b, c, d);
    const int base_family = (a >> 8) & 0xF, base_model = (a >> 4) & 0xF;
    id.family = base_family == 0xF ? base_family + static_cast<int>((a >> 20) & 0xFF) : base_family;
    id.model = (base_family == 0x6 || base_family == 0xF)
                   ? static_cast<int>(((a >> 16) & 0xF) << 4) + base_model
                   : base_model;
    id.stepping = static_cast<int>(a & 0xF);
  }
  if (static_cast<unsigned>(__get_cpuid_max(0x80000000, nullptr)) >= 0x80000004u) {
    char brand[49] = {};
    for (unsigned leaf = 0; leaf < 3; ++leaf) {
      __cpuid(0x80000002 + leaf, a, b, c, d);
      std::memcpy(brand + 16 * leaf, &a, 4);
      std::memcpy(brand + 16 * leaf + 4, &b, 4);
      std::memcpy(brand + 16 * leaf + 8, &c, 4);
      std::memcpy(brand + 16 * leaf + 12, &d, 4);
    }
    id.brand = trim(brand);
  }
  __builtin_cpu_init();
  id.amx_int8 = ((cpuid7_edx() >> 25) & 1) && amx_tiles_usable();
  id.amx_bf16 = ((cpuid7_edx() >> 22) & 1) && amx_tiles_usable();
  id.avx512_vnni = __builtin_cpu_supports("avx512vnni");
  id.avx512_bf16 = detect_avx512_bf16();
  id.avx512f = __builtin_cpu_supports("avx512f");
  id.avx2_fma = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  {
    // clang's __builtin_cpu_supports has no "f16c": read CPUID leaf 1 directly.
    unsigned a = 0, b = 0, c = 0, d = 0;
    id.f16c = __get_cpuid(1, &a, &b, &c, &d) && ((c >> 29) & 1);
  }
  for (auto [has, name] : {std::pair{id.amx_int8, "amx-int8"}, {id.amx_bf16, "amx-bf16"},
                           {id.avx512_vnni, "avx512-vnni"}, {id.avx512_bf16, "avx512-bf16"},
                           {id.avx512f, "avx512"}, {id.avx2_fma, "avx2-fma"}}) {
    if (!has) continue;
    if (!id.isa.empty()) id.isa += ' ';
    id.isa += name;
  }
  id.microarch = microarch_of(id, id.amx_int8);
#endif
  if (id.brand.empty()) id.brand = "unknown CPU";
  return id;
}
}  // namespace

bool cpu_has_avx512_vnni() {
  static const bool has = detect_vnni();
  return has && g_allowed.load(std::memory_order_relaxed);
}

bool cpu_has_avx_vnni() {
  static const bool has = detect_avx_vnni();
  return has && g_allowed.load(std::memory_order_relaxed);
}

void set_vnni_allowed_for_test(bool allowed) { g_allowed.store(allowed); }

bool cpu_has_amx_int8() {
  static const bool has = detect_amx();
  return has && g_amx_allowed.load(std::memory_order_relaxed) && cpu_has_avx512_vnni();
}

void set_amx_allowed_for_test(bool allowed) { g_amx_allowed.store(allowed); }

bool cpu_has_avx512_bf16() {
  static const bool has = detect_avx512_bf16() && !env_off("HINGE_DISABLE_BF16");
  return has && g_bf16_allowed.load(std::memory_order_relaxed);
}

bool cpu_has_amx_bf16() {
  static const bool has = detect_amx_bf16() && !env_off("HINGE_DISABLE_AMX");
  return has && g_amx_allowed.load(std::memory_order_relaxed) && cpu_has_avx512_bf16();
}

void set_bf16_allowed_for_test(bool allowed) { g_bf16_allowed.store(allowed); }

const CpuIdentity& cpu_identity() {
  static const CpuIdentity id = detect_identity();
  return id;
}

std::string cpu_label() {
  const CpuIdentity& id = cpu_identity();
  const char* vendor = id.vendor == CpuVendor::kIntel ? "Intel"
                       : id.vendor == CpuVendor::kAmd ? "AMD"
                                                      : "other vendor";
  return fmt::format("{} ({} family {} model {}{}{}; {})", id.brand, vendor, id.family, id.model,
                     id.microarch.empty() ? "" : ", ", id.microarch,
                     id.isa.empty() ? "no AVX2" : id.isa);
}

}  // namespace hinge::kernels
