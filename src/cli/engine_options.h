// The command-line flags every engine-backed `hinge` command shares (threads, KV arena size and
// dtypes, block size, scheduler budgets, prefix cache, context length) and their translation
// into an EngineConfig.
//
// Contract: add_engine_options() only registers the flags; values are kept as typed by the user
// (sizes and dtypes as strings, integers as int64) so that make_engine_config() can check every
// one and return a one-line error that names the flag and what it accepts. It also reads
// HINGE_KV_DEBUG from the environment (kv::kv_debug_enabled()).
//
// Thread-safety: plain functions over plain values; call from the main thread while parsing.
#pragma once

#include <cstdint>
#include <string>

#include "common/status.h"
#include "hinge/engine.h"
#include "model/model_config.h"

namespace CLI {
class App;
}  // namespace CLI

namespace hinge::cli {

struct EngineOptionsArgs {
  int64_t threads = 0;               // -t/--threads; 0: all hardware threads
  std::string kv_memory = "0";       // --kv-memory SIZE ("256MiB"); 0: automatic
  int64_t block_size = 16;           // --block-size: tokens per KV block
  std::string kv_dtype;              // --kv-dtype: K and V; empty: the engine default (f16)
  std::string kv_dtype_k;            // --kv-dtype-k: overrides the K side of --kv-dtype
  std::string kv_dtype_v;            // --kv-dtype-v: overrides the V side of --kv-dtype
  int64_t max_batched_tokens = 512;  // --max-batched-tokens: token budget per step
  int64_t max_num_seqs = 64;         // --max-num-seqs: running sequences at most
  int64_t kv_groups = 1;             // --kv-groups: KV groups the layers are split into
  bool no_prefix_cache = false;      // --no-prefix-cache
  bool no_adapt_threads = false;     // --no-adapt-threads
  int64_t ctx_size = 0;              // -c/--ctx-size -> max_model_len; 0: the model's
  std::string memory_budget;         // --memory-budget SIZE; empty: the cgroup's limit, if any
  std::string context_policy = "error";  // --context-policy error|shift
  int64_t sink_tokens = 4;           // --sink-tokens
  std::string memory_root = "/";     // where the cgroup files are read (serve: --pressure-root)
  std::string speculative = "none";  // --speculative none|ngram|draft
  int64_t spec_k = 4;                // --spec-k: most draft tokens per step
  std::string draft_model;           // --draft-model FILE (--speculative draft)
};

// Prints the engine's memory-budget breakdown line on stderr, when it has one.
void print_memory_breakdown(const Engine& engine);

// Registers the shared engine flags on `app` (a subcommand), writing into *args.
void add_engine_options(CLI::App* app, EngineOptionsArgs* args);

// The context length (max_model_len) a command runs with: --ctx-size `requested`, or
// `default_len` when it is 0, and never more than the model's trained `model_context` (as
// Engine::create clamps it). Prints one warning line on stderr when `requested` is above the
// model's context: what was asked, the model's context, and what is used.
int64_t resolve_ctx_size(int64_t requested, int64_t model_context, int64_t default_len);

// The hint that ends an error about a sequence longer than the context `ctx_len`: "raise
// --ctx-size (at most N, the model's context)", or, when ctx_len is already the model's context,
// "the model's context is N tokens; --ctx-size cannot exceed it".
std::string ctx_size_hint(int64_t ctx_len, int64_t model_context);

// Checks every value and builds the config (threads 0 resolved to the hardware thread count,
// kv_debug from HINGE_KV_DEBUG). Errors name the flag and the accepted values.
StatusOr<EngineConfig> make_engine_config(const EngineOptionsArgs& args);
// The engine config of a one-sequence command (run, chat): max_num_seqs 1 whatever
// --max-num-seqs says, and the context (max_model_len) --ctx-size or min(model, 4096).
StatusOr<EngineConfig> single_sequence_engine_config(EngineOptionsArgs args,
                                                     const ModelConfig& model);

}  // namespace hinge::cli
