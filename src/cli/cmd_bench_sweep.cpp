// `hinge bench --sweep`: the decode roofline, measured. For each KV dtype, context L and batch B,
// B sequences decode at context L and the command reports decode tok/s, the step time and the
// bytes a step streams, split into the weights (once per step) and the KV (every sequence's
// context), with the context where the KV stream overtakes the weights for each batch.
//
// The B sequences share one prefilled L-token prompt through the prefix cache, so a cell costs
// one prefill of L tokens, not B: the KV bytes are the logical bytes attention reads per step
// (B x L x KV per token); a small shared context may be served from the CPU caches, so the
// short contexts' KV reads are a lower bound on real distinct prompts' time.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "kv/kv_cache_manager.h"
#include "kv/kv_spec.h"
#include "model/loaded_model.h"
#include "model/kv_cache.h"
#include "plan/sweep_chart.h"
#include "tokenizer/tokenizer.h"

namespace hinge::cli {
namespace {

using Cell = plan::SweepPoint;

}  // namespace

int bench_sweep_command(const BenchArgs& a) {
  if (a.model.empty()) return fail("--sweep needs -m MODEL");
  if (a.sweep_batches.empty() || a.sweep_contexts.empty() || a.sweep_dtypes.empty())
    return fail("--sweep: give at least one batch, context and dtype");
  for (int64_t b : a.sweep_batches)
    if (b < 1 || b > 1024) return fail("--sweep-batches: each in [1, 1024]");
  auto m = load_model_with_progress(a.model, a.tokenizer);
  if (!m.ok()) return fail(m.status().message());
  const std::unique_ptr<LoadedModel> model = std::move(m).value();
  const int64_t gen = std::clamp<int64_t>(a.gen_tokens, 2, 256);
  std::vector<int64_t> contexts = a.sweep_contexts;
  std::sort(contexts.begin(), contexts.end());
  for (int64_t c : contexts)
    if (c < 2 || c + gen > model->config.context_length)
      return fail(fmt::format("--sweep-contexts: {} + {} generated exceeds the model's context {} "
                              "(hinge synth --context N writes a longer one)", c, gen,
                              model->config.context_length));
  const int64_t max_batch = *std::max_element(a.sweep_batches.begin(), a.sweep_batches.end());
  std::mt19937_64 rng(a.seed);
  std::uniform_int_distribution<int32_t> pick(3, static_cast<int32_t>(model->config.n_vocab - 1));
  const double weight_bytes = static_cast<double>(model->weights.bytes_per_token());
  std::vector<Cell> cells;
  using Clock = std::chrono::steady_clock;
  for (const std::string& dtype : a.sweep_dtypes) {
    EngineOptionsArgs eo = a.engine;
    eo.kv_dtype = dtype;
    eo.max_num_seqs = max_batch;
    auto ec = make_engine_config(eo);
    if (!ec.ok()) return fail(ec.status().message());
    ec->max_model_len = static_cast<int32_t>(model->config.context_length);
    ec->enable_prefix_cache = true;
    auto spec = kv_spec_for(model->config, ec->k_dtype, ec->v_dtype, ec->block_size, ec->kv_groups);
    if (!spec.ok()) return fail(spec.status().message());
    // The longest context once (shared) plus every sequence's own tail, with room to spare.
    ec->kv_memory_bytes = spec->bytes_for_tokens(2 * (contexts.back() + max_batch * (gen + 2 * ec->block_size)));
    auto engine = Engine::create(*model, nullptr, *ec);
    if (!engine.ok()) return fail(engine.status().message());
    const double kv_per_token = static_cast<double>(spec->bytes_per_token());
    for (int64_t context : contexts) {
      std::vector<int32_t> prompt = {1};
      while (static_cast<int64_t>(prompt.size()) < context) prompt.push_back(pick(rng));
      for (int64_t batch : a.sweep_batches) {
        std::vector<RequestDelta> deltas;
        for (int64_t i = 0; i < batch; ++i) {
          GenerateRequest r;
          r.prompt_token_ids = prompt;
          r.max_new_tokens = static_cast<int32_t>(gen);
          r.sampling.temperature = 0;
          r.sampling.ignore_eos = true;
          if (auto id = (*engine)->add_request(std::move(r)); !id.ok()) return fail(id.status().message());
        }
        double decode_s = 0;
        int64_t decode_tokens = 0, decode_steps = 0;
        while ((*engine)->has_unfinished()) {
          const int64_t computed = (*engine)->stats().prompt_tokens_computed;
          const auto t0 = Clock::now();
          if (Status st = (*engine)->step(&deltas); !st.ok()) return fail(st.message());
          const double dt = std::chrono::duration<double>(Clock::now() - t0).count();
          if ((*engine)->stats().prompt_tokens_computed != computed) continue;  // prefill work
          int64_t tokens = 0;
          for (const RequestDelta& d : deltas) tokens += static_cast<int64_t>(d.token_ids.size());
          if (tokens < batch) continue;  // a step some sequences sat out
          decode_s += dt;
          decode_tokens += tokens;
          ++decode_steps;
        }
        Cell c;
        c.kv_dtype = dtype;
        c.batch = batch;
        c.context = context;
        c.tokens_per_s = decode_s > 0 ? static_cast<double>(decode_tokens) / decode_s : 0;
        c.step_ms = decode_steps > 0 ? decode_s * 1e3 / static_cast<double>(decode_steps) : 0;
        c.weight_bytes = weight_bytes;
        c.kv_bytes = static_cast<double>(batch) * (static_cast<double>(context) + gen / 2.0) * kv_per_token;
        cells.push_back(c);
        if (!a.json)
          std::fprintf(stderr, "hinge: %s KV, context %lld, batch %lld: %.1f tok/s\n", dtype.c_str(),
                       static_cast<long long>(context), static_cast<long long>(batch), c.tokens_per_s);
      }
    }
  }
  if (!a.svg.empty()) {
    const std::string svg = plan::sweep_svg(cells, {}, "hinge bench --sweep: decode tok/s by context",
                                             "", "");
    std::FILE* f = std::fopen(a.svg.c_str(), "w");
    if (f == nullptr || std::fwrite(svg.data(), 1, svg.size(), f) != svg.size() || std::fclose(f) != 0)
      return fail("--svg " + a.svg + ": cannot write it");
  }
  if (a.json) {
    nlohmann::ordered_json j = nlohmann::ordered_json::array();
    for (const Cell& c : cells)
      j.push_back({{"kv_dtype", c.kv_dtype}, {"batch", c.batch}, {"context", c.context},
                   {"decode_tokens_per_s", c.tokens_per_s}, {"step_ms", c.step_ms},
                   {"weight_bytes_per_step", c.weight_bytes}, {"kv_bytes_per_step", c.kv_bytes}});
    std::puts(j.dump().c_str());
    return 0;
  }
  std::printf("| KV | batch | context | decode tok/s | step (ms) | weights / step | KV / step | KV share |\n");
  std::printf("|---|---:|---:|---:|---:|---:|---:|---:|\n");
  for (const Cell& c : cells)
    std::printf("| %s | %lld | %lld | %.1f | %.2f | %.1f MB | %.1f MB | %.0f %% |\n", c.kv_dtype.c_str(),
                static_cast<long long>(c.batch), static_cast<long long>(c.context), c.tokens_per_s,
                c.step_ms, c.weight_bytes / 1e6, c.kv_bytes / 1e6,
                100 * c.kv_bytes / (c.kv_bytes + c.weight_bytes));
  std::printf("\nthe KV stream overtakes the weights' at context:");
  for (const std::string& dtype : a.sweep_dtypes)
    for (int64_t b : a.sweep_batches) {
      const Cell* any = nullptr;
      for (const Cell& c : cells)
        if (c.kv_dtype == dtype && c.batch == b) any = &c;
      if (any == nullptr) continue;
      const double per_token = any->kv_bytes / (static_cast<double>(b) * (static_cast<double>(any->context) + gen / 2.0));
      std::printf(" %s batch %lld: %.0f;", dtype.c_str(), static_cast<long long>(b),
                  weight_bytes / (static_cast<double>(b) * per_token));
    }
  std::printf("\n");
  return 0;
}

}  // namespace hinge::cli
