// libsodium's one-time initialization (it picks the fastest BLAKE2b / ChaCha implementations for
// this CPU). Safe to call from any thread, as often as needed; aborts if libsodium cannot start.
#pragma once

namespace hinge {

void ensure_sodium();

}  // namespace hinge
