// What each memory-pressure level (pressure/pressure_level.h) does to a serving engine, in the
// order the issue of bounded memory set: shrink the prefix cache and return its pages; lower
// max_num_seqs and the step token budget; cap max_tokens of new requests; pause admission (503
// with Retry-After) while running requests finish. A running request is never killed for
// pressure: the KV limit never goes below what running requests hold plus what admission has
// reserved for them (their worst case), so they complete without preemption.
//
//   level     KV usable                                seqs / tokens   new max_tokens  admission
//   normal    all                                      configured      as asked        open
//   elevated  max(kv_fraction x total, used + reserved) x step_fraction  <= max_tokens   open
//   critical  used + reserved                          x step_fraction  <= max_tokens   paused
//
// Temperature (a thermal zone at its passive or hot trip) is not a shortage of memory: it keeps
// admission open, the cache and max_tokens as they are, and lowers the work per step so the
// streams running get their tokens sooner and the CPU less heat: max_num_seqs and the step
// token budget (the prefill chunk that stalls every stream's next token) x thermal_fraction at
// elevated, x thermal_fraction^2 at critical; with memory pressure too, the lower of the two.
//
// Pure: pressure_actions() is a function of its arguments (tests pin the table).
#pragma once

#include <cstdint>

#include "pressure/pressure_level.h"

namespace hinge {

struct PressurePolicyConfig {
  double elevated_kv_fraction = 0.5;  // of the KV blocks kept usable at elevated
  double step_fraction = 0.5;         // of max_num_seqs and max_batched_tokens (>= 1 each)
  int32_t max_tokens = 256;           // cap on new requests' max_tokens; 0: no cap
  int32_t retry_after_s = 5;          // Retry-After of the 503s while paused
  double thermal_fraction = 0.5;      // of max_num_seqs and the step tokens, per thermal level
};

struct PressureActions {
  int32_t kv_block_limit = INT32_MAX;
  int32_t max_num_seqs = 0;        // 0: the configured one
  int32_t max_batched_tokens = 0;
  int32_t max_tokens_cap = 0;      // 0: none
  bool pause_admission = false;
  bool shrink_cache = false;       // evict the unused prefix cache, return free pages
};

PressureActions pressure_actions(pressure::PressureLevel level, const PressurePolicyConfig& p,
                                 int32_t max_num_seqs, int32_t max_batched_tokens,
                                 int32_t total_blocks, int32_t used_blocks,
                                 int32_t reserved_blocks,
                                 pressure::PressureLevel thermal = pressure::PressureLevel::kNormal);

}  // namespace hinge
