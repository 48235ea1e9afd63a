#include "cli/simulate_setup.h"

#include <fmt/format.h>

#include <cstdio>

#include "common/thread_pool.h"
#include "model/loaded_model.h"
#include "plan/capacity.h"
#include "roofline/machine_profile.h"
#include "roofline/model_work.h"

namespace hinge::cli {

double SimModel::kv_bytes_per_token(double element_bytes) const {
  if (preset != nullptr)
    return plan::kv_bytes_per_token_layer(*preset, element_bytes) * preset->layers;
  return kv_elements_per_token * element_bytes;
}

StatusOr<SimModel> load_sim_model(const SimulateArgs& a) {
  if (a.model.empty())
    return Status::Error("--model: a preset (hinge kv-size --list) or a model file");
  SimModel m;
  m.label = a.model;
  if (const plan::KvShape* p = plan::find_kv_preset(a.model)) {
    m.preset = p;
    m.weight_bytes = p->params_billion * 1e9 * 2;
    m.flops_per_token = 2 * p->params_billion * 1e9;
    m.attention_flops_per_context =
        4.0 * p->layers * p->heads * (p->mla_rank > 0 ? 192 : p->head_dim);
    m.max_len = p->max_context;
    return m;
  }
  LoadOptions o;
  o.require_vocab = false;
  auto loaded = load_model(a.model, o);
  if (!loaded.ok())
    return Status::Errorf("--model {}: not a preset and {}", a.model, loaded.status().message());
  const ModelConfig& c = (*loaded)->config;
  m.weight_bytes = static_cast<double>((*loaded)->weights.bytes_per_token());
  m.flops_per_token = roofline::prefill_flops_per_token(c, (*loaded)->weights, 1);
  // QK and PV: 2 x 2 FLOPs per head dimension of every query head, per layer and context token.
  m.attention_flops_per_context = 4.0 * static_cast<double>(c.n_layers * c.n_heads * c.head_dim);
  m.kv_elements_per_token = 2.0 * static_cast<double>(c.n_layers * c.n_kv_heads * c.head_dim);
  m.vocab = c.n_vocab;
  m.max_len = c.context_length;
  return m;
}

StatusOr<SimMachine> load_sim_machine(const SimulateArgs& a, const SimModel& model) {
  SimMachine m;
  plan::CostModel& c = m.rates;
  c.step_overhead_s = a.step_overhead_ms / 1e3;
  if (a.gpu == "cpu") {
    ThreadPool pool(a.threads > 0 ? static_cast<int32_t>(a.threads) : hardware_threads());
    auto p = roofline::load_machine_profile(pool.size());
    const bool given = a.bandwidth_gbps > 0 && a.peak_gflops > 0;
    if (!given && (!p || p->membw_bytes_per_s <= 0 || p->peaks.empty())) {
      std::fprintf(stderr, "hinge: measuring this machine's bandwidth and compute peaks once\n");
      auto measured = roofline::measure_machine_profile(
          pool, p.value_or(roofline::MachineProfile{}), int64_t{1} << 30, true);
      if (!measured.ok()) return measured.status();
      p = *measured;
      (void)roofline::save_machine_profile(*p);
    }
    const roofline::ComputePeak* peak = nullptr;
    if (p) {
      peak = p->best_peak(true);
      if (peak == nullptr) peak = p->best_peak(false);
    }
    if (peak == nullptr && a.peak_gflops <= 0)
      return Status::Error("the machine profile has no compute peak");
    c.bandwidth_bytes_per_s =
        (a.bandwidth_gbps > 0 ? a.bandwidth_gbps * 1e9 : p->membw_bytes_per_s) * a.bandwidth_share;
    c.peak_flops = (a.peak_gflops > 0 ? a.peak_gflops * 1e9 : peak->ops_per_s) * a.compute_share;
    c.decode_peak_flops = a.decode_peak_gflops > 0 ? a.decode_peak_gflops * 1e9 : 0;
    c.attention_flops_rate = a.attention_gflops > 0 ? a.attention_gflops * 1e9 : 0;
    c.additive = true;  // one pool of threads computes and streams in turn
    return m;
  }
  const plan::Accelerator* g = plan::find_accelerator(a.gpu);
  if (g == nullptr)
    return Status::Errorf(
        "--gpu: unknown '{}' (h100-80gb, h200-141gb, a100-80gb, a100-40gb, "
        "l4-24gb, mi300x-192gb or cpu)",
        a.gpu);
  c.bandwidth_bytes_per_s =
      g->bandwidth_bytes_per_s * static_cast<double>(a.gpus) * a.bandwidth_share;
  c.peak_flops = g->peak_flops * static_cast<double>(a.gpus) * a.compute_share;
  m.memory_bytes = g->memory_bytes * static_cast<double>(a.gpus) * 0.9 - model.weight_bytes;
  return m;
}

plan::CostModel sim_cost(const SimModel& model, const SimMachine& machine,
                         double kv_element_bytes) {
  plan::CostModel c = machine.rates;
  c.weight_bytes = model.weight_bytes;
  c.prefill_flops_per_token = model.flops_per_token;
  c.attention_flops_per_context = model.attention_flops_per_context;
  c.kv_bytes_per_token = model.kv_bytes_per_token(kv_element_bytes);
  return c;
}

}  // namespace hinge::cli
