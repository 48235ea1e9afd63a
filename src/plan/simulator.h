// A discrete-event simulation of serving on the real scheduler (`hinge simulate`): requests
// arrive by a trace or a generator, and each step is what sched::Scheduler (with its real
// kv::KvCacheManager and block pool: prefix hits, preemption, copy-on-write) schedules, exactly
// as the engine would, with no model: every sampled token is a constant and a request ends at
// its output length. A step's duration comes from a roofline cost model:
//
//   compute  = tokens x F / rate(tokens) + attention: sum over new tokens of their context x A /
//              the attention rate (the peak unless given: a CPU's attention runs far below it)
//   rate(n)  = the decode peak up to 16 rows a step, rising linearly to the peak at 512 (the
//              matrices of a step run as one product: decode rows in a prefill chunk run at
//              the chunk's rate)
//   memory   = (weight bytes + KV bytes the step reads) / bandwidth
//   step     = overhead + max(compute, memory)      (a GPU: the two overlap)
//            = overhead + compute + memory          (additive: a CPU's threads do both in turn)
//   KV bytes read = sum over scheduled sequences of their context (tokens so far) x KV per token
//
// F = the layer matrices' FLOPs per token, A = attention FLOPs per token per context token.
//
// Outputs: throughput, TTFT and time per output token percentiles, prefix hit rate,
// preemptions, KV blocks in use over time, and where each step's time went.
//
// Not thread-safe; pure bookkeeping (no I/O).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include <map>
#include <optional>

#include "common/status.h"
#include "sched/admission.h"
#include "sched/scheduler.h"

namespace hinge::plan {

struct SimRequest {
  double arrival_s = 0;          // with `after`: seconds after that request ends
  std::vector<int32_t> prompt;   // token ids (prefix caching compares them)
  int32_t output_tokens = 1;
  sched::Priority priority = sched::Priority::kInteractive;
  // The index of an earlier request this one follows (a conversation's previous turn: the user
  // reads the answer, thinks for arrival_s and sends the next message), or -1. A request whose
  // predecessor is refused is never sent (counted as abandoned).
  int64_t after = -1;
};

// The token every simulated step samples: a follow-up turn's prompt repeats its predecessor's
// output as this many copies of it, so the prefix cache can match the whole conversation.
inline constexpr int32_t kSimSampledToken = 1;

struct CostModel {
  double weight_bytes = 0;          // streamed once per step
  double kv_bytes_per_token = 0;    // all layers, K and V
  double prefill_flops_per_token = 0;     // F: the layer matrices
  double attention_flops_per_context = 0; // A: QK and PV per context token, all layers
  double bandwidth_bytes_per_s = 1;
  double peak_flops = 1;                  // prompt tokens'
  double decode_peak_flops = 0;           // decode tokens' (0: peak_flops)
  double attention_flops_rate = 0;        // attention's (0: peak_flops)
  double step_overhead_s = 0;             // per step, whatever it computes
  bool additive = false;                  // compute + memory instead of their max
};

struct SimStep {
  double start_s = 0, seconds = 0;
  int32_t prefill_tokens = 0, decode_tokens = 0;
  int32_t running = 0, waiting = 0;
  int32_t kv_blocks_used = 0;
  double compute_s = 0, weight_s = 0, kv_s = 0;  // the roofline's parts
  std::vector<uint64_t> sampled;  // request ids that got a token this step, in schedule order
};

struct SimResult {
  double seconds = 0;              // until the last request finished
  int64_t output_tokens = 0, prompt_tokens = 0, computed_prompt_tokens = 0;
  double output_tokens_per_s = 0;
  double ttft_p50_s = 0, ttft_p99_s = 0, itl_p50_s = 0, itl_p99_s = 0;
  double prefix_hit_rate = 0;
  int64_t preemptions = 0;
  int64_t steps = 0;
  // With admission control: requests refused, by verdict name ("too_large", "queue_full",
  // "timed_out", ...), and the longest wait in its queue.
  std::map<std::string, int64_t> rejected;
  double queue_wait_max_s = 0;
  int64_t abandoned = 0;           // follow-ups of refused requests, never sent
  int32_t kv_blocks_peak = 0;
  std::vector<SimStep> trace;      // every step (when asked)
  // With the trace: every request's time to first token and every inter-token gap, sorted.
  std::vector<double> ttft_s, itl_s;
};

// Errors: an invalid scheduler config, a request that cannot fit alone, an `after` that does not
// name an earlier request. With `admission`,
// arrivals go through the server's sched::AdmissionController first (worst-case reservations,
// its queue, refusals) as hinge serve runs it; without, straight to the scheduler.
StatusOr<SimResult> simulate(const sched::SchedulerConfig& config, const CostModel& cost,
                             std::span<const SimRequest> requests, bool keep_trace,
                             const std::optional<sched::AdmissionConfig>& admission = {});

}  // namespace hinge::plan
