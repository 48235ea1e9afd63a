#include "kernels/cpu_features.h"

#include <atomic>
#include <cstdlib>
#include <cstring>

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

bool detect_amx() {
#if defined(__x86_64__) && defined(__linux__)
  if (env_off("HINGE_DISABLE_AMX") || !detect_vnni()) return false;
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid_max(0, nullptr) < 0xD) return false;
  __cpuid_count(7, 0, a, b, c, d);
  const bool amx_tile = (d >> 24) & 1, amx_int8 = (d >> 25) & 1;
  if (!amx_tile || !amx_int8) return false;
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
  return (perm >> kXfeatureXtiledata) & 1;
#else
  return false;
#endif
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

}  // namespace hinge::kernels
