// `hinge bench`: throughput, latency and KV efficiency of the batched engine on synthetic
// prompts. N requests, each BOS (when the vocabulary has one) + one shared prefix of L random ids
// + P random ids of its own (seeded mt19937_64), are submitted at once to one Engine and decoded
// greedily for exactly G tokens (ignore_eos). Timing is steady_clock from just before the first
// add_request:
//   TTFT of a request = end of the step that produced its first token.
//   Inter-token latency = gaps between consecutive token arrivals of one request, all requests
//   pooled. Percentiles are nearest-rank on the sorted values.
//   Output tok/s = output tokens / wall time; prefill tok/s = prompt tokens actually computed
//   (prefix hits excluded) / time until the last request got its first token.
//   KV waste = (slots allocated - slots used) / slots allocated after each step, averaged over the
//   steps with slots allocated (the max is in the JSON too).
// It also reports what a contiguous per-request reservation would have needed, for prompt +
// max_new tokens and for max_model_len tokens, and the waste fraction each implies given the
// tokens in the sequences at the end (prompt + output).
// Stdout holds only the table (or one JSON object); the progress bar goes to stderr.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <unordered_map>

#include "cli/bench_constrained.h"
#include "cli/bench_workload.h"
#include "cli/commands.h"
#include "common/percentile.h"
#include "cli/memory_report.h"
#include "cli/progress_bar.h"
#include "common/thread_pool.h"
#include "common/units.h"
#include "hinge/engine.h"
#include "kernels/cpu_features.h"
#include "kernels/kernel_choice.h"
#include "model/loaded_model.h"
#include "model/step_profile.h"
#include "roofline/machine_profile.h"
#include "roofline/model_work.h"
#include "tokenizer/tokenizer.h"

namespace hinge::cli {
namespace {

constexpr int64_t kMaxRequests = 1 << 20;
constexpr int64_t kMaxTokens = 1 << 24;

double ratio(double num, double den) {
  return den > 0 ? num / den : 0.0;
}

struct PerRequest {
  double first_token_s = -1;
  double last_token_s = -1;
  int64_t output_tokens = 0;
  int64_t prompt_tokens = 0;
};

Status check_args(const BenchArgs& a) {
  auto check = [](const char* flag, int64_t v, int64_t lo, int64_t hi) {
    if (v < lo || v > hi)
      return Status::Errorf("{}: {} is out of range; expected an integer in [{}, {}]", flag, v, lo,
                            hi);
    return Status::Ok();
  };
  HINGE_RETURN_IF_ERROR(check("--requests", a.requests, 1, kMaxRequests));
  HINGE_RETURN_IF_ERROR(check("--prompt-tokens", a.prompt_tokens, 0, kMaxTokens));
  HINGE_RETURN_IF_ERROR(check("--gen-tokens", a.gen_tokens, 1, kMaxTokens));
  HINGE_RETURN_IF_ERROR(check("--shared-prefix", a.shared_prefix, 0, kMaxTokens));
  if (a.prompt_tokens < 1 && a.shared_prefix < 1)
    return Status::Error("--prompt-tokens: must be at least 1 unless --shared-prefix is");
  if (!(a.temperature >= 0 && a.temperature <= 100))
    return Status::Errorf("--temp must be in [0, 100] (0: greedy), got {}", a.temperature);
  if (a.top_k < 0) return Status::Errorf("--top-k must be >= 0 (0: off), got {}", a.top_k);
  if (!(a.top_p > 0 && a.top_p <= 1))
    return Status::Errorf("--top-p must be in (0, 1] (1: off), got {}", a.top_p);
  if (!(a.min_p >= 0 && a.min_p <= 1))
    return Status::Errorf("--min-p must be in [0, 1] (0: off), got {}", a.min_p);
  return Status::Ok();
}

std::string dtype_label(KvDtype k, KvDtype v) {
  if (k == v) return std::string(kv::kv_dtype_name(k));
  return fmt::format("{}/{}", kv::kv_dtype_name(k), kv::kv_dtype_name(v));
}

}  // namespace

int bench_command(const BenchArgs& args) {
  if (args.membw || args.compute || args.layouts) return bench_machine_command(args);
  if (args.model.empty()) return fail("bench: -m MODEL is required (or --membw / --compute / --layouts)");
  if (Status st = check_args(args); !st.ok()) return fail(st.message());
  auto config_or = make_engine_config(args.engine);
  if (!config_or.ok()) return fail(config_or.status().message());
  EngineConfig config = *config_or;
  config.profile_steps = args.profile;

  // The machine's limits, for the shares below: the cached profile, or measured now (about
  // 2 s, before the model takes memory and page cache) and saved.
  std::optional<roofline::MachineProfile> profile;
  if (roofline::machine_profile_enabled()) {
    ThreadPool probe_pool(config.threads);
    profile = roofline::load_machine_profile(probe_pool.size());
    const bool measured_before = profile && profile->membw_bytes_per_s > 0 && !profile->peaks.empty();
    if (!measured_before && config.memory_budget_bytes > 0) {
      // The bandwidth probe streams a 1 GiB buffer: more than a memory budget allows.
      std::fprintf(stderr, "hinge: shares of the machine's peaks left out: measuring them reads "
                           "1 GiB, beyond the memory budget (`hinge bench --membw --compute` "
                           "measures and saves them once)\n");
      profile.reset();
    } else if (!measured_before) {
      std::fprintf(stderr, "hinge: measuring this machine's bandwidth and compute peaks once "
                           "(saved in %s)\n",
                   roofline::machine_profile_path(probe_pool.size()).c_str());
      auto measured = roofline::measure_machine_profile(
          probe_pool, profile.value_or(roofline::MachineProfile{}), int64_t{1} << 30, true);
      if (!measured.ok()) return fail(measured.status().message());
      profile = *measured;
      if (Status st = roofline::save_machine_profile(*profile); !st.ok())
        std::fprintf(stderr, "hinge: warning: machine profile not saved: %s\n",
                     st.message().c_str());
    }
  }

  auto m = load_model_with_progress(args.model, args.tokenizer);
  if (!m.ok()) return fail(m.status().message());
  const std::unique_ptr<LoadedModel> loaded = std::move(m).value();
  auto tok = Tokenizer::create(loaded->vocab);
  if (!tok.ok()) return fail(tok.status().with_context(args.model).message());
  const Tokenizer& tokenizer = **tok;
  const ModelConfig& mc = loaded->config;

  const int64_t n = args.requests;
  const int64_t bos = tokenizer.bos() >= 0 ? 1 : 0;
  const int64_t prompt_len = bos + args.shared_prefix + args.prompt_tokens;
  const int64_t seq_len = prompt_len + args.gen_tokens;
  // As Engine::create resolves it: --ctx-size, at most the model's context; 0: the model's.
  const int64_t max_len =
      resolve_ctx_size(config.max_model_len, mc.context_length, mc.context_length);
  if (seq_len > max_len)
    return fail(fmt::format(
        "--prompt-tokens/--shared-prefix/--gen-tokens: a request needs {} tokens ({} BOS + {} "
        "shared + {} prompt + {} generated) but max_model_len is {}; lower them, or {}",
        seq_len, bos, args.shared_prefix, args.prompt_tokens, args.gen_tokens, max_len,
        ctx_size_hint(max_len, mc.context_length)));

  // Prompts: BOS + shared prefix + unique part, ids uniform in [0, n_vocab) (cli/bench_workload.h).
  const std::vector<BenchPrompt> prompts =
      bench_prompts(args.seed, mc.n_vocab, bos ? tokenizer.bos() : -1, args.shared_prefix,
                    args.prompt_tokens, args.gen_tokens, args.mixed_lengths, n);
  std::vector<GenerateRequest> requests(static_cast<size_t>(n));
  std::vector<int64_t> prompt_lens;
  uint64_t request_index = 0;
  for (auto& r : requests) {
    const BenchPrompt& p = prompts[request_index];
    r.prompt_token_ids = p.tokens;
    r.sampling.temperature = args.temperature;
    r.sampling.top_k = args.top_k;
    r.sampling.top_p = args.top_p;
    r.sampling.min_p = args.min_p;
    r.sampling.ignore_eos = true;
    r.sampling.seed = args.seed + request_index++;  // each request its own random stream
    r.max_new_tokens = static_cast<int32_t>(p.gen_tokens);
    prompt_lens.push_back(static_cast<int64_t>(r.prompt_token_ids.size()));
  }
  if (args.constrained < 0 || args.constrained > n)
    return fail(fmt::format("--constrained: 0 to --requests ({})", n));
  if (args.constrained > 0) {  // the first N requests follow the grammar
    auto g = bench_grammar(args);
    if (!g.ok()) return fail(g.status().message());
    for (int64_t i = 0; i < args.constrained; ++i) requests[static_cast<size_t>(i)].sampling.grammar = *g;
  }
  ConstrainedSplit split;
  int64_t total_expected = 0;
  for (const auto& r : requests) total_expected += r.max_new_tokens;

  std::unique_ptr<LoadedModel> draft;  // --speculative draft (outlives the engine)
  if (Status st = attach_draft_model(args.engine.draft_model, *loaded, &config, &draft); !st.ok())
    return fail(st.message());
  auto engine_or = Engine::create(*loaded, &tokenizer, config);
  if (!engine_or.ok()) return fail(engine_or.status().message());
  Engine& engine = **engine_or;
  print_memory_breakdown(engine);
  const EngineConfig& used_config = engine.config();
  const int64_t model_len = max_len;

  using Clock = std::chrono::steady_clock;
  const Clock::time_point start = Clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(Clock::now() - start).count(); };

  std::vector<int64_t> per_prompt_len(static_cast<size_t>(n));
  std::unordered_map<RequestId, size_t> index_of;
  index_of.reserve(static_cast<size_t>(n));
  for (size_t i = 0; i < requests.size(); ++i) {
    auto id = engine.add_request(std::move(requests[i]));
    if (!id.ok()) return fail(id.status().message());
    index_of.emplace(*id, i);
    per_prompt_len[i] = prompt_lens[i];
  }

  std::vector<PerRequest> per(static_cast<size_t>(n));
  for (size_t i = 0; i < per.size(); ++i) per[i].prompt_tokens = per_prompt_len[i];
  std::vector<double> itl_ms;
  itl_ms.reserve(static_cast<size_t>(n * (args.gen_tokens - 1)));
  std::vector<RequestDelta> deltas;
  int64_t output_tokens = 0;
  int64_t first_tokens = 0;
  double prefill_end_s = -1;
  int64_t prefill_computed = 0;
  double waste_sum = 0, waste_max = 0;
  int64_t waste_steps = 0;
  double waste_per_request_max = 0;  // slots allocated but unused, per running request (tokens)
  // Steps that computed no prompt token (pure decode; llama-batched-bench's S_TG phase).
  double decode_only_s = 0, prev_t = 0;
  int64_t decode_only_tokens = 0, prev_computed = 0, decode_only_steps = 0;
  double decode_step_s = 0, decode_sample_s = 0, prev_step_s = 0, prev_sample_s = 0;
  {
    ProgressBar bar("bench");
    while (engine.has_unfinished()) {
      if (Status st = engine.step(&deltas); !st.ok()) return fail(st.message());
      const double t = elapsed();
      int64_t step_tokens = 0;
      for (const RequestDelta& d : deltas) {
        step_tokens += static_cast<int64_t>(d.token_ids.size());
        auto it = index_of.find(d.id);
        if (it == index_of.end() || d.token_ids.empty()) continue;
        PerRequest& p = per[it->second];
        for (size_t k = 0; k < d.token_ids.size(); ++k) {
          if (p.first_token_s < 0) {
            p.first_token_s = t;
            ++first_tokens;
          } else {
            itl_ms.push_back((t - p.last_token_s) * 1e3);
            (static_cast<int64_t>(it->second) < args.constrained ? split.itl_constrained_ms
                                                                 : split.itl_free_ms)
                .push_back((t - p.last_token_s) * 1e3);
          }
          p.last_token_s = t;
        }
        p.output_tokens += static_cast<int64_t>(d.token_ids.size());
        (static_cast<int64_t>(it->second) < args.constrained ? split.constrained_tokens : split.free_tokens) +=
            static_cast<int64_t>(d.token_ids.size());
        output_tokens += static_cast<int64_t>(d.token_ids.size());
      }
      const EngineStats s = engine.stats();
      if (s.prompt_tokens_computed == prev_computed) {
        decode_only_s += t - prev_t;
        decode_only_tokens += step_tokens;
        ++decode_only_steps;
        decode_step_s += s.step_seconds - prev_step_s;
        decode_sample_s += s.sample_seconds - prev_sample_s;
      }
      prev_step_s = s.step_seconds;
      prev_sample_s = s.sample_seconds;
      prev_computed = s.prompt_tokens_computed;
      prev_t = t;
      if (s.running > 0)
        waste_per_request_max =
            std::max(waste_per_request_max, static_cast<double>(s.kv_slots_allocated - s.kv_slots_used) /
                                                static_cast<double>(s.running));
      if (s.kv_slots_allocated > 0) {
        const double w = static_cast<double>(s.kv_slots_allocated - s.kv_slots_used) /
                         static_cast<double>(s.kv_slots_allocated);
        waste_sum += w;
        waste_max = std::max(waste_max, w);
        ++waste_steps;
      }
      if (prefill_end_s < 0 && first_tokens == n) {
        prefill_end_s = t;
        prefill_computed = s.prompt_tokens_computed;
      }
      bar.update(std::min(
          1.0, ratio(static_cast<double>(output_tokens), static_cast<double>(total_expected))));
    }
  }
  const double wall_s = elapsed();
  const EngineStats s = engine.stats();
  if (prefill_end_s < 0) {  // some request never produced a token (cannot happen with G >= 1)
    prefill_end_s = wall_s;
    prefill_computed = s.prompt_tokens_computed;
  }

  std::vector<double> ttft_ms;
  int64_t used_tokens = 0;  // tokens in the sequences at the end: prompt + output
  for (const PerRequest& p : per) {
    if (p.first_token_s >= 0) ttft_ms.push_back(p.first_token_s * 1e3);
    used_tokens += p.prompt_tokens + p.output_tokens;
  }
  std::sort(ttft_ms.begin(), ttft_ms.end());
  std::sort(itl_ms.begin(), itl_ms.end());

  const int64_t bytes_per_token = engine.kv_spec().bytes_per_token();
  int64_t reserve_tokens = 0;  // prompt + G (the request's max_tokens) per request
  for (const PerRequest& p : per) reserve_tokens += p.prompt_tokens + args.gen_tokens;
  const int64_t reserve_max_tokens = n * model_len;
  const double output_tps = ratio(static_cast<double>(output_tokens), wall_s);
  const double decode_tps = ratio(static_cast<double>(decode_only_tokens), decode_only_s);
  const double prefill_tps = ratio(static_cast<double>(prefill_computed), prefill_end_s);
  const double hit_rate = ratio(static_cast<double>(s.kv.num_prefix_hit_tokens),
                                static_cast<double>(s.kv.num_prefix_query_tokens));
  const int64_t kv_peak = static_cast<int64_t>(s.kv_blocks_peak) * s.kv_bytes_per_block;
  // Per KV group: its layers, window and what a token costs in it; what the sliding-window
  // groups handed back behind their windows over the run.
  struct GroupRow {
    int32_t layers;
    int32_t window;
    int64_t bytes_per_token;
  };
  std::vector<GroupRow> kv_groups;
  {
    const kv::KvSpec& spec = engine.kv_spec();
    const int64_t per_group = spec.bytes_per_token() / spec.num_groups();
    if (spec.groups.empty()) {
      kv_groups.push_back({spec.n_layers, 0, per_group});
    } else {
      for (const kv::KvGroup& g : spec.groups)
        kv_groups.push_back({static_cast<int32_t>(g.layers.size()), g.window, per_group});
    }
  }
  const int64_t window_released_bytes = s.kv.num_window_released_blocks * s.kv_bytes_per_block;
  const double waste_mean = ratio(waste_sum, static_cast<double>(waste_steps));
  auto waste_of = [&](int64_t reserved) {
    return reserved > 0 ? std::max(0.0, 1.0 - static_cast<double>(used_tokens) /
                                                  static_cast<double>(reserved))
                        : 0.0;
  };
  const std::string dtype = dtype_label(used_config.k_dtype, used_config.v_dtype);
  // Roofline: decode-only steps read every weight once plus each sequence's KV (estimated at
  // the mean context of the decode phase); prefill does the prompt's multiply-adds.
  const double mean_decode_ctx =
      static_cast<double>(prompt_len) + static_cast<double>(args.gen_tokens) / 2.0;
  const double decode_bytes =
      static_cast<double>(decode_only_steps) * static_cast<double>(loaded->weights.bytes_per_token()) +
      static_cast<double>(decode_only_tokens) * static_cast<double>(bytes_per_token) * mean_decode_ctx;
  const double decode_bytes_per_s = ratio(decode_bytes, decode_only_s);
  const bool integer_units = roofline::weights_run_on_integer_units(loaded->weights);
  const double prefill_flops_per_s =
      prefill_tps * roofline::prefill_flops_per_token(mc, loaded->weights, prompt_len);
  const roofline::ComputePeak* peak = profile ? profile->best_peak(integer_units) : nullptr;

  if (args.json) {
    nlohmann::ordered_json j;
    j["requests"] = n;
    j["prompt_tokens_per_request"] = prompt_len;
    j["shared_prefix_tokens"] = args.shared_prefix;
    j["gen_tokens"] = args.gen_tokens;
    j["mixed_lengths"] = args.mixed_lengths;
    j["output_tokens"] = output_tokens;
    j["wall_s"] = wall_s;
    j["output_tokens_per_s"] = output_tps;
    j["prefill_tokens_per_s"] = prefill_tps;
    j["decode_tokens_per_s"] = decode_tps;
    j["prompt_tokens_computed"] = prefill_computed;
    j["spec_verifications"] = s.spec_verifications;
    j["spec_draft_tokens"] = s.spec_draft_tokens;
    j["spec_accepted_tokens"] = s.spec_accepted_tokens;
    j["spec_draft_model_tokens"] = s.spec_draft_model_tokens;
    j["spec_draft_model_seconds"] = s.spec_draft_model_seconds;
    j["ttft_ms_p50"] = percentile(ttft_ms, 50);
    j["ttft_ms_p99"] = percentile(ttft_ms, 99);
    j["itl_ms_p50"] = percentile(itl_ms, 50);
    j["itl_ms_p99"] = percentile(itl_ms, 99);
    j["prefix_hit_rate"] = hit_rate;
    j["prefix_hit_tokens"] = s.kv.num_prefix_hit_tokens;
    j["kv_bytes_peak"] = kv_peak;
    j["kv_bytes_total"] = s.kv_bytes_total;
    j["kv_blocks_peak"] = s.kv_blocks_peak;
    j["kv_blocks_total"] = s.kv_blocks_total;
    j["kv_bytes_per_token"] = bytes_per_token;
    j["kv_waste_fraction"] = waste_mean;
    j["kv_waste_fraction_max"] = waste_max;
    j["kv_waste_tokens_per_request_max"] = waste_per_request_max;
    j["contiguous_reservation_bytes"] = reserve_tokens * bytes_per_token;
    j["contiguous_waste_fraction"] = waste_of(reserve_tokens);
    j["contiguous_max_len_reservation_bytes"] = reserve_max_tokens * bytes_per_token;
    j["contiguous_max_len_waste_fraction"] = waste_of(reserve_max_tokens);
    j["max_model_len"] = model_len;
    j["preemptions"] = s.preemptions;
    j["steps"] = s.steps;
    j["step_seconds"] = s.step_seconds;
    j["sample_seconds"] = s.sample_seconds;
    j["sample_fraction"] = ratio(s.sample_seconds, s.step_seconds);
    j["decode_sample_fraction"] = ratio(decode_sample_s, decode_step_s);
    j["kv_dtype"] = dtype;
    if (args.constrained > 0) {
      j["constrained_requests"] = args.constrained;
      split.to_json(&j, s.mask_seconds, s.masks, s.mask_cache_hits, decode_only_steps);
    }
    if (const StepProfile* p = engine.step_profile()) {
      j["profile"] = p->to_json();
      j["prefill_profile"] = engine.prefill_profile()->to_json();
    }
    nlohmann::json groups = nlohmann::json::array();
    for (const auto& g : kv_groups)
      groups.push_back({{"layers", g.layers}, {"window", g.window},
                        {"bytes_per_token", g.bytes_per_token}});
    j["kv_groups"] = groups;
    j["kv_window_released_blocks"] = s.kv.num_window_released_blocks;
    j["kv_window_released_bytes"] = window_released_bytes;
    j["block_size"] = used_config.block_size;
    j["threads"] = used_config.threads;
    j["adapt_threads"] = used_config.adapt_threads;
    j["threads_active"] = s.threads_active;
    j["thread_changes"] = s.thread_changes;
    j["cpu_others_cores"] = s.cpu_others_cores;
    j["seed"] = args.seed;
    j["cpu"] = kernels::cpu_label();
    j["weight_layouts"] = kernels::layout_choice_summary();
    j["decode_gb_per_s"] = decode_bytes_per_s / 1e9;
    j["prefill_gflop_per_s"] = prefill_flops_per_s / 1e9;
    add_memory_budget_fields(j, s);
    roofline::add_share_fields(j, profile ? &*profile : nullptr, decode_bytes_per_s,
                               prefill_flops_per_s, integer_units);
    std::puts(j.dump().c_str());
    return 0;
  }

  auto row = [](const std::string& label, const std::string& value) {
    fmt::print("{:<28} {}\n", label, value);
  };
  auto pct = [](double f) { return fmt::format("{:.1f} %", f * 100.0); };
  row("requests",
      fmt::format("{} x ({} prompt = {} BOS + {} shared + {} own, {} generated){}", n,
                  prompt_len, bos, args.shared_prefix, args.prompt_tokens, args.gen_tokens,
                  args.mixed_lengths ? ", mixed: own and generated uniform up to these" : ""));
  row("engine", fmt::format("{} threads, KV {} in blocks of {}, {} tokens/step, {} seqs",
                            used_config.threads, dtype, used_config.block_size,
                            used_config.max_batched_tokens, used_config.max_num_seqs));
  if (used_config.adapt_threads && used_config.threads > 1)
    row("threads in use",
        fmt::format("{} of {} at the end ({} changes; other programs used {:.2f} cores)",
                    s.threads_active, used_config.threads, s.thread_changes,
                    s.cpu_others_cores));
  row("wall time", fmt::format("{:.3f} s ({} steps)", wall_s, s.steps));
  if (s.spec_verifications > 0)
    row("speculative",
        fmt::format("{} of {} draft tokens accepted ({:.0f}%), {:.2f} tokens per verification",
                    s.spec_accepted_tokens, s.spec_draft_tokens,
                    100.0 * ratio(static_cast<double>(s.spec_accepted_tokens),
                                  static_cast<double>(s.spec_draft_tokens)),
                    1.0 + ratio(static_cast<double>(s.spec_accepted_tokens),
                                static_cast<double>(s.spec_verifications))));
  row("output throughput", fmt::format("{:.1f} tok/s ({} tokens)", output_tps, output_tokens));
  row("decode-only throughput",
      fmt::format("{:.1f} tok/s ({} tokens in steps without prompt work)", decode_tps,
                  decode_only_tokens));
  row("prefill throughput",
      fmt::format("{:.1f} tok/s ({} tokens computed)", prefill_tps, prefill_computed));
  for (const std::string& line : kernels::layout_choice_summary()) row("weight layout", line);
  if (profile) {
    row("CPU", profile->cpu);
    if (decode_tps > 0)
      row("decode-only roofline",
          fmt::format("{:.2f} GB/s of weights and KV = {}", decode_bytes_per_s / 1e9,
                      roofline::bandwidth_share(*profile, decode_bytes_per_s)));
    if (prefill_tps > 0 && peak)
      row("prefill roofline",
          fmt::format("{} = {}", roofline::format_ops(prefill_flops_per_s, integer_units),
                      roofline::peak_share(*profile, prefill_flops_per_s, integer_units)));
  }
  row("TTFT p50 / p99",
      fmt::format("{:.2f} / {:.2f} ms", percentile(ttft_ms, 50), percentile(ttft_ms, 99)));
  row("inter-token p50 / p99",
      fmt::format("{:.2f} / {:.2f} ms", percentile(itl_ms, 50), percentile(itl_ms, 99)));
  row("prefix hit rate", fmt::format("{} ({} of {} tokens)", pct(hit_rate),
                                     s.kv.num_prefix_hit_tokens, s.kv.num_prefix_query_tokens));
  row("KV peak",
      fmt::format("{} ({} of {} blocks, {} total)", format_bytes(static_cast<uint64_t>(kv_peak)),
                  s.kv_blocks_peak, s.kv_blocks_total,
                  format_bytes(static_cast<uint64_t>(s.kv_bytes_total))));
  row("KV waste (paged)",
      fmt::format("{} mean over steps, {} max; at most {:.1f} slots per request (block {})",
                  pct(waste_mean), pct(waste_max), waste_per_request_max, used_config.block_size));
  row("contiguous prompt+max_new",
      fmt::format("{}, waste {}",
                  format_bytes(static_cast<uint64_t>(reserve_tokens * bytes_per_token)),
                  pct(waste_of(reserve_tokens))));
  row("contiguous max_model_len",
      fmt::format("{}, waste {} ({} tokens each)",
                  format_bytes(static_cast<uint64_t>(reserve_max_tokens * bytes_per_token)),
                  pct(waste_of(reserve_max_tokens)), model_len));
  {
    int32_t full_groups = 0, local_groups = 0, full_layers = 0, local_layers = 0, window = 0;
    for (const GroupRow& g : kv_groups) {
      (g.window ? local_groups : full_groups) += 1;
      (g.window ? local_layers : full_layers) += g.layers;
      window = std::max(window, g.window);
    }
    if (local_groups == 0) {
      row("KV groups", fmt::format("{} of full attention ({} layers), {} per token",
                                   full_groups, full_layers,
                                   format_bytes(static_cast<uint64_t>(bytes_per_token))));
    } else {
      row("KV groups",
          fmt::format("{} full attention ({} layers), {} sliding window {} ({} layers); {} per "
                      "token per group",
                      full_groups, full_layers, local_groups, window, local_layers,
                      format_bytes(static_cast<uint64_t>(kv_groups[0].bytes_per_token))));
      row("KV released behind windows",
          fmt::format("{} ({} blocks over the run)",
                      format_bytes(static_cast<uint64_t>(window_released_bytes)),
                      s.kv.num_window_released_blocks));
    }
  }
  row("preemptions", fmt::format("{}", s.preemptions));
  if (args.constrained > 0) split.print(s.mask_seconds, s.masks, s.mask_cache_hits, decode_only_steps);
  if (const std::string m = memory_budget_summary(s); !m.empty()) row("memory budget", m);
  row("sampling", fmt::format("{} of step time ({:.1f} of {:.1f} ms), {} of decode-only steps'",
                              pct(ratio(s.sample_seconds, s.step_seconds)),
                              s.sample_seconds * 1e3, s.step_seconds * 1e3,
                              pct(ratio(decode_sample_s, decode_step_s))));
  if (const StepProfile* p = engine.step_profile())
    std::fputs(StepProfile::format_both(*engine.prefill_profile(), *p,
                                        profile ? profile->membw_bytes_per_s : 0.0,
                                        peak ? peak->ops_per_s : 0.0)
                   .c_str(),
               stdout);
  return 0;
}

}  // namespace hinge::cli
