// Helpers shared by the GGUF reader and writer (not part of the public API).
#pragma once

#include <cstdint>
#include <optional>

#include "format/gguf.h"

namespace hinge::gguf::internal {

// Encoded size of a scalar value type; nullopt for STRING and ARRAY (variable length).
std::optional<uint64_t> scalar_bytes(ValueType t);

// *out = a * b; false on uint64 overflow.
bool checked_mul(uint64_t a, uint64_t b, uint64_t* out);

}  // namespace hinge::gguf::internal
