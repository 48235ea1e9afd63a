// The `hinge` subcommands. Each returns the process exit code and prints errors as one line
// on stderr ("hinge: <what went wrong>").
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli/engine_options.h"
#include "cli/pressure_options.h"
#include "engine/sampling_params.h"
#include "model/loaded_model.h"
#include "plan/workloads.h"

namespace CLI {
class App;
}

namespace hinge::cli {

struct RunArgs {
  std::string model;
  std::string tokenizer;
  std::string prompt;
  int64_t n_predict = 256;
  bool json = false;
  bool echo = false;          // --echo: print the prompt before the generated text
  bool parse_special = true;
  int64_t random_prompt = 0;  // > 0: a prompt of this many tokens, BOS then seeded random ids
  bool profile = false;       // --profile: time each step's phases (StepProfile)
  std::optional<uint64_t> seed;
  SamplingParams sampling;
  EngineOptionsArgs engine;  // -t, -c (0: min(model context, 4096)), --kv-dtype, ...
  PressureArgs pressure;     // the reply shed under memory pressure (pressure/reply_shedder.h)
};
int run_command(RunArgs args);

struct TokenizeArgs {
  std::string model;
  std::string tokenizer;
  bool no_bos = false;
  bool parse_special = false;
};
int tokenize_command(const TokenizeArgs& args);

struct InfoArgs {
  std::string model;
  std::string tokenizer;
  bool tensors = true;
};
int info_command(const InfoArgs& args);

struct ConvertArgs {
  std::string input;
  std::string tokenizer;
  std::string output;
  std::string type;  // empty: keep
};
int convert_command(const ConvertArgs& args);

struct SynthArgs {
  std::string preset;
  std::string type = "q8_0";
  std::string output;
  uint64_t seed = 1234;
  int64_t layers = 0;
  int64_t context = 0;     // > 0: the trained context written (random weights: speed tests)
  bool list = false;
  std::string transplant;  // a trained llama GGUF rewritten as --family (model/transplant.h)
  std::string family;
  int64_t width = 0;       // --width: transplant into at least this embedding width
};
int synth_command(const SynthArgs& args);

struct BenchArgs {
  std::string model;
  std::string tokenizer;
  int64_t requests = 16;
  int64_t prompt_tokens = 128;  // unique random ids per request, after BOS and the shared prefix
  int64_t gen_tokens = 64;
  int64_t shared_prefix = 0;    // random ids every request starts with (after BOS)
  uint64_t seed = 1234;
  bool json = false;
  bool profile = false;         // --profile: time each step's phases (StepProfile)
  bool mixed_lengths = false;   // own prompt uniform in [1, P], output uniform in [1, G]
  // Sampling of every request (default greedy); --temp 1 alone is OpenAI's default sampling.
  float temperature = 0.0f;
  int32_t top_k = 0;
  float top_p = 1.0f;
  float min_p = 0.0f;
  bool membw = false;           // --membw: measure the memory read bandwidth instead (no model)
  std::string membw_size = "1GiB";
  int64_t membw_reps = 7;
  bool compute = false;         // --compute: measure the multiply-add peak per instruction family
  bool layouts = false;         // --layouts: calibrate the weight layouts again (no model)
  bool sweep = false;           // --sweep: decode over batch x context (cli/cmd_bench_sweep.cpp)
  std::vector<int64_t> sweep_batches = {1, 4, 16, 64};
  std::vector<int64_t> sweep_contexts = {128, 1024, 4096, 16384};
  std::vector<std::string> sweep_dtypes = {"f16", "int8"};
  std::string svg;              // --sweep: the chart
  // --constrained N: the first N requests follow a grammar (--grammar FILE, GBNF, or
  // --json-schema FILE; default: any JSON object); the rest are free (cli/bench_constrained.h).
  int64_t constrained = 0;
  std::string grammar_file, json_schema_file;
  EngineOptionsArgs engine;
};
int bench_command(const BenchArgs& args);
// `hinge bench --membw / --compute / --layouts`: the machine, no model (cli/cmd_bench_machine.cpp).
int bench_machine_command(const BenchArgs& args);
// `hinge bench --sweep`: decode tok/s and bytes per step over batch x context x KV dtype.
int bench_sweep_command(const BenchArgs& args);

struct KvEvalArgs {
  std::string model;
  std::string tokenizer;
  std::string text_file;
  std::vector<std::string> dtypes;  // empty: every dtype
  int threads = 0;
  bool json = false;
};
int kv_eval_command(const KvEvalArgs& args);

// `hinge kv-size`: KV bytes per token / request / batch (plan/kv_size.h).
struct KvSizeArgs {
  std::string preset;        // --preset NAME
  std::string model;         // -m FILE or HF directory
  std::string tokenizer;
  int64_t layers = 0, heads = 0, kv_heads = 0, head_dim = 0;  // the shape by flags
  int64_t window = 0, local_layers = 0;                       // sliding-window layers
  int64_t mla_rank = 0, mla_rope_dim = 64;                    // latent attention
  int64_t context = 0;       // 0: the model's context (4096 when unknown)
  int64_t batch = 1;
  std::string dtype = "f16";
  bool json = false;
  bool list = false;
};
int kv_size_command(const KvSizeArgs& args);

// `hinge plan`: requests a deployment holds (plan/capacity.h).
struct PlanArgs {
  std::string model;                 // a kv-size preset or a model file
  std::string gpu = "h100-80gb";     // an accelerator preset, or cpu (this machine)
  int64_t gpus = 1;
  std::vector<int64_t> contexts;     // --context L [L...]; empty: 8192, or the workload
  std::string workload;              // JSONL: prompt_tokens, output_tokens per request
  std::string weights = "f16";       // bytes per parameter by dtype
  double headroom = 0.10;
  int64_t max_model_len = 0;         // what a contiguous cache reserves (0: the model's)
  bool json = false;
};
int plan_command(const PlanArgs& args);

// `hinge simulate`: a workload on the real scheduler with a roofline cost (plan/simulator.h).
struct SimulateArgs {
  std::string model;               // a kv-size preset or a model file
  std::string gpu = "cpu";         // an accelerator preset, or cpu (this machine's profile)
  int64_t gpus = 1;
  int64_t threads = 0;             // cpu: the machine profile of this many threads (0: all)
  std::string trace;               // JSONL workload; empty: the bench-like generator below
  int64_t requests = 16, prompt_tokens = 128, gen_tokens = 64, shared_prefix = 0;
  bool mixed_lengths = false;
  double rate = 0;                 // arrivals per second (0: all at once)
  uint64_t seed = 1234;
  std::string kv_memory = "0";     // 0: what the accelerator leaves, or room for every request
  std::string kv_dtype = "f16";
  int64_t block_size = 16, max_batched_tokens = 512, max_num_seqs = 64;
  double bandwidth_share = 1.0;    // of the measured / data-sheet bandwidth a step achieves
  double compute_share = 1.0;      // of the peak prefill achieves
  double step_overhead_ms = 0;     // per step
  double bandwidth_gbps = 0;       // > 0: instead of the profile's / data sheet's (cpu)
  double peak_gflops = 0;          // > 0: instead of the profile's peak (cpu)
  double decode_peak_gflops = 0;   // > 0: decode tokens' rate (cpu; default: the peak)
  double attention_gflops = 0;     // > 0: attention's rate (cpu; default: the peak)
  bool json = false;
  bool json_steps = false;
  std::string svg;                 // --svg FILE: the chart (plan/sim_chart.h)
  bool admission = false;          // through hinge serve's admission control
  int64_t max_queue = 256;
  double queue_timeout = 120;
  double max_request_share = 0.5;
  // --workload chat / rag / burst (plan/workloads.h); bench: the generator above.
  std::string workload = "bench";
  // The workloads' own flags (--turns, --think-s, --documents, --document-tokens, --zipf,
  // --bursts, --burst-interval); the rest of the spec comes from the flags above.
  plan::WorkloadSpec workload_spec;
  // --sweep: `hinge bench --sweep`'s grid, predicted; --compare: its measurement (--json).
  bool sweep = false;
  std::vector<int64_t> sweep_batches = {1, 4, 16, 64};
  std::vector<int64_t> sweep_contexts = {128, 1024, 4096, 16384};
  std::vector<std::string> sweep_dtypes = {"f16", "int8"};
  std::string compare;
};
int simulate_command(const SimulateArgs& args);
// Registers `hinge simulate` and its flags on `app` (cli/simulate_options.cpp).
CLI::App* add_simulate_command(CLI::App& app, SimulateArgs& args);

// `hinge context-eval`: StreamingLLM's comparison (eval/context_eval.h).
struct ContextEvalArgs {
  std::string model;
  std::string tokenizer;
  std::string text_file;     // empty: synthetic_story_text
  int64_t windows = 20;      // text length in windows (synthetic text only)
  int64_t window = 128;      // -c
  int64_t sink_tokens = 4;
  int64_t span = 256;
  int64_t block_size = 16;
  int threads = 0;
  bool json = false;
};
int context_eval_command(const ContextEvalArgs& args);

struct ServeArgs {
  std::string model;
  std::string tokenizer;
  std::string host = "127.0.0.1";
  int64_t port = 8080;
  std::vector<std::string> model_names;  // empty: the model file's stem; first: the id
  std::vector<std::string> cors_origins;
  int64_t max_queue = 256;
  int64_t max_concurrent_per_user = 0;
  double max_request_share = 0.5;  // of the KV pool one request may reserve
  double interactive_reserve = 0.2;
  double kv_headroom = 0.05;
  double queue_timeout = 120;      // seconds
  double shutdown_grace = 30;      // seconds
  int64_t io_threads = 2;
  int64_t request_workers = 2;     // threads for POST bodies (parsing, templates, tokenizing)
  int64_t max_connections = 0;     // 0: from the open-files limit
  double keep_alive_timeout = 5;   // seconds an idle connection is kept
  double header_timeout = 10;      // seconds for a request's headers
  std::string min_body_rate = "64KiB";  // per second, after header_timeout of grace
  double write_stall_timeout = 30; // seconds a write may make no progress
  std::string max_output_buffer = "4MiB";  // per connection
  std::string max_body = "8MiB";
  bool quiet = false;              // no per-request log lines
  std::string tool_format = "auto";  // chat/tool_format.h: auto (from the template) or a name
  std::string metrics_compat;        // --metrics-compat vllm: also vLLM's metric names
  std::string chat_template_file;  // --chat-template-file FILE: replaces the model's template
  std::string tenants;             // --tenants FILE (server/tenancy.h)
  std::string api_key;             // --api-key KEY: one shared key, without tenants
  std::string api_key_file;        // --api-key-file FILE: the same, read from a file
  std::string cache_secret_file;   // the namespaces' key; empty: random at start
  double cache_ttl = 0;            // seconds a cached block may hit (0: no limit)
  std::string admin_host = "127.0.0.1";  // --admin-port's listener
  int64_t admin_port = -1;         // -1: none; 0: any free port
  std::string tls_cert;            // PEM certificate chain; with tls_key: HTTPS only
  std::string tls_key;             // PEM private key
  PressureArgs pressure;           // memory pressure (pressure/, pressure/pressure_policy.h)
  // KV events (cluster/kv_event_publisher.h): ZeroMQ PUB endpoint hinge binds, in vLLM's format.
  std::string kv_events;           // --kv-events tcp://HOST:PORT (empty: none)
  std::string kv_events_replay;    // --kv-events-replay tcp://HOST:PORT: ROUTER replay service
  std::string kv_events_format = "positional";  // or "map"
  std::string kv_events_topic;     // empty: kv@<host>:<port>@<model>
  std::string kv_events_medium = "CPU";
  int64_t kv_events_buffer = 10000;  // batches kept for replay
  std::string kv_disk;                // --kv-disk DIR: the encrypted disk tier
  std::string kv_disk_size = "4GiB";
  std::string kv_redis;               // --kv-redis redis://HOST:PORT[/DB]: the shared tier
  double kv_redis_ttl = 3600;         // seconds a block lives in Redis (a tenant's TTL is shorter)
  double kv_redis_timeout = 0.25;     // seconds: connect and each command
  EngineOptionsArgs engine;
};
int serve_command(const ServeArgs& args);

// `hinge route`: a prefix-aware router in front of hinge replicas (cli/cmd_route.cpp,
// route/router.h).
struct RouteArgs {
  std::vector<std::string> backends;  // --backend http://HOST:PORT (repeatable)
  std::string host = "127.0.0.1";
  int64_t port = 8000;
  std::string policy = "prefix";
  double prefix_weight = 2.0, queue_weight = 1.0, kv_weight = 0.5;
  double poll_interval = 0.25;
  double connect_timeout = 2;
  int64_t workers = 64;
  std::string backend_api_key_file;
  bool quiet = false;
};
int route_command(const RouteArgs& args);

// `hinge chat`: an interactive chat for one person on the terminal (cli/cmd_chat.cpp).
struct ChatArgs {
  std::string model;
  std::string tokenizer;
  std::string system_prompt;       // --system TEXT
  std::string chat_template_file;  // replaces the model's template
  int64_t n_predict = 512;         // reply tokens at most
  std::optional<uint64_t> seed;
  SamplingParams sampling;
  std::string session_dir;         // empty: SessionStore::default_dir()
  std::string key_file;            // --key-file: 32-byte key instead of a passphrase
  bool no_session_kv = false;      // /save writes the conversation only
  std::string summary_instruction; // empty: FitConfig's default
  int64_t summary_tokens = 128;
  std::string load;                // --load NAME: /load it first
  bool no_stats = false;           // no stats line after each reply
  PressureArgs pressure;  // replies shed under memory pressure (pressure/reply_shedder.h)
  EngineOptionsArgs engine;
};
int chat_command(ChatArgs args);

// `hinge keygen`: a fresh API key and its digest line for the tenants file.
int keygen_command();

// load_model() with a progress bar on stderr (when it is a terminal).
StatusOr<std::unique_ptr<LoadedModel>> load_model_with_progress(const std::string& model,
                                                                 const std::string& tokenizer);

// --draft-model FILE (--speculative draft): loaded with a progress bar; an error unless its
// vocabulary is the target's (size and, where both have one, every piece).
StatusOr<std::unique_ptr<LoadedModel>> load_draft_model(const std::string& path,
                                                        const LoadedModel& target);

// With --speculative draft (config->spec_mode kDraft): load_draft_model() into *holder, which
// must outlive the engine, and config->draft_model set to it. Otherwise nothing.
Status attach_draft_model(const std::string& path, const LoadedModel& target,
                          EngineConfig* config, std::unique_ptr<LoadedModel>* holder);

// Prints "hinge: message" to stderr and returns 1.
int fail(const std::string& message);

}  // namespace hinge::cli
