// Capacity planning (`hinge plan`): how many requests a deployment holds at once, from the
// accelerator's memory, the weights and the KV per request (plan/kv_size.h):
//
//   usable     = gpus x memory x (1 - headroom)       headroom: activations, runtime, fragments
//   KV budget  = usable - weights                     weights = parameters x bytes per weight
//   paged      = floor(KV budget / KV of the mean request)        (blocks follow the tokens)
//   contiguous = floor(KV budget / KV of a max_model_len request) (a slot reserved per request)
//
// and a roofline of decode at that concurrency: each step streams the weights once and every
// request's KV (the mean request's tokens), over gpus x bandwidth:
//
//   step seconds = (weights + concurrency x KV of the mean request) / (gpus x bandwidth)
//   decode tok/s = concurrency / step seconds
//
// Pure functions over plain values; thread-safe.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "plan/kv_size.h"

namespace hinge::plan {

struct Accelerator {
  std::string name;
  double memory_bytes = 0;
  double bandwidth_bytes_per_s = 0;
  double peak_flops = 0;  // dense bf16 / fp16 (tensor cores) FLOP/s
  std::string source;
};

// h100-80gb, h200-141gb, a100-80gb, a100-40gb, l4-24gb, mi300x-192gb (the vendors' data
// sheets; `cpu`, this machine, is measured by the command).
std::span<const Accelerator> accelerator_presets();
const Accelerator* find_accelerator(std::string_view name);

struct PlanInput {
  KvShape model;
  double weight_bytes_per_param = 2;  // f16 / bf16 weights
  int32_t gpus = 1;
  double headroom = 0.10;             // of the memory kept for activations and the runtime
  int64_t context = 8192;             // tokens of a request (prompt + output), when no workload
  std::vector<int64_t> lengths;       // a workload's request lengths (empty: all `context`)
  int64_t max_model_len = 0;          // what a contiguous cache reserves (0: the model's, or context)
};

struct PlanRow {
  std::string dtype;                 // KV dtype
  double kv_per_request_bytes = 0;   // the mean request's
  double kv_per_slot_bytes = 0;      // a contiguous slot's (max_model_len)
  int64_t paged_requests = 0;
  int64_t contiguous_requests = 0;
  double step_seconds = 0;           // decode step at paged_requests (roofline)
  double decode_tokens_per_s = 0;
};

struct Plan {
  double memory_bytes = 0;       // gpus x memory
  double usable_bytes = 0;
  double weight_bytes = 0;
  double kv_budget_bytes = 0;    // may be negative: the weights do not fit
  double mean_tokens = 0;        // of a request
  int64_t max_model_len = 0;
  std::vector<PlanRow> rows;     // f16, fp8, int4
};

Plan make_plan(const PlanInput& in, const Accelerator& acc);

}  // namespace hinge::plan
