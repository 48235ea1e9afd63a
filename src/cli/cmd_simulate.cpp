// `hinge simulate`: a workload through the real scheduler and KV cache manager with a roofline
// cost per step (plan/simulator.h), on an accelerator preset or this machine. The workload is a
// JSONL trace or `hinge bench`'s generator (the same seeded prompts, so a simulated run and a
// benchmarked one schedule the same steps).
#include <cmath>
#include <cstdio>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/bench_workload.h"
#include "cli/commands.h"
#include "common/units.h"
#include "plan/sim_chart.h"
#include "plan/simulator.h"
#include "plan/workloads.h"
#include "cli/simulate_setup.h"

namespace hinge::cli {
namespace {

// A JSONL trace line: {"arrival_s": 0.5, "prompt_tokens": 300, "output_tokens": 64,
// "prefix_id": 2, "prefix_tokens": 200, "priority": "batch"}: requests with the same prefix_id
// start with the same prefix_tokens ids (a shared system prompt, a reused document). "after": K
// (the index of an earlier line's request, from 0) sends it arrival_s after request K ends.
StatusOr<std::vector<plan::SimRequest>> read_trace(const std::string& path, uint64_t seed) {
  std::ifstream f(path);
  if (!f) return Status::Errorf("--trace {}: cannot read it", path);
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int32_t> pick(3, 30000);
  std::vector<std::vector<int32_t>> prefixes;
  std::vector<plan::SimRequest> out;
  std::string line;
  for (int64_t n = 1; std::getline(f, line); ++n) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const auto j = nlohmann::json::parse(line, nullptr, false);
    auto bad = [&](const char* what) {
      return Status::Errorf("--trace {} line {}: {}", path, n, what);
    };
    if (j.is_discarded() || !j.is_object()) return bad("not a JSON object");
    auto integer = [&](const char* k, int64_t dflt, int64_t lo, int64_t hi) -> std::optional<int64_t> {
      if (!j.contains(k)) return dflt;
      if (!j[k].is_number_integer()) return std::nullopt;
      const int64_t v = j[k].get<int64_t>();
      return v >= lo && v <= hi ? std::optional<int64_t>(v) : std::nullopt;
    };
    const auto prompt = integer("prompt_tokens", -1, 1, 1 << 20);
    const auto output = integer("output_tokens", 1, 1, 1 << 20);
    const auto prefix_id = integer("prefix_id", -1, 0, 1 << 16);
    const auto prefix_tokens = integer("prefix_tokens", 0, 0, 1 << 20);
    if (!prompt || *prompt < 1) return bad("prompt_tokens: an integer in [1, 1048576] is needed");
    if (!output) return bad("output_tokens: an integer in [1, 1048576]");
    if (!prefix_id || !prefix_tokens) return bad("prefix_id / prefix_tokens: integers");
    const auto after = integer("after", -1, 0, static_cast<int64_t>(out.size()) - 1);
    if (!after) return bad("after: the index (from 0) of an earlier request in the trace");
    if (j.contains("arrival_s") && !j["arrival_s"].is_number()) return bad("arrival_s: a number of seconds");
    if (j.contains("priority") && !j["priority"].is_string())
      return bad("priority: \"interactive\" or \"batch\"");
    const double arrival = j.value("arrival_s", 0.0);
    if (!(arrival >= 0) || !std::isfinite(arrival)) return bad("arrival_s: seconds >= 0");
    plan::SimRequest r;
    r.arrival_s = arrival;
    r.after = *after;
    r.output_tokens = static_cast<int32_t>(*output);
    r.priority = j.value("priority", std::string("interactive")) == "batch"
                     ? sched::Priority::kBatch : sched::Priority::kInteractive;
    r.prompt.push_back(1);  // BOS
    if (*prefix_id >= 0 && *prefix_tokens > 0) {
      if (static_cast<size_t>(*prefix_id) >= prefixes.size()) prefixes.resize(static_cast<size_t>(*prefix_id) + 1);
      std::vector<int32_t>& p = prefixes[static_cast<size_t>(*prefix_id)];
      while (static_cast<int64_t>(p.size()) < *prefix_tokens) p.push_back(pick(rng));
      r.prompt.insert(r.prompt.end(), p.begin(), p.begin() + *prefix_tokens);
    }
    while (static_cast<int64_t>(r.prompt.size()) < *prompt) r.prompt.push_back(pick(rng));
    out.push_back(std::move(r));
  }
  if (out.empty()) return Status::Errorf("--trace {}: no requests", path);
  return out;
}

// `hinge bench`'s requests (cli/bench_workload.h, BOS id 1), arriving at --rate per second.
std::vector<plan::SimRequest> generate(const SimulateArgs& a, int64_t vocab) {
  std::vector<plan::SimRequest> out;
  int64_t i = 0;
  for (BenchPrompt& p : bench_prompts(a.seed, vocab, 1, a.shared_prefix, a.prompt_tokens,
                                      a.gen_tokens, a.mixed_lengths, a.requests)) {
    plan::SimRequest r;
    r.prompt = std::move(p.tokens);
    r.output_tokens = static_cast<int32_t>(p.gen_tokens);
    r.arrival_s = a.rate > 0 ? static_cast<double>(i) / a.rate : 0;
    out.push_back(std::move(r));
    ++i;
  }
  return out;
}

StatusOr<std::vector<plan::SimRequest>> workload(const SimulateArgs& a, int64_t vocab) {
  if (!a.trace.empty()) return read_trace(a.trace, a.seed);
  if (a.workload == "bench") {
    if (a.requests < 1 || a.requests > 1000000) return Status::Error("--requests must be in [1, 1000000]");
    return generate(a, vocab);
  }
  plan::WorkloadSpec w = a.workload_spec;
  w.name = a.workload;
  w.vocab = vocab;
  w.seed = a.seed;
  w.system_tokens = a.shared_prefix;
  w.message_tokens = a.prompt_tokens;
  w.output_tokens = a.gen_tokens;
  w.mixed_lengths = a.mixed_lengths;
  w.rate = a.rate;
  w.requests = a.requests;
  return plan::generate_workload(w);
}

}  // namespace

int simulate_command(const SimulateArgs& a) {
  if (a.sweep) return simulate_sweep_command(a);
  const auto kv_e = plan::kv_element_bytes(a.kv_dtype);
  if (!kv_e) return fail(fmt::format("--kv-dtype: unknown '{}'; expected f32, f16, fp8, int8 or int4", a.kv_dtype));
  auto model = load_sim_model(a);
  if (!model.ok()) return fail(model.status().message());
  auto machine = load_sim_machine(a, *model);
  if (!machine.ok()) return fail(machine.status().message());
  const plan::CostModel cost = sim_cost(*model, *machine, *kv_e);
  const double memory = machine->memory_bytes;
  const int64_t max_len = model->max_len;
  const std::string& model_label = model->label;
  auto w = workload(a, model->vocab);
  if (!w.ok()) return fail(w.status().message());
  const std::vector<plan::SimRequest> reqs = std::move(*w);
  // The KV cache: --kv-memory, else what the accelerator leaves, else room for every request.
  int64_t longest = 0;
  for (const plan::SimRequest& r : reqs)
    longest = std::max<int64_t>(longest, static_cast<int64_t>(r.prompt.size()) + r.output_tokens);
  double kv_bytes = 0;
  if (auto b = parse_bytes(a.kv_memory); b && *b > 0) kv_bytes = static_cast<double>(*b);
  else if (memory > 0) kv_bytes = memory;
  else kv_bytes = 4.0 * static_cast<double>(a.max_num_seqs) * static_cast<double>(longest) * cost.kv_bytes_per_token;
  sched::SchedulerConfig sc;
  sc.max_num_batched_tokens = static_cast<int32_t>(a.max_batched_tokens);
  sc.max_num_seqs = static_cast<int32_t>(a.max_num_seqs);
  sc.block_size_tokens = static_cast<int32_t>(a.block_size);
  sc.num_kv_blocks = static_cast<int32_t>(std::min<double>(
      kv_bytes / (cost.kv_bytes_per_token * static_cast<double>(a.block_size)), 1 << 24));
  sc.max_model_len = static_cast<int32_t>(std::max<int64_t>(max_len, longest));
  std::optional<sched::AdmissionConfig> admission;
  if (a.admission) {
    sched::AdmissionConfig ac;  // hinge serve's defaults
    ac.num_blocks = sc.num_kv_blocks;
    ac.block_size_tokens = sc.block_size_tokens;
    ac.max_queue = static_cast<int32_t>(a.max_queue);
    ac.queue_timeout_s = a.queue_timeout;
    ac.max_request_share = a.max_request_share;
    admission = ac;
  }
  auto r = plan::simulate(sc, cost, reqs, a.json_steps || !a.svg.empty(), admission);
  if (!r.ok()) return fail(r.status().message());
  if (!a.svg.empty()) {
    const std::string svg = plan::simulation_svg(
        *r, sc.num_kv_blocks,
        fmt::format("hinge simulate: {} on {}, {} requests",
                    model_label.substr(model_label.find_last_of('/') + 1), a.gpu, reqs.size()));
    std::FILE* f = std::fopen(a.svg.c_str(), "w");
    if (f == nullptr || std::fwrite(svg.data(), 1, svg.size(), f) != svg.size() ||
        std::fclose(f) != 0)
      return fail("--svg " + a.svg + ": cannot write it");
    std::fprintf(stderr, "hinge: wrote %s\n", a.svg.c_str());
  }
  if (a.json) {
    nlohmann::ordered_json j;
    j["model"] = model_label;
    j["gpu"] = a.gpu;
    j["workload"] = a.trace.empty() ? a.workload : "trace";
    j["requests"] = reqs.size();
    j["kv_blocks"] = sc.num_kv_blocks;
    j["seconds"] = r->seconds;
    j["output_tokens"] = r->output_tokens;
    j["output_tokens_per_s"] = r->output_tokens_per_s;
    j["ttft_ms_p50"] = r->ttft_p50_s * 1e3;
    j["ttft_ms_p99"] = r->ttft_p99_s * 1e3;
    j["itl_ms_p50"] = r->itl_p50_s * 1e3;
    j["itl_ms_p99"] = r->itl_p99_s * 1e3;
    j["prefix_hit_rate"] = r->prefix_hit_rate;
    j["preemptions"] = r->preemptions;
    j["steps"] = r->steps;
    j["kv_blocks_peak"] = r->kv_blocks_peak;
    j["computed_prompt_tokens"] = r->computed_prompt_tokens;
    j["rejected"] = r->rejected;
    j["queue_wait_max_s"] = r->queue_wait_max_s;
    j["abandoned"] = r->abandoned;
    j["cost"] = {{"weight_bytes", cost.weight_bytes}, {"kv_bytes_per_token", cost.kv_bytes_per_token},
                 {"flops_per_token", cost.prefill_flops_per_token},
                 {"attention_flops_per_context_token", cost.attention_flops_per_context},
                 {"bandwidth_gb_per_s", cost.bandwidth_bytes_per_s / 1e9},
                 {"peak_gflop_per_s", cost.peak_flops / 1e9},
                 {"decode_peak_gflop_per_s", cost.decode_peak_flops / 1e9},
                 {"attention_gflop_per_s", cost.attention_flops_rate / 1e9},
                 {"additive", cost.additive},
                 {"step_overhead_ms", cost.step_overhead_s * 1e3}};
    if (a.json_steps) {
      j["trace"] = nlohmann::ordered_json::array();
      for (const plan::SimStep& s : r->trace)
        j["trace"].push_back({{"start_s", s.start_s}, {"seconds", s.seconds},
                              {"prefill_tokens", s.prefill_tokens}, {"decode_tokens", s.decode_tokens},
                              {"running", s.running}, {"waiting", s.waiting},
                              {"kv_blocks_used", s.kv_blocks_used}, {"compute_s", s.compute_s},
                              {"weight_s", s.weight_s}, {"kv_s", s.kv_s}});
    }
    std::puts(j.dump().c_str());
    return 0;
  }
  std::printf("%s on %s: %zu requests, KV %s in %d blocks of %lld tokens, %lld tokens/step, %lld "
              "seqs\n", model_label.c_str(), a.gpu.c_str(), reqs.size(),
              format_bytes(static_cast<uint64_t>(kv_bytes)).c_str(), sc.num_kv_blocks,
              static_cast<long long>(a.block_size), static_cast<long long>(a.max_batched_tokens),
              static_cast<long long>(a.max_num_seqs));
  std::printf("simulated time     %.3f s (%lld steps)\n", r->seconds, static_cast<long long>(r->steps));
  std::printf("output throughput  %.1f tok/s (%lld tokens)\n", r->output_tokens_per_s,
              static_cast<long long>(r->output_tokens));
  std::printf("TTFT p50 / p99     %.2f / %.2f ms\n", r->ttft_p50_s * 1e3, r->ttft_p99_s * 1e3);
  std::printf("inter-token p50 / p99  %.2f / %.2f ms\n", r->itl_p50_s * 1e3, r->itl_p99_s * 1e3);
  std::printf("prefix hit rate    %.1f %%\n", r->prefix_hit_rate * 100);
  std::printf("preemptions        %lld\n", static_cast<long long>(r->preemptions));
  if (a.admission) {
    std::string rej;
    for (const auto& [why, n] : r->rejected) rej += fmt::format("{}{} {}", rej.empty() ? "" : ", ", n, why);
    std::printf("admission          longest wait %.2f s; refused: %s\n", r->queue_wait_max_s,
                rej.empty() ? "none" : rej.c_str());
  }
  if (r->abandoned > 0)
    std::printf("abandoned          %lld follow-ups of refused requests\n",
                static_cast<long long>(r->abandoned));
  std::printf("KV peak            %d of %d blocks\n", r->kv_blocks_peak, sc.num_kv_blocks);
  return 0;
}

}  // namespace hinge::cli
