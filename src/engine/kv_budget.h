// How many KV blocks the engine gets: from an explicit byte budget (--kv-memory), or from the
// memory available after the weights times a fraction, capped at what full concurrency at the
// maximum length could ever use (4x, so the prefix cache has room to keep old prefixes).
#pragma once

#include <cstdint>

#include "common/status.h"
#include "kv/kv_spec.h"

namespace hinge {

struct KvBudgetInput {
  kv::KvSpec spec;
  int64_t kv_memory_bytes = 0;      // > 0: explicit budget
  double kv_memory_fraction = 0.5;  // of available memory otherwise
  int64_t available_bytes = 0;      // MemAvailable
  int64_t weight_bytes = 0;         // subtracted from available_bytes
  int64_t max_num_seqs = 1;
  int64_t max_model_len = 0;
};

// Maximum number of blocks any budget is given (bookkeeping arrays stay small).
inline constexpr int64_t kMaxKvBlocks = int64_t{1} << 22;

// Errors say what to change: a budget below one block, not enough memory left.
StatusOr<int64_t> kv_num_blocks(const KvBudgetInput& in);

// MemAvailable from /proc/meminfo in bytes (0 when unknown).
int64_t available_memory_bytes();

}  // namespace hinge
