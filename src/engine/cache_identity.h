// The KV format fingerprint of an engine: what a cached block's KV bytes depend on besides its
// tokens. It seeds every block hash (kv::KvCacheConfig::fingerprint), so KV written under
// another model, KV dtype or layout never hits, in this process or when restored from another
// one. Covers: the model's shape and RoPE, a digest of its embedding and output weights (the
// first 64 KiB of each, which tells fine-tunes of one shape apart), the KV spec (dtypes, block
// size) and the layout version below. The engine folds the digest of its KV calibration (fp8
// scales, K-shift means; engine/kv_calibration.h) into it.
#pragma once

#include <cstdint>

#include "kv/kv_spec.h"

namespace hinge {

struct LoadedModel;

// Bump when the arena's byte layout of a block changes (kv_spec.h, kernels/paged_kv).
inline constexpr uint32_t kKvLayoutVersion = 1;

uint64_t kv_cache_fingerprint(const LoadedModel& model, const kv::KvSpec& spec);

}  // namespace hinge
