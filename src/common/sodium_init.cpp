#include "common/sodium_init.h"

#include <sodium.h>

#include "common/status.h"

namespace hinge {

void ensure_sodium() {
  static const bool ok = sodium_init() >= 0;
  HINGE_CHECK_MSG(ok, "libsodium failed to initialise");
}

}  // namespace hinge
