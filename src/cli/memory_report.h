// How a command reports the memory budget held while running (kv/kv_memory_guard.h): one
// stderr line and the --json fields, the same in run, chat and bench.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "hinge/engine.h"

namespace hinge::cli {

// "memory budget 400 MiB held: RSS peak 374 MiB (at the guard's readings), ..."; empty without
// a budget.
std::string memory_budget_summary(const EngineStats& s);
// memory_budget_bytes, rss_peak_bytes, kv_resident_bytes, memory_budget_kv_limit_blocks,
// memory_budget_limited, kv_trimmed_bytes, kv_low_watermark_bytes, kv_evictions, preemptions
// (nothing without a budget).
void add_memory_budget_fields(nlohmann::json& j, const EngineStats& s);

}  // namespace hinge::cli
