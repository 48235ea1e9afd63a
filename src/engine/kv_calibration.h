// KV calibration, an explicit step at engine start (issue 13): the state a lossy KV format
// needs besides the bytes of each block — the fp8 per-(layer, K/V) scales and the per-layer
// K-shift mean of the quantized formats (kv::KvArena) — is fixed by one forward pass over a
// stated input before any request runs. A request's output then no longer depends on what the
// engine ran first, and the digest of that state goes into the cache fingerprint, so KV kept
// anywhere says which calibration it was written under.
//
// The input: kCalibrationTokens token ids drawn from a fixed-seed generator over the
// vocabulary (no text, no tokenizer: the same on every machine), fewer when the step budget,
// context or arena is smaller. It is written to the arena's first blocks, which are free at
// start and overwritten before any request reads them.
#pragma once

#include <cstdint>

#include "common/status.h"
#include "kv/kv_arena.h"
#include "model/transformer.h"

namespace hinge {

inline constexpr int32_t kCalibrationTokens = 64;

// Runs the calibration pass when arena's KV format has calibrated state and returns its digest
// (never 0); returns 0 for plain float KV (f32 / f16 / bf16), which has none.
StatusOr<uint64_t> calibrate_kv(Transformer& model, kv::KvArena& arena, int32_t max_tokens);

// The digest of the arena's calibrated state (0 when it has none).
uint64_t kv_calibration_digest(const kv::KvArena& arena);

}  // namespace hinge
