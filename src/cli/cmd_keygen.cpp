// `hinge keygen`: a fresh API key (32 random bytes from libsodium, base64url, "hk-" prefix) and
// the lowercase hex SHA-256 digest that goes into the tenants file's api_keys_sha256 or
// admin_api_keys_sha256. The key is printed once, here; hinge stores and logs only digests.
#include <cstdio>

#include "cli/commands.h"
#include "server/tenancy.h"

namespace hinge::cli {

int keygen_command() {
  const std::string key = server::new_api_key();
  std::printf("api_key: %s\napi_key_sha256: %s\n", key.c_str(),
              server::digest_hex(server::key_digest(key)).c_str());
  std::fprintf(stderr,
               "hinge: give the key to its client; put the digest in the tenants file "
               "(\"api_keys_sha256\" of a tenant, or \"admin_api_keys_sha256\")\n");
  return 0;
}

}  // namespace hinge::cli
