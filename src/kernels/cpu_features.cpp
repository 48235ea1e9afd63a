#include "kernels/cpu_features.h"

#include <atomic>
#include <cstdlib>
#include <cstring>

namespace hinge::kernels {

namespace {
std::atomic<bool> g_allowed{true};

bool detect_vnni() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx512vnni") || !__builtin_cpu_supports("avx512vl") ||
      !__builtin_cpu_supports("avx512bw"))
    return false;
  const char* off = std::getenv("HINGE_DISABLE_VNNI");
  return !(off && std::strcmp(off, "1") == 0);
#else
  return false;
#endif
}
}  // namespace

bool cpu_has_avx512_vnni() {
  static const bool has = detect_vnni();
  return has && g_allowed.load(std::memory_order_relaxed);
}

void set_vnni_allowed_for_test(bool allowed) { g_allowed.store(allowed); }

}  // namespace hinge::kernels
