// An SVG chart of a simulation (`hinge simulate --svg FILE`): KV blocks in use over time against
// the cache's size, running and waiting requests over time, and where the steps' time went
// (the roofline's compute, weights and KV parts, and the per-step overhead), and the latency by
// percentile (every request's time to first token, every gap between tokens), with the
// percentiles written above. Self-contained SVG 1.1, no script, readable in a browser or
// an image viewer.
#pragma once

#include <string>

#include "plan/simulator.h"

namespace hinge::plan {

// `title` goes on top (escaped); `kv_blocks_total` is the cache's size. Needs result.trace
// (and ttft_s / itl_s: simulate with keep_trace).
std::string simulation_svg(const SimResult& result, int32_t kv_blocks_total,
                           const std::string& title);

}  // namespace hinge::plan
