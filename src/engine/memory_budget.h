// The hard memory budget (--memory-budget, or the cgroup v2 limit when one is set): what the
// process holds resident — weights (mapped pages and packed copies), the KV arena, scratch
// buffers and the runtime — stays under it. The engine measures what is resident once the model
// is loaded and packed, adds the mapped weight pages not read yet, the buffers it has still to
// allocate and a reserve for the runtime (heap growth, connections, threads), and gives the KV
// arena what remains:
//
//   kv = budget - (resident now - model pages resident now + model pages kept mapped)
//               - scratch - reserve            reserve = 16 MiB + 3 % of the budget
//
// When that leaves less than one KV block the engine refuses to start, with the breakdown.
//
// Thread-safety: plain functions (the readers read /proc/self and call mincore).
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "common/status.h"
#include "engine/kv_budget.h"
#include "hinge/engine.h"
#include "kv/kv_memory_guard.h"

namespace hinge {

struct MemoryBudgetInput {
  int64_t budget_bytes = 0;
  std::string source;            // "--memory-budget" or "cgroup memory.max" (for messages)
  int64_t resident_bytes = 0;    // the process's RSS now
  int64_t model_resident_bytes = 0;  // of which pages of the model's file mappings
  int64_t model_kept_bytes = 0;  // mapped weight bytes the engine may still read (not packed)
  int64_t packed_bytes = 0;      // packed weight copies (part of resident_bytes)
  int64_t scratch_bytes = 0;     // buffers the engine allocates after the arena
  int64_t kv_block_bytes = 1;
  int64_t kv_cap_bytes = 0;      // > 0: at most this much KV (--kv-memory, or what is useful)
};

struct MemoryPlan {
  int64_t kv_bytes = 0;          // the KV arena's share
  int64_t fixed_bytes = 0;       // everything else, reserve included
  int64_t reserve_bytes = 0;
  std::string breakdown;         // one line: "memory budget 256.0 MiB (--memory-budget): ..."
};

int64_t memory_reserve_bytes(int64_t budget_bytes);

// Errors: the weights and runtime alone do not fit (the message holds the breakdown and the
// smallest budget that would work).
StatusOr<MemoryPlan> plan_memory(const MemoryBudgetInput& in);

// The engine's KV arena size in blocks: kv_num_blocks(budget) without a memory budget; with
// one, what remains of it once the model is resident (plan_memory, measured now: call after
// the model is packed), at most --kv-memory or what full concurrency at full length uses.
// *breakdown gets plan_memory's line.
struct ArenaSizing {
  KvBudgetInput budget;            // engine/kv_budget.h
  int64_t memory_budget_bytes = 0;
  std::string memory_budget_source;
  int32_t max_num_seqs = 1;
  int32_t threads = 1;
  int64_t n_vocab = 0;
  std::span<const std::span<const uint8_t>> file_mappings;
  int64_t dropped_file_bytes = 0;  // Transformer::dropped_file_bytes
  int64_t packed_bytes = 0;        // Transformer::packed_bytes
  int32_t max_batched_tokens = 1;  // a sequence's tokens per step (sliding-window demand)
};
StatusOr<int64_t> kv_arena_blocks(const ArenaSizing& z, std::string* breakdown);
// The context a memory budget's arena of `blocks` holds for one sequence: max_model_len, or
// fewer tokens (then "; context lowered from X to Y tokens ..." is appended to *breakdown).
int32_t budget_context_tokens(const ArenaSizing& z, int64_t blocks, int32_t max_model_len,
                              std::string* breakdown);

// The budget held while running, as EngineStats reports it (memory_budget_bytes, rss_bytes,
// the KV limit, overshoots, ...).
void fill_memory_budget_stats(const KvMemoryGuard& guard, EngineStats* s);

// Before the model is packed: do the mapped weights alone (file_bytes) fit the budget?
Status check_weights_fit(int64_t budget_bytes, const std::string& source,
                         std::span<const std::span<const uint8_t>> file_mappings,
                         uint64_t file_bytes, int64_t kv_block_bytes);

}  // namespace hinge
