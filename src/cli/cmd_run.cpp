// `hinge run`: load a model, generate, stream text to stdout, statistics to stderr.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <optional>
#include <random>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "common/percentile.h"
#include "cli/memory_report.h"
#include "cli/progress_bar.h"
#include "common/thread_pool.h"
#include "common/units.h"
#include "hinge/engine.h"
#include "kernels/cpu_features.h"
#include "model/kv_cache.h"
#include "model/loaded_model.h"
#include "model/step_profile.h"
#include "pressure/reply_shedder.h"
#include "roofline/machine_profile.h"
#include "roofline/model_work.h"

namespace hinge::cli {

int fail(const std::string& message) {
  std::fprintf(stderr, "hinge: %s\n", message.c_str());
  return 1;
}

int run_command(RunArgs args) {
  if (!args.seed) args.seed = std::random_device{}();
  args.sampling.seed = *args.seed;
  if (Status st = args.sampling.validate(); !st.ok()) return fail(st.message());
  if (Status st = check_pressure_args(args.pressure); !st.ok()) return fail(st.message());
  args.engine.memory_root = args.pressure.root;  // the cgroup limit, as the pressure watch sees it

  auto m = load_model_with_progress(args.model, args.tokenizer);
  if (!m.ok()) return fail(m.status().message());
  const std::unique_ptr<LoadedModel> loaded = std::move(m).value();
  auto tok = Tokenizer::create(loaded->vocab);
  if (!tok.ok()) return fail(tok.status().with_context(args.model).message());
  const Tokenizer& tokenizer = **tok;

  std::vector<int32_t> prompt;
  if (args.random_prompt > 0) {
    std::mt19937_64 rng(*args.seed);
    if (tokenizer.bos() >= 0) prompt.push_back(tokenizer.bos());
    std::uniform_int_distribution<int32_t> pick(0, static_cast<int32_t>(loaded->config.n_vocab - 1));
    while (static_cast<int64_t>(prompt.size()) < args.random_prompt) prompt.push_back(pick(rng));
  } else {
    prompt = tokenizer.encode(args.prompt, /*add_special=*/true, args.parse_special);
  }
  if (prompt.empty()) {
    if (tokenizer.bos() < 0)
      return fail(args.model + ": empty prompt and the vocabulary has no BOS token; pass -p TEXT");
    prompt.push_back(tokenizer.bos());
  }

  const ModelConfig& cfg = loaded->config;
  // `run` holds one sequence: --max-num-seqs is accepted with any value and ignored (it is a
  // shared engine flag; see its help under `hinge run --help`). The context defaults to
  // min(model, 4096), and the KV arena is sized for exactly that (unless --kv-memory says
  // otherwise).
  auto config = single_sequence_engine_config(args.engine, cfg);
  if (!config.ok()) return fail(config.status().message());
  EngineConfig ec = *config;
  ec.profile_steps = args.profile;
  const int64_t ctx = ec.max_model_len;
  if (static_cast<int64_t>(prompt.size()) >= ctx)
    return fail(fmt::format("prompt is {} tokens but the context holds {}; {}", prompt.size(), ctx,
                            ctx_size_hint(ctx, cfg.context_length)));
  auto made_spec = kv_spec_for(cfg, ec.k_dtype, ec.v_dtype, ec.block_size, ec.kv_groups);
  if (!made_spec.ok()) return fail(made_spec.status().message());
  const kv::KvSpec spec = *made_spec;  // the engine's (groups included)
  if (ec.kv_memory_bytes == 0) {
    ec.kv_memory_bytes = spec.bytes_for_tokens(ctx);
    const uint64_t ram = static_cast<uint64_t>(::sysconf(_SC_PHYS_PAGES)) *
                         static_cast<uint64_t>(::sysconf(_SC_PAGE_SIZE));
    if (static_cast<uint64_t>(ec.kv_memory_bytes) > ram / 2)
      return fail(fmt::format("a KV cache of {} tokens needs {}, more than half of this machine's "
                              "{}; lower --ctx-size", ctx,
                              format_bytes(static_cast<uint64_t>(ec.kv_memory_bytes)),
                              format_bytes(ram)));
  }
  std::unique_ptr<LoadedModel> draft;  // --speculative draft (outlives the engine)
  if (Status st = attach_draft_model(args.engine.draft_model, *loaded, &ec, &draft); !st.ok())
    return fail(st.message());
  auto engine_or = Engine::create(*loaded, &tokenizer, ec);
  if (!engine_or.ok()) return fail(engine_or.status().message());
  Engine& engine = **engine_or;
  print_memory_breakdown(engine);
  // A memory budget may leave KV for fewer tokens than --ctx-size: the context is that.
  const int64_t ctx_now = engine.max_model_len();
  if (static_cast<int64_t>(prompt.size()) >= ctx_now)
    return fail(fmt::format("prompt is {} tokens but the KV cache the memory budget ({}) leaves "
                            "holds {}; raise the budget or shorten the prompt",
                            prompt.size(), ec.memory_budget_source, ctx_now));

  GenerateRequest req;
  req.prompt_token_ids = prompt;
  req.sampling = args.sampling;
  // The context bounds the answer: finish with "length" when it is full.
  // (--context-policy shift: the context rolls instead, -n is the only bound.)
  req.max_new_tokens = static_cast<int32_t>(std::max<int64_t>(
      1, ec.context_policy == ContextPolicy::kShift
             ? std::min<int64_t>(args.n_predict, INT32_MAX)
             : std::min<int64_t>(args.n_predict, ctx_now - static_cast<int64_t>(prompt.size()))));
  if (args.n_predict <= 0) return fail("--n-predict must be >= 1");
  const int32_t max_new = req.max_new_tokens;
  auto added = engine.add_request(std::move(req));
  if (!added.ok()) return fail(added.status().message());
  const RequestId request_id = *added;
  // Memory pressure and temperature end or cap the reply instead of letting the system kill
  // the process (pressure/reply_shedder.h).
  ReplyShedder shedder(&engine, {.enabled = !args.pressure.no_pressure,
                                 .watch = pressure_watch_config(args.pressure),
                                 .max_tokens = static_cast<int32_t>(args.pressure.max_tokens)});
  std::optional<pressure::PressureLevel> shed;  // the level that ended the reply

  using Clock = std::chrono::steady_clock;
  struct {
    std::vector<int32_t> token_ids;
    std::string text;
    int64_t prompt_tokens = 0, generated_tokens = 0;
    double prefill_tokens_per_s = 0, decode_tokens_per_s = 0, achieved_gb_per_s = 0;
    std::string finish_reason = "length";
  } r;
  r.prompt_tokens = static_cast<int64_t>(prompt.size());
  // --echo: the prompt as text first (as llama-cli prints it: detokenized, control tokens such
  // as BOS omitted), then the continuation, which the detokenizer renders after the prompt.
  if (args.echo) {
    r.text = tokenizer.decode(prompt);
    if (!args.json) {
      std::fwrite(r.text.data(), 1, r.text.size(), stdout);
      std::fflush(stdout);
    }
  }
  const auto t0 = Clock::now();
  std::optional<Clock::time_point> t_first;
  std::vector<RequestDelta> deltas;
  int64_t generated = 0;
  std::vector<double> itl_ms;  // gaps between the steps that gave tokens
  std::optional<Clock::time_point> t_last;
  itl_ms.reserve(static_cast<size_t>(std::min<int64_t>(max_new, 1 << 20)));
  while (engine.has_unfinished()) {
    shedder.poll();
    if (!shed && shedder.should_end(r.prompt_tokens, generated, max_new)) {
      shed = shedder.level();
      engine.abort(request_id);
    }
    if (Status st = engine.step(&deltas); !st.ok()) return fail(st.message());
    for (const RequestDelta& d : deltas) {
      if (!t_first && (!d.token_ids.empty() || d.finished())) t_first = Clock::now();
      r.token_ids.insert(r.token_ids.end(), d.token_ids.begin(), d.token_ids.end());
      r.text += d.text;
      if (!args.json && !d.text.empty()) {
        std::fwrite(d.text.data(), 1, d.text.size(), stdout);
        std::fflush(stdout);
      }
      if (d.finished()) r.finish_reason = sched::finish_reason_name(d.finish_reason);
    }
    if (static_cast<int64_t>(r.token_ids.size()) > generated) {
      const auto now = Clock::now();
      if (t_last) itl_ms.push_back(std::chrono::duration<double, std::milli>(now - *t_last).count());
      t_last = now;
    }
    generated = static_cast<int64_t>(r.token_ids.size());
  }
  std::sort(itl_ms.begin(), itl_ms.end());
  if (shed) {
    r.finish_reason = "memory_pressure";
    std::fprintf(stderr, "%shinge: memory pressure %s%s%s%s: the reply ended after %lld tokens "
                 "to free memory\n", args.json ? "" : "\n", pressure::pressure_level_name(*shed),
                 shedder.reasons().empty() ? "" : " (", shedder.reasons().c_str(),
                 shedder.reasons().empty() ? "" : ")", static_cast<long long>(generated));
  }
  const auto t_end = Clock::now();
  r.generated_tokens = static_cast<int64_t>(r.token_ids.size());
  auto secs = [](Clock::duration d) { return std::chrono::duration<double>(d).count(); };
  if (t_first && secs(*t_first - t0) > 0) r.prefill_tokens_per_s = r.prompt_tokens / secs(*t_first - t0);
  const int64_t decode_steps = r.generated_tokens > 0 ? r.generated_tokens - 1 : 0;
  if (t_first && decode_steps > 0 && secs(t_end - *t_first) > 0) {
    const double dt = secs(t_end - *t_first);
    r.decode_tokens_per_s = decode_steps / dt;
    // Bytes read per decode step: all weights once, plus the KV of every earlier position. A
    // speculative step verifies several tokens per read: each accepted draft saved one.
    const int64_t accepted = engine.stats().spec_accepted_tokens;
    const double reads_per_token =
        static_cast<double>(std::max<int64_t>(decode_steps - accepted, 1)) / decode_steps;
    double bytes = 0;
    for (int64_t i = 0; i < decode_steps; ++i)
      bytes += (static_cast<double>(loaded->weights.bytes_per_token()) +
                static_cast<double>(spec.bytes_per_token()) *
                    static_cast<double>(std::min<int64_t>(r.prompt_tokens + i + 1, ctx))) *
               reads_per_token;
    r.achieved_gb_per_s = bytes / dt / 1e9;
  }
  const int threads = ec.threads;
  const EngineStats es = engine.stats();
  // Shares of this machine's measured limits (the cached profile; `hinge bench --membw
  // --compute` writes it).
  const std::optional<roofline::MachineProfile> profile = roofline::load_machine_profile(threads);
  const bool integer_units = roofline::weights_run_on_integer_units(loaded->weights);
  const double prefill_flops_per_s =
      r.prefill_tokens_per_s *
      roofline::prefill_flops_per_token(loaded->config, loaded->weights, r.prompt_tokens);

  if (args.json) {
    nlohmann::json j;
    j["token_ids"] = r.token_ids;
    j["text"] = r.text;
    j["prompt_tokens"] = r.prompt_tokens;
    j["generated_tokens"] = r.generated_tokens;
    j["prefill_tokens_per_s"] = r.prefill_tokens_per_s;
    j["decode_tokens_per_s"] = r.decode_tokens_per_s;
    j["achieved_gb_per_s"] = r.achieved_gb_per_s;
    j["finish_reason"] = r.finish_reason;
    j["truncated"] = es.context_dropped_tokens > 0;
    j["context_shifts"] = es.context_shifts;
    j["spec_verifications"] = es.spec_verifications;
    j["spec_draft_tokens"] = es.spec_draft_tokens;
    j["spec_accepted_tokens"] = es.spec_accepted_tokens;
    j["spec_draft_model_tokens"] = es.spec_draft_model_tokens;
    j["spec_draft_model_seconds"] = es.spec_draft_model_seconds;
    j["dropped_tokens"] = es.context_dropped_tokens;
    j["max_position"] = es.max_position;  // below -c, however far a shift goes
    j["seed"] = *args.seed;
    j["prefill_gflop_per_s"] = prefill_flops_per_s / 1e9;
    j["cpu"] = kernels::cpu_label();
    roofline::add_share_fields(j, profile ? &*profile : nullptr, r.achieved_gb_per_s * 1e9,
                               prefill_flops_per_s, integer_units);
    add_memory_budget_fields(j, es);
    j["itl_ms_p50"] = percentile(itl_ms, 50);
    j["itl_ms_p99"] = percentile(itl_ms, 99);
    j["threads_active"] = es.threads_active;
    j["memory_pressure_level"] = pressure::pressure_level_name(shedder.level());
    j["thermal_pressure_level"] = pressure::pressure_level_name(shedder.thermal());
    j["memory_pressure_transitions"] = shedder.transitions();
    if (const StepProfile* p = engine.step_profile()) {
      j["profile"] = p->to_json();
      j["prefill_profile"] = engine.prefill_profile()->to_json();
    }
    // Invalid UTF-8 (possible with byte tokens) is replaced rather than failing the dump.
    std::puts(j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  } else {
    std::fputc('\n', stdout);
    std::fflush(stdout);
  }
  std::fprintf(stderr,
               "hinge: prompt %lld tokens, prefill %.1f tok/s | generated %lld tokens, decode "
               "%.1f tok/s, %.2f GB/s | %d threads, seed %llu, finish: %s\n",
               static_cast<long long>(r.prompt_tokens), r.prefill_tokens_per_s,
               static_cast<long long>(r.generated_tokens), r.decode_tokens_per_s,
               r.achieved_gb_per_s, threads, static_cast<unsigned long long>(*args.seed),
               r.finish_reason.c_str());
  if (es.spec_verifications > 0)
    std::fprintf(stderr,
                 "hinge: speculative (%s): %lld of %lld draft tokens accepted (%.0f%%), %.2f "
                 "tokens per verification\n",
                 ec.spec_mode == SpecMode::kNgram ? "ngram" : "draft model",
                 static_cast<long long>(es.spec_accepted_tokens),
                 static_cast<long long>(es.spec_draft_tokens),
                 100.0 * static_cast<double>(es.spec_accepted_tokens) /
                     static_cast<double>(std::max<int64_t>(es.spec_draft_tokens, 1)),
                 1.0 + static_cast<double>(es.spec_accepted_tokens) /
                           static_cast<double>(es.spec_verifications));
  if (profile) {
    std::string line = "hinge: on " + profile->cpu + ":";
    if (r.decode_tokens_per_s > 0 && profile->membw_bytes_per_s > 0)
      line += fmt::format(" decode {:.2f} GB/s = {} read;", r.achieved_gb_per_s,
                          roofline::bandwidth_share(*profile, r.achieved_gb_per_s * 1e9));
    if (const std::string share = roofline::peak_share(*profile, prefill_flops_per_s, integer_units);
        r.prefill_tokens_per_s > 0 && !share.empty())
      line += fmt::format(" prefill {} = {}", roofline::format_ops(prefill_flops_per_s, integer_units),
                          share);
    std::fprintf(stderr, "%s\n", line.c_str());
  } else if (roofline::machine_profile_enabled() && !args.json) {
    std::fprintf(stderr,
                 "hinge: run `hinge bench --membw --compute -t %d` once to see these rates as "
                 "shares of this machine's measured limits\n",
                 threads);
  }
  if (const std::string m = memory_budget_summary(es); !m.empty())
    std::fprintf(stderr, "hinge: memory budget %s\n", m.c_str());
  if (const StepProfile* p = engine.step_profile(); p != nullptr && !args.json) {
    const roofline::ComputePeak* peak = profile ? profile->best_peak(integer_units) : nullptr;
    std::fputs(StepProfile::format_both(*engine.prefill_profile(), *p,
                                        profile ? profile->membw_bytes_per_s : 0.0,
                                        peak ? peak->ops_per_s : 0.0)
                   .c_str(),
               stderr);
  }
  if (es.context_shifts > 0)
    std::fprintf(stderr,
                 "hinge: context shift: %lld shifts dropped %lld tokens (kept the first %d "
                 "tokens, the sinks in whole blocks, and the most recent within %lld)\n",
                 static_cast<long long>(es.context_shifts),
                 static_cast<long long>(es.context_dropped_tokens),
                 (ec.sink_tokens + ec.block_size - 1) / ec.block_size * ec.block_size,
                 static_cast<long long>(ctx));
  return 0;
}

}  // namespace hinge::cli
