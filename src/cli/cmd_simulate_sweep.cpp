// `hinge simulate --sweep`: `hinge bench --sweep`'s grid, predicted. Each cell is what bench
// runs: B requests of one shared L-token prompt (BOS and random ids; the prefix cache shares it)
// generating --gen-tokens each, on the same scheduler limits bench's engine gets (max_num_seqs =
// the largest batch, a KV cache of 2 x (the longest context + every sequence's tail)), and the
// cell's decode tok/s counts the steps bench counts: those that compute no prompt token and
// give every sequence a token. --compare reads bench's --json and sets the measurement beside
// each cell (ratio = simulated / measured) and on the chart as points.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/simulate_setup.h"
#include "plan/sweep_chart.h"

namespace hinge::cli {
namespace {

StatusOr<std::vector<plan::SweepPoint>> read_bench_sweep(const std::string& path) {
  std::ifstream f(path);
  if (!f) return Status::Errorf("--compare {}: cannot read it", path);
  std::stringstream text;
  text << f.rdbuf();
  const auto j = nlohmann::json::parse(text.str(), nullptr, false);
  auto bad = [&] {
    return Status::Errorf("--compare {}: not the output of hinge bench --sweep --json (an array "
                          "of kv_dtype, batch, context, decode_tokens_per_s)", path);
  };
  if (j.is_discarded() || !j.is_array()) return bad();
  std::vector<plan::SweepPoint> out;
  for (const auto& c : j) {
    if (!c.is_object() || !c.contains("kv_dtype") || !c["kv_dtype"].is_string() ||
        !c.contains("batch") || !c["batch"].is_number_integer() || !c.contains("context") ||
        !c["context"].is_number_integer() || !c.contains("decode_tokens_per_s") ||
        !c["decode_tokens_per_s"].is_number())
      return bad();
    plan::SweepPoint p;
    p.kv_dtype = c["kv_dtype"].get<std::string>();
    p.batch = c["batch"].get<int64_t>();
    p.context = c["context"].get<int64_t>();
    p.tokens_per_s = c["decode_tokens_per_s"].get<double>();
    if (c.contains("step_ms") && c["step_ms"].is_number()) p.step_ms = c["step_ms"].get<double>();
    out.push_back(p);
  }
  return out;
}

}  // namespace

int simulate_sweep_command(const SimulateArgs& a) {
  if (a.sweep_batches.empty() || a.sweep_contexts.empty() || a.sweep_dtypes.empty())
    return fail("--sweep: give at least one batch, context and dtype");
  for (int64_t b : a.sweep_batches)
    if (b < 1 || b > 1024) return fail("--sweep-batches: each in [1, 1024]");
  for (int64_t c : a.sweep_contexts)
    if (c < 2 || c > (1 << 20)) return fail("--sweep-contexts: each in [2, 1048576]");
  for (const std::string& d : a.sweep_dtypes)
    if (!plan::kv_element_bytes(d))
      return fail(fmt::format("--sweep-dtypes: unknown '{}'; expected f32, f16, fp8, int8 or int4", d));
  std::vector<plan::SweepPoint> measured;
  if (!a.compare.empty()) {
    auto m = read_bench_sweep(a.compare);
    if (!m.ok()) return fail(m.status().message());
    measured = std::move(*m);
  }
  auto model = load_sim_model(a);
  if (!model.ok()) return fail(model.status().message());
  auto machine = load_sim_machine(a, *model);
  if (!machine.ok()) return fail(machine.status().message());
  const int64_t gen = std::clamp<int64_t>(a.gen_tokens, 2, 256);  // as bench --sweep
  std::vector<int64_t> contexts = a.sweep_contexts;
  std::sort(contexts.begin(), contexts.end());
  const int64_t max_batch = *std::max_element(a.sweep_batches.begin(), a.sweep_batches.end());
  std::mt19937_64 rng(a.seed);
  std::uniform_int_distribution<int32_t> pick(3, static_cast<int32_t>(std::max<int64_t>(4, model->vocab) - 1));
  std::vector<plan::SweepPoint> cells;
  for (const std::string& dtype : a.sweep_dtypes) {
    const plan::CostModel cost = sim_cost(*model, *machine, *plan::kv_element_bytes(dtype));
    sched::SchedulerConfig sc;
    sc.max_num_batched_tokens = static_cast<int32_t>(a.max_batched_tokens);
    sc.max_num_seqs = static_cast<int32_t>(max_batch);
    sc.block_size_tokens = static_cast<int32_t>(a.block_size);
    sc.max_model_len = static_cast<int32_t>(std::max<int64_t>(model->max_len, contexts.back() + gen));
    const int64_t tokens = 2 * (contexts.back() + max_batch * (gen + 2 * a.block_size));
    sc.num_kv_blocks = static_cast<int32_t>((tokens + a.block_size - 1) / a.block_size);
    for (int64_t context : contexts) {
      std::vector<int32_t> prompt = {1};
      while (static_cast<int64_t>(prompt.size()) < context) prompt.push_back(pick(rng));
      for (int64_t batch : a.sweep_batches) {
        std::vector<plan::SimRequest> reqs(static_cast<size_t>(batch));
        for (plan::SimRequest& r : reqs) {
          r.prompt = prompt;
          r.output_tokens = static_cast<int32_t>(gen);
        }
        auto r = plan::simulate(sc, cost, reqs, true);
        if (!r.ok()) return fail(r.status().message());
        double decode_s = 0, weight = 0, kv = 0;
        int64_t decode_tokens = 0, steps = 0;
        for (const plan::SimStep& s : r->trace) {
          if (s.prefill_tokens > 0 || s.decode_tokens < batch) continue;
          decode_s += s.seconds;
          decode_tokens += s.decode_tokens;
          weight += s.weight_s * cost.bandwidth_bytes_per_s;
          kv += s.kv_s * cost.bandwidth_bytes_per_s;
          ++steps;
        }
        plan::SweepPoint c;
        c.kv_dtype = dtype;
        c.batch = batch;
        c.context = context;
        c.tokens_per_s = decode_s > 0 ? static_cast<double>(decode_tokens) / decode_s : 0;
        c.step_ms = steps > 0 ? decode_s * 1e3 / static_cast<double>(steps) : 0;
        c.weight_bytes = steps > 0 ? weight / static_cast<double>(steps) : 0;
        c.kv_bytes = steps > 0 ? kv / static_cast<double>(steps) : 0;
        cells.push_back(c);
      }
    }
  }
  auto find = [&](const plan::SweepPoint& c) -> const plan::SweepPoint* {
    for (const plan::SweepPoint& m : measured)
      if (m.kv_dtype == c.kv_dtype && m.batch == c.batch && m.context == c.context) return &m;
    return nullptr;
  };
  if (!a.svg.empty()) {
    const std::string name = model->label.substr(model->label.find_last_of('/') + 1);
    const std::string svg = plan::sweep_svg(
        cells, measured, fmt::format("decode tok/s by context: {} on {}", name, a.gpu),
        "simulated", measured.empty() ? "" : "measured (bench)");
    std::FILE* f = std::fopen(a.svg.c_str(), "w");
    if (f == nullptr || std::fwrite(svg.data(), 1, svg.size(), f) != svg.size() || std::fclose(f) != 0)
      return fail("--svg " + a.svg + ": cannot write it");
    std::fprintf(stderr, "hinge: wrote %s\n", a.svg.c_str());
  }
  if (a.json) {
    nlohmann::ordered_json j = nlohmann::ordered_json::array();
    for (const plan::SweepPoint& c : cells) {
      nlohmann::ordered_json o = {{"kv_dtype", c.kv_dtype}, {"batch", c.batch}, {"context", c.context},
                                  {"decode_tokens_per_s", c.tokens_per_s}, {"step_ms", c.step_ms},
                                  {"weight_bytes_per_step", c.weight_bytes}, {"kv_bytes_per_step", c.kv_bytes}};
      if (const plan::SweepPoint* m = find(c)) {
        o["measured_decode_tokens_per_s"] = m->tokens_per_s;
        o["ratio"] = m->tokens_per_s > 0 ? c.tokens_per_s / m->tokens_per_s : 0;
      }
      j.push_back(o);
    }
    std::puts(j.dump().c_str());
    return 0;
  }
  const bool cmp = !measured.empty();
  std::printf("| KV | batch | context | simulated tok/s | step (ms) | weights / step | KV / step |%s\n",
              cmp ? " measured tok/s | simulated / measured |" : "");
  std::printf("|---|---:|---:|---:|---:|---:|---:|%s\n", cmp ? "---:|---:|" : "");
  for (const plan::SweepPoint& c : cells) {
    std::string tail;
    if (cmp) {
      const plan::SweepPoint* m = find(c);
      tail = m != nullptr && m->tokens_per_s > 0
                 ? fmt::format(" {:.1f} | {:.2f} |", m->tokens_per_s, c.tokens_per_s / m->tokens_per_s)
                 : " - | - |";
    }
    std::printf("| %s | %lld | %lld | %.1f | %.2f | %.1f MB | %.1f MB |%s\n", c.kv_dtype.c_str(),
                static_cast<long long>(c.batch), static_cast<long long>(c.context), c.tokens_per_s,
                c.step_ms, c.weight_bytes / 1e6, c.kv_bytes / 1e6, tail.c_str());
  }
  return 0;
}

}  // namespace hinge::cli
