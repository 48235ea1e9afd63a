#include "server/metrics_tier.h"

#include <fmt/format.h>

#include "server/metrics.h"

namespace hinge::server {

std::string render_tier_metrics(std::span<kv::KvTierStore* const> tiers, const EngineStats& e,
                                const std::string& labels) {
  std::string o;
  if (tiers.empty()) return o;
  // One family: a line per tier (labelled tier="disk" / "redis"), or the engine's one line.
  auto family = [&](const char* name, const char* type, const char* help, auto value) {
    const std::string n = std::string("hinge:") + name;
    prometheus_header(&o, n, type, help);
    for (const kv::KvTierStore* t : tiers)
      o += fmt::format("{}{{{},tier=\"{}\"}} {}\n", n, labels, t->name(), value(t->counters()));
  };
  auto engine = [&](const char* name, const char* type, const char* help, double v) {
    const std::string n = std::string("hinge:") + name;
    prometheus_header(&o, n, type, help);
    o += fmt::format("{}{{{}}} {}\n", n, labels, v);
  };
  using C = kv::KvTierCounters;
  family("kv_tier_puts_total", "counter", "KV blocks written to the tier.",
         [](const C& c) { return c.puts; });
  family("kv_tier_put_errors_total", "counter", "KV block writes that failed (I/O, store down).",
         [](const C& c) { return c.put_errors; });
  family("kv_tier_hits_total", "counter", "KV blocks read back from the tier.",
         [](const C& c) { return c.hits; });
  family("kv_tier_misses_total", "counter", "KV block lookups the tier did not hold.",
         [](const C& c) { return c.misses; });
  family("kv_tier_rejected_total", "counter",
         "KV blocks found but refused (tampered, truncated, foreign) and removed.",
         [](const C& c) { return c.rejected; });
  family("kv_tier_get_errors_total", "counter", "KV block reads that failed (I/O, store down).",
         [](const C& c) { return c.get_errors; });
  family("kv_tier_evictions_total", "counter", "KV blocks dropped for room (LRU) or expired.",
         [](const C& c) { return c.evictions; });
  family("kv_tier_purged_total", "counter",
         "KV blocks deleted with their tenant (purge, permission version bumped).",
         [](const C& c) { return c.purged; });
  family("kv_tier_blocks", "gauge", "KV blocks the tier holds (-1: unknown, a shared store).",
         [](const C& c) { return c.entries; });
  family("kv_tier_bytes", "gauge", "Bytes the tier holds (-1: unknown, a shared store).",
         [](const C& c) { return c.bytes; });
  family("kv_tier_up", "gauge", "1 when the tier is reachable, 0 while it is down (reads and "
         "writes fail fast; requests are served from RAM).",
         [](const C& c) { return c.up; });
  family("kv_tier_capacity_bytes", "gauge", "The tier's size limit (0: none).",
         [](const C& c) { return c.capacity_bytes; });
  engine("kv_tier_fetches_total", "counter", "Requests that waited for a read of the KV tier.",
         static_cast<double>(e.kv_tier_fetches));
  engine("kv_tier_restored_blocks_total", "counter",
         "KV blocks brought back into RAM from the tier (their tokens count as cached).",
         static_cast<double>(e.kv_tier_restored_blocks));
  engine("kv_tier_written_blocks_total", "counter",
         "KV blocks the engine handed to the tier and it stored.",
         static_cast<double>(e.kv_tier_written_blocks));
  engine("kv_tier_dropped_writes_total", "counter",
         "KV blocks not written: the write queue was full.",
         static_cast<double>(e.kv_tier_dropped_writes));
  engine("kv_tier_queued_bytes", "gauge", "KV block bytes waiting to be written to the tier.",
         static_cast<double>(e.kv_tier_queued_bytes));
  engine("kv_tier_wait_seconds_total", "counter", "Seconds requests waited for reads of the tier.",
         e.kv_tier_wait_seconds);
  return o;
}

}  // namespace hinge::server
