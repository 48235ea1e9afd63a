#include "cli/memory_report.h"

#include <cstdint>

#include <fmt/format.h>

#include "common/units.h"

namespace hinge::cli {
namespace {

std::string bytes(int64_t n) { return format_bytes(static_cast<uint64_t>(n < 0 ? 0 : n)); }

}  // namespace

std::string memory_budget_summary(const EngineStats& s) {
  if (s.memory_budget_bytes <= 0) return {};
  std::string line = fmt::format(
      "{} held: RSS peak {} at the guard's readings, KV resident {} now; {} KV "
      "evictions, {} preemptions; {} of free KV pages returned beyond the {} low watermark",
      bytes(s.memory_budget_bytes), bytes(s.rss_peak_bytes), bytes(s.kv_resident_bytes),
      s.kv.pool.num_evictions, s.preemptions, bytes(s.kv_trimmed_bytes),
      bytes(s.kv_low_watermark_bytes));
  if (s.memory_budget_limited > 0)
    line += fmt::format("; the rest of the process grew, so KV was held to {} of {} blocks at {} "
                        "readings",
                        s.memory_budget_kv_limit_blocks, s.kv_blocks_total,
                        s.memory_budget_limited);
  if (s.memory_budget_overshoots > 0)
    line += fmt::format(" (and let one request go on past it at {} steps)",
                        s.memory_budget_overshoots);
  return line;
}

}  // namespace hinge::cli
