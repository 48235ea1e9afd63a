#include "cli/engine_options.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <optional>
#include <string_view>

#include <fmt/format.h>

#include "common/thread_pool.h"
#include "common/units.h"
#include "kv/kv_cache_manager.h"
#include "kv/kv_spec.h"
#include "pressure/pressure_signals.h"

namespace hinge::cli {
namespace {

constexpr const char* kDtypeNames = "f32, f16, bf16, fp8_e4m3, fp8_e5m2, int8, int4";

// kv::parse_kv_dtype, also accepting the dash spellings (fp8-e4m3).
std::optional<KvDtype> parse_dtype(std::string_view text) {
  std::string name(text);
  for (char& c : name) {
    if (c == '-') c = '_';
  }
  return kv::parse_kv_dtype(name);
}

Status check_dtype(const char* flag, const std::string& text, KvDtype* out) {
  if (text.empty()) return Status::Ok();
  auto d = parse_dtype(text);
  if (!d)
    return Status::Errorf("{}: unknown KV dtype '{}'; expected one of {}", flag, text, kDtypeNames);
  *out = *d;
  return Status::Ok();
}

Status check_range(const char* flag, int64_t value, int64_t lo, int64_t hi, int32_t* out) {
  if (value < lo || value > hi)
    return Status::Errorf("{}: {} is out of range; expected an integer in [{}, {}]", flag, value,
                          lo, hi);
  *out = static_cast<int32_t>(value);
  return Status::Ok();
}

}  // namespace

void add_engine_options(CLI::App* app, EngineOptionsArgs* args) {
  app->add_option("-t,--threads", args->threads, "Threads; 0 = all hardware threads")
      ->capture_default_str();
  app->add_option("--kv-memory", args->kv_memory,
                  "KV cache arena size, e.g. 256MiB, 2GiB, 1.5GB; 0 = automatic")
      ->capture_default_str();
  app->add_option("--block-size", args->block_size, "Tokens per KV block")->capture_default_str();
  app->add_option("--kv-groups", args->kv_groups,
                  "KV groups the layers are split into (each request keeps a block table per "
                  "group; all full attention, so more than 1 only measures the bookkeeping)")
      ->capture_default_str();
  app->add_option("--kv-dtype", args->kv_dtype,
                  std::string("KV storage dtype of K and V: ") + kDtypeNames + " (default f16)");
  app->add_option("--kv-dtype-k", args->kv_dtype_k, "K dtype; overrides --kv-dtype for K");
  app->add_option("--kv-dtype-v", args->kv_dtype_v, "V dtype; overrides --kv-dtype for V");
  app->add_option("--max-batched-tokens", args->max_batched_tokens, "Token budget per step")
      ->capture_default_str();
  app->add_option("--max-num-seqs", args->max_num_seqs, "Running sequences at most")
      ->capture_default_str();
  app->add_option("--memory-budget", args->memory_budget,
                  "Hard cap on resident memory: weights + KV cache + scratch + runtime, e.g. "
                  "512MiB; the KV cache gets what remains (default: the cgroup v2 memory limit "
                  "when one is set, else none)");
  app->add_option("--context-policy", args->context_policy,
                  "When a sequence reaches --ctx-size: 'error' finishes it (length); 'shift' "
                  "keeps the first --sink-tokens (whole blocks) and the most recent tokens, "
                  "dropping whole blocks in between (StreamingLLM; positions re-assigned within "
                  "the cache, cached keys never rewritten); hinge chat also has 'summarize'")
      ->capture_default_str();
  app->add_option("--sink-tokens", args->sink_tokens,
                  "Leading tokens --context-policy shift always keeps (rounded up to blocks); 0 = "
                  "none, StreamingLLM's window-only baseline, which degrades")
      ->capture_default_str();
  app->add_flag("--no-prefix-cache", args->no_prefix_cache, "Disable prefix caching of KV blocks");
  app->add_option("--speculative", args->speculative,
                  "Speculative decoding: 'ngram' verifies draft tokens looked up in the "
                  "request's own prompt and output (prompt lookup, no extra model) together with "
                  "its next token, so text that repeats decodes several tokens per step; the "
                  "output is the same token stream as without it; 'draft' has --draft-model propose "
                  "them (greedy output unchanged, sampled output from the model's own "
                  "distribution by rejection sampling; docs/speculative.md)")
      ->capture_default_str();
  app->add_option("--spec-k", args->spec_k,
                  "Most draft tokens verified per step (each request adapts it to what it "
                  "accepts)")
      ->capture_default_str();
  app->add_option("--draft-model", args->draft_model,
                  "The draft model of --speculative draft: a smaller model with the same "
                  "vocabulary, which proposes the tokens the model verifies");
  app->add_flag("--no-adapt-threads", args->no_adapt_threads,
                "Keep every --threads thread busy even when other programs take cores (by "
                "default the engine runs as many as there are free cores)");
  app->add_option("-c,--ctx-size", args->ctx_size,
                  "Longest sequence (prompt + output) in tokens, at most the model's context "
                  "(larger values are lowered to it, with a warning); 0 = the model's context")
      ->capture_default_str();
}

int64_t resolve_ctx_size(int64_t requested, int64_t model_context, int64_t default_len) {
  if (requested > model_context) {
    std::fprintf(stderr,
                 "hinge: warning: --ctx-size %lld is above the model's context of %lld tokens; "
                 "using %lld\n",
                 static_cast<long long>(requested), static_cast<long long>(model_context),
                 static_cast<long long>(model_context));
  }
  return std::min(requested > 0 ? requested : default_len, model_context);
}

std::string ctx_size_hint(int64_t ctx_len, int64_t model_context) {
  if (ctx_len >= model_context)
    return fmt::format("the model's context is {} tokens; --ctx-size cannot exceed it",
                       model_context);
  return fmt::format("raise --ctx-size (at most {}, the model's context)", model_context);
}

void print_memory_breakdown(const Engine& engine) {
  if (!engine.memory_breakdown().empty())
    std::fprintf(stderr, "hinge: %s\n", engine.memory_breakdown().c_str());
  // A copy that took long enough to notice says what the wait was (every start pays it).
  const EngineStats s = engine.stats();
  if (s.weights_pack_seconds >= 1.0)
    std::fprintf(stderr,
                 "hinge: copied %s of weights into this CPU's fastest layouts in %.1f s "
                 "(HINGE_DISABLE_PACKING=1 starts faster and runs slower)\n",
                 format_bytes(static_cast<uint64_t>(s.weights_packed_bytes)).c_str(),
                 s.weights_pack_seconds);
}

StatusOr<EngineConfig> make_engine_config(const EngineOptionsArgs& args) {
  constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();
  EngineConfig c;
  int32_t threads = 0;
  HINGE_RETURN_IF_ERROR(check_range("--threads", args.threads, 0, 1023, &threads));
  c.threads = threads > 0 ? threads : hardware_threads();

  auto bytes = parse_bytes(args.kv_memory);
  if (!bytes || *bytes > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
    return Status::Errorf(
        "--kv-memory: cannot parse '{}'; expected a size such as 512MiB, 2GiB, 1.5GB or a byte "
        "count (0 = automatic)",
        args.kv_memory);
  c.kv_memory_bytes = static_cast<int64_t>(*bytes);

  HINGE_RETURN_IF_ERROR(check_range("--block-size", args.block_size, 1, 1024, &c.block_size));
  HINGE_RETURN_IF_ERROR(check_range("--kv-groups", args.kv_groups, 1, 1024, &c.kv_groups));
  KvDtype both = c.k_dtype;
  HINGE_RETURN_IF_ERROR(check_dtype("--kv-dtype", args.kv_dtype, &both));
  c.k_dtype = c.v_dtype = both;
  HINGE_RETURN_IF_ERROR(check_dtype("--kv-dtype-k", args.kv_dtype_k, &c.k_dtype));
  HINGE_RETURN_IF_ERROR(check_dtype("--kv-dtype-v", args.kv_dtype_v, &c.v_dtype));
  HINGE_RETURN_IF_ERROR(check_range("--max-batched-tokens", args.max_batched_tokens, 1, kInt32Max,
                                    &c.max_batched_tokens));
  HINGE_RETURN_IF_ERROR(
      check_range("--max-num-seqs", args.max_num_seqs, 1, kInt32Max, &c.max_num_seqs));
  HINGE_RETURN_IF_ERROR(check_range("--ctx-size", args.ctx_size, 0, kInt32Max, &c.max_model_len));
  if (!args.memory_budget.empty()) {
    auto budget = parse_bytes(args.memory_budget);
    if (!budget || *budget == 0 ||
        *budget > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
      return Status::Errorf(
          "--memory-budget: cannot parse '{}'; expected a size such as 512MiB, 2GiB or 1.5GB",
          args.memory_budget);
    c.memory_budget_bytes = static_cast<int64_t>(*budget);
  } else if (auto limit = pressure::cgroup_memory_limit(args.memory_root); limit && *limit > 0) {
    c.memory_budget_bytes = *limit;
    c.memory_budget_source = "the cgroup memory limit";
  }
  if (args.context_policy == "error")
    c.context_policy = ContextPolicy::kError;
  else if (args.context_policy == "shift")
    c.context_policy = ContextPolicy::kShift;
  else
    return Status::Errorf(
        "--context-policy: {} policy '{}'; expected error or shift{}",
        args.context_policy == "summarize" ? "this command has no" : "unknown",
        args.context_policy,
        args.context_policy == "summarize" ? " (summarize is hinge chat's: it rewrites the "
                                             "oldest turns of a conversation)" : "");
  HINGE_RETURN_IF_ERROR(check_range("--sink-tokens", args.sink_tokens, 0, 65536, &c.sink_tokens));
  c.enable_prefix_cache = !args.no_prefix_cache;
  if (args.speculative == "ngram") {
    c.spec_mode = SpecMode::kNgram;
  } else if (args.speculative == "draft") {
    // The command loads the model (load_draft_model) and sets c.draft_model.
    if (args.draft_model.empty())
      return Status::Error("--speculative draft needs --draft-model FILE (a smaller model with "
                           "the same vocabulary)");
    c.spec_mode = SpecMode::kDraft;
  } else if (args.speculative != "none") {
    return Status::Errorf("--speculative: unknown method '{}'; expected none, ngram or draft",
                          args.speculative);
  }
  if (!args.draft_model.empty() && args.speculative != "draft")
    return Status::Error("--draft-model goes with --speculative draft");
  HINGE_RETURN_IF_ERROR(check_range("--spec-k", args.spec_k, 1, kMaxSpecTokens, &c.spec_k));
  if (const char* v = std::getenv("HINGE_SPEC_VERIFY_K"); v != nullptr && *v != '\0') {
    // bench/speculative: the cost of verifying k tokens (engine.h: spec_verify_k).
    char* end = nullptr;
    const long k = std::strtol(v, &end, 10);
    if (*end != '\0' || k < 0 || k > kMaxSpecTokens)
      return Status::Errorf("HINGE_SPEC_VERIFY_K={}: expected 0..{}", v, kMaxSpecTokens);
    c.spec_verify_k = static_cast<int32_t>(k);
    if (k > 0 && c.spec_mode == SpecMode::kNone) c.spec_mode = SpecMode::kNgram;
  }
  c.adapt_threads = !args.no_adapt_threads;
  c.kv_debug = kv::kv_debug_enabled();
  HINGE_RETURN_IF_ERROR(c.validate());
  return c;
}

StatusOr<EngineConfig> single_sequence_engine_config(EngineOptionsArgs args,
                                                     const ModelConfig& model) {
  args.max_num_seqs = 1;
  HINGE_ASSIGN_OR_RETURN(EngineConfig ec, make_engine_config(args));
  ec.max_model_len = static_cast<int32_t>(resolve_ctx_size(
      ec.max_model_len, model.context_length, std::min<int64_t>(model.context_length, 4096)));
  return ec;
}

}  // namespace hinge::cli
