// `hinge plan`: how many requests a deployment holds (plan/capacity.h): weights, the KV budget
// after headroom, paged vs contiguous capacity at the length distribution, f16 / fp8 / int4
// KV, and a decode roofline at that concurrency, on an accelerator preset or this machine
// (`--gpu cpu`: its RAM, and bandwidth and peak measured by the machine profile).
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "common/thread_pool.h"
#include "model/loaded_model.h"
#include "plan/capacity.h"
#include "roofline/machine_profile.h"

namespace hinge::cli {
namespace {

using plan::Accelerator;

StatusOr<plan::KvShape> model_shape(const PlanArgs& a) {
  if (a.model.empty()) return Status::Error("--model: a preset (hinge kv-size --list) or a model file");
  if (const plan::KvShape* p = plan::find_kv_preset(a.model)) return *p;
  LoadOptions o;
  o.require_vocab = false;
  auto m = load_model(a.model, o);
  if (!m.ok())
    return Status::Errorf("--model {}: not a preset (hinge kv-size --list) and {}", a.model,
                          m.status().message());
  plan::KvShape s = plan::kv_shape_of((*m)->config, a.model);
  s.params_billion = static_cast<double>((*m)->num_parameters()) / 1e9;
  return s;
}

StatusOr<Accelerator> accelerator(const PlanArgs& a) {
  if (a.gpu == "cpu") {
    Accelerator c;
    c.name = "cpu";
    c.memory_bytes = static_cast<double>(::sysconf(_SC_PHYS_PAGES)) *
                     static_cast<double>(::sysconf(_SC_PAGE_SIZE));
    ThreadPool pool(hardware_threads());
    std::optional<roofline::MachineProfile> p = roofline::load_machine_profile(pool.size());
    if (!p || p->membw_bytes_per_s <= 0 || p->peaks.empty()) {
      std::fprintf(stderr, "hinge: measuring this machine's bandwidth and compute peaks once "
                           "(saved in %s)\n", roofline::machine_profile_path(pool.size()).c_str());
      HINGE_ASSIGN_OR_RETURN(p, roofline::measure_machine_profile(
                                    pool, p.value_or(roofline::MachineProfile{}), int64_t{1} << 30, true));
      (void)roofline::save_machine_profile(*p);
    }
    c.bandwidth_bytes_per_s = p->membw_bytes_per_s;
    if (const roofline::ComputePeak* peak = p->best_peak(false)) c.peak_flops = peak->ops_per_s;
    c.source = fmt::format("this machine: {} threads of {}, RAM from sysconf, bandwidth and peak "
                           "measured (hinge bench --membw --compute)", pool.size(), p->cpu);
    return c;
  }
  const Accelerator* g = plan::find_accelerator(a.gpu);
  if (g == nullptr)
    return Status::Errorf("--gpu: unknown '{}'; expected cpu or one of h100-80gb, h200-141gb, "
                          "a100-80gb, a100-40gb, l4-24gb, mi300x-192gb", a.gpu);
  return *g;
}

// A JSONL trace: one request per line with prompt_tokens and output_tokens.
StatusOr<std::vector<int64_t>> workload_lengths(const std::string& path) {
  std::ifstream f(path);
  if (!f) return Status::Errorf("--workload {}: cannot read it", path);
  std::vector<int64_t> out;
  std::string line;
  for (int64_t n = 1; std::getline(f, line); ++n) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.contains("prompt_tokens") ||
        !j["prompt_tokens"].is_number_integer() || !j.value("output_tokens", nlohmann::json(0)).is_number_integer())
      return Status::Errorf("--workload {} line {}: expected an object with integer prompt_tokens "
                            "and output_tokens", path, n);
    const int64_t t = j["prompt_tokens"].get<int64_t>() + j.value("output_tokens", int64_t{0});
    if (t < 1 || t > (int64_t{1} << 24))
      return Status::Errorf("--workload {} line {}: {} tokens is out of range", path, n, t);
    out.push_back(t);
  }
  if (out.empty()) return Status::Errorf("--workload {}: no requests", path);
  return out;
}

std::string gb(double b) { return fmt::format("{:.1f} GB", b / 1e9); }

}  // namespace

int plan_command(const PlanArgs& a) {
  auto shape = model_shape(a);
  if (!shape.ok()) return fail(shape.status().message());
  if (shape->params_billion <= 0) return fail("--model: the parameter count is unknown");
  auto acc = accelerator(a);
  if (!acc.ok()) return fail(acc.status().message());
  if (a.gpus < 1 || a.gpus > 4096) return fail("--gpus must be in [1, 4096]");
  if (!(a.headroom >= 0 && a.headroom < 1)) return fail("--headroom must be in [0, 1)");
  const auto wbytes = plan::kv_element_bytes(a.weights);
  if (!wbytes) return fail(fmt::format("--weights: unknown '{}'; expected f32, f16, bf16, fp8, "
                                       "int8 or int4", a.weights));
  std::vector<int64_t> lengths;
  if (!a.workload.empty()) {
    auto w = workload_lengths(a.workload);
    if (!w.ok()) return fail(w.status().message());
    lengths = std::move(*w);
  }
  std::vector<int64_t> contexts = a.contexts;
  if (contexts.empty()) contexts.push_back(lengths.empty() ? 8192 : 0);
  for (int64_t c : contexts)
    if (c < 0 || c > (int64_t{1} << 24)) return fail("--context must be in [1, 16777216]");

  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  if (!a.json)
    std::printf("%s on %lld x %s (%s)\n%s: %.1fB parameters, %s weights; headroom %.0f%%\n",
                shape->name.c_str(), static_cast<long long>(a.gpus), acc->name.c_str(), acc->source.c_str(),
                shape->name.c_str(), shape->params_billion, a.weights.c_str(), a.headroom * 100);
  for (int64_t context : contexts) {
    plan::PlanInput in;
    in.model = *shape;
    in.weight_bytes_per_param = *wbytes;
    in.gpus = static_cast<int32_t>(a.gpus);
    in.headroom = a.headroom;
    in.context = context;
    in.lengths = context > 0 ? std::vector<int64_t>{} : lengths;
    in.max_model_len = a.max_model_len;
    const plan::Plan p = plan::make_plan(in, *acc);
    if (a.json) {
      nlohmann::ordered_json j;
      j["model"] = shape->name;
      j["gpu"] = acc->name;
      j["gpus"] = a.gpus;
      j["context"] = context > 0 ? context : static_cast<int64_t>(p.mean_tokens);
      j["mean_tokens"] = p.mean_tokens;
      j["max_model_len"] = p.max_model_len;
      j["memory_bytes"] = p.memory_bytes;
      j["usable_bytes"] = p.usable_bytes;
      j["weight_bytes"] = p.weight_bytes;
      j["kv_budget_bytes"] = p.kv_budget_bytes;
      j["rows"] = nlohmann::ordered_json::array();
      for (const plan::PlanRow& r : p.rows)
        j["rows"].push_back({{"kv_dtype", r.dtype}, {"kv_per_request_bytes", r.kv_per_request_bytes},
                             {"kv_per_slot_bytes", r.kv_per_slot_bytes},
                             {"paged_requests", r.paged_requests},
                             {"contiguous_requests", r.contiguous_requests},
                             {"step_seconds", r.step_seconds},
                             {"decode_tokens_per_s", r.decode_tokens_per_s}});
      out.push_back(j);
      continue;
    }
    std::printf("\n%s: memory %s, usable %s, weights %s, KV budget %s\n",
                context > 0 ? fmt::format("context {}", context).c_str()
                            : fmt::format("workload {} ({} requests, mean {:.0f} tokens)", a.workload,
                                          lengths.size(), p.mean_tokens).c_str(),
                gb(p.memory_bytes).c_str(), gb(p.usable_bytes).c_str(), gb(p.weight_bytes).c_str(),
                gb(p.kv_budget_bytes).c_str());
    if (p.kv_budget_bytes <= 0) {
      std::printf("  the weights do not fit: %s of weights in %s usable; add GPUs (--gpus) or "
                  "quantize the weights (--weights fp8 / int4)\n",
                  gb(p.weight_bytes).c_str(), gb(p.usable_bytes).c_str());
      continue;
    }
    std::printf("  %-6s %16s %10s %28s %24s\n", "KV", "KV per request", "paged",
                fmt::format("contiguous ({} reserved)", p.max_model_len).c_str(),
                "decode roofline");
    for (const plan::PlanRow& r : p.rows)
      std::printf("  %-6s %16s %10lld %28lld %24s\n", r.dtype.c_str(),
                  gb(r.kv_per_request_bytes).c_str(), static_cast<long long>(r.paged_requests),
                  static_cast<long long>(r.contiguous_requests),
                  r.decode_tokens_per_s > 0
                      ? fmt::format("{:.0f} tok/s, {:.1f} ms/step", r.decode_tokens_per_s,
                                    r.step_seconds * 1e3).c_str()
                      : "-");
  }
  if (a.json) std::puts(out.dump().c_str());
  return 0;
}

}  // namespace hinge::cli
