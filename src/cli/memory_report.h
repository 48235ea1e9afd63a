// How a command reports the memory budget held while running (kv/kv_memory_guard.h): one
// stderr line and the --json fields, the same in run, chat and bench.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "hinge/engine.h"

namespace hinge::cli {

// "400 MiB held: RSS peak 374 MiB at the guard's readings, ..." (printed after "memory budget");
// empty without a budget.
std::string memory_budget_summary(const EngineStats& s);
// memory_budget_bytes, rss_peak_bytes, kv_resident_bytes, memory_budget_kv_limit_blocks,
// memory_budget_limited, kv_trimmed_bytes, kv_low_watermark_bytes, kv_evictions, preemptions
// (nothing without a budget).
// (json or ordered_json).
template <class Json>
void add_memory_budget_fields(Json& j, const EngineStats& s) {
  if (s.memory_budget_bytes <= 0) return;
  j["memory_budget_bytes"] = s.memory_budget_bytes;
  j["rss_peak_bytes"] = s.rss_peak_bytes;
  j["kv_resident_bytes"] = s.kv_resident_bytes;
  j["memory_budget_kv_limit_blocks"] = s.memory_budget_kv_limit_blocks;
  j["memory_budget_limited"] = s.memory_budget_limited;
  j["memory_budget_overshoots"] = s.memory_budget_overshoots;
  j["kv_trimmed_bytes"] = s.kv_trimmed_bytes;
  j["kv_low_watermark_bytes"] = s.kv_low_watermark_bytes;
  j["kv_evictions"] = s.kv.pool.num_evictions;
  j["preemptions"] = s.preemptions;
}

}  // namespace hinge::cli
