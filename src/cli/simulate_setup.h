// What `hinge simulate` and `hinge simulate --sweep` share: the model's side of the cost model
// (weights, FLOPs, KV bytes per token at a dtype), from a kv-size preset or a model file, and the
// machine's (bandwidth, compute rates) from an accelerator preset or this machine's profile.
#pragma once

#include <cstdint>
#include <string>

#include "cli/commands.h"
#include "common/status.h"
#include "plan/kv_size.h"
#include "plan/simulator.h"

namespace hinge::cli {

struct SimModel {
  std::string label;
  double weight_bytes = 0, flops_per_token = 0, attention_flops_per_context = 0;
  int64_t vocab = 32000, max_len = 0;
  const plan::KvShape* preset = nullptr;  // else kv_elements_per_token
  double kv_elements_per_token = 0;       // all layers, K and V
  double kv_bytes_per_token(double element_bytes) const;
};

struct SimMachine {
  plan::CostModel rates;   // bandwidth, peaks, overhead, additive (no model terms)
  double memory_bytes = 0; // an accelerator's memory for the KV cache (0: cpu)
};

StatusOr<SimModel> load_sim_model(const SimulateArgs& a);
StatusOr<SimMachine> load_sim_machine(const SimulateArgs& a, const SimModel& model);
// The cost model of `model` on `machine` with KV elements of `kv_element_bytes`.
plan::CostModel sim_cost(const SimModel& model, const SimMachine& machine, double kv_element_bytes);

// `hinge simulate --sweep`: the prediction of `hinge bench --sweep`'s grid.
int simulate_sweep_command(const SimulateArgs& a);

}  // namespace hinge::cli
