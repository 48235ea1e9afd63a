// libFuzzer target: the tenants file (hinge serve --tenants) is operator input read on start,
// SIGHUP and POST /admin/reload, and a bad one must be refused, never crash. The whole input is
// parsed; an error must be one line naming a line number, and a parsed configuration must hold
// what the parser promises (unique ids and digests, values in range).
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <set>
#include <string_view>

#include "server/tenancy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto c = hinge::server::parse_tenants(text);
  if (!c.ok()) {
    const std::string m = c.status().message();
    if (m.empty() || m.find('\n') != std::string::npos) __builtin_trap();
    if (m.rfind("line ", 0) != 0 && m.rfind("the tenants file is ", 0) != 0) __builtin_trap();
    return 0;
  }
  std::set<std::string> ids;
  std::set<hinge::server::KeyDigest> digests;
  for (const auto& t : c->tenants) {
    if (t.id.empty() || t.id.size() > 64 || !ids.insert(t.id).second) __builtin_trap();
    if (t.key_digests.empty() || t.permission_version < 0) __builtin_trap();
    if (!(t.cache_share > 0 && t.cache_share <= 1) || t.max_concurrent < 0) __builtin_trap();
    if (t.cache_ttl_s && !(std::isfinite(*t.cache_ttl_s) && *t.cache_ttl_s >= 0)) __builtin_trap();
    for (const auto& d : t.key_digests)
      if (!digests.insert(d).second) __builtin_trap();
    if (c->find(t.id) != &t) __builtin_trap();
  }
  for (const auto& d : c->admin_digests)
    if (!digests.insert(d).second) __builtin_trap();
  for (const auto& p : c->public_prefixes)
    if (p.id.empty() || p.text.empty()) __builtin_trap();
  return 0;
}
