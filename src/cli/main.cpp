// hinge: LLM inference and serving engine built around the KV cache.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <exception>
#include <new>
#include <string>

#include "cli/commands.h"

namespace {

void add_sampling_options(CLI::App* cmd, hinge::SamplingParams& s) {
  cmd->add_option("--temp", s.temperature, "Sampling temperature; 0 = greedy")->capture_default_str();
  cmd->add_option("--top-k", s.top_k, "Keep the K most likely tokens; 0 = off")->capture_default_str();
  cmd->add_option("--top-p", s.top_p, "Nucleus sampling threshold; 1 = off")->capture_default_str();
  cmd->add_option("--min-p", s.min_p, "Drop tokens below P x the top probability; 0 = off")
      ->capture_default_str();
  cmd->add_option("--repeat-penalty", s.repetition_penalty, "Repetition penalty; 1 = off")
      ->capture_default_str();
  cmd->add_option("--presence-penalty", s.presence_penalty, "Presence penalty")->capture_default_str();
  cmd->add_option("--frequency-penalty", s.frequency_penalty, "Frequency penalty")
      ->capture_default_str();
  cmd->add_option("--repeat-last-n", s.penalty_last_n, "Penalty window in tokens; -1 = all")
      ->capture_default_str();
  cmd->add_option("--stop", s.stop, "Stop string (repeatable); not included in the output");
  cmd->add_flag("--ignore-eos", s.ignore_eos, "Keep generating after end-of-sequence");
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"hinge: LLM inference engine built around the KV cache"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "hinge 0.1.0");

  hinge::cli::RunArgs run;
  auto* run_cmd = app.add_subcommand("run", "Generate text from a prompt (streams to stdout)");
  run_cmd->add_option("-m,--model", run.model, "GGUF file, Hugging Face directory, or llama2.c .bin")
      ->required();
  run_cmd->add_option("--tokenizer", run.tokenizer, "Tokenizer .bin for llama2.c checkpoints");
  run_cmd->add_option("-p,--prompt", run.prompt, "Prompt text; empty = start from BOS alone");
  run_cmd->add_option("-n,--n-predict", run.n_predict, "Number of tokens to generate")
      ->capture_default_str()->check(CLI::Range(int64_t{0}, int64_t{1} << 24));
  run_cmd->add_option("-s,--seed", run.seed, "Random seed (default: random)");
  run_cmd->add_option("--random-prompt", run.random_prompt,
                      "Benchmark: a prompt of N tokens, BOS then seeded random ids (as llama-bench)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 20))->excludes("--prompt");
  run_cmd->add_flag("--json", run.json, "Print one JSON object with ids, text and statistics");
  run_cmd->add_flag("--profile", run.profile,
                    "Time each step's phases (matmuls with their GOP/s in prefill and the GB/s "
                    "they read in decode, attention, element-wise work) and print prefill and "
                    "decode tables after the run (--json: \"prefill_profile\", \"profile\")");
  run_cmd->add_flag("--echo", run.echo,
                    "Print the prompt before the generated text (as llama-cli does; with --json "
                    "\"text\" starts with it too)");
  add_sampling_options(run_cmd, run.sampling);
  hinge::cli::add_engine_options(run_cmd, &run.engine);
  hinge::cli::add_pressure_options(run_cmd, &run.pressure, "the reply");
  run_cmd->get_option("--max-num-seqs")
      ->description("Ignored by run, which holds one sequence (accepted with any value)")
      ->default_str("");

  hinge::cli::TokenizeArgs tok;
  auto* tok_cmd = app.add_subcommand("tokenize", "Read text from stdin, print token ids");
  tok_cmd->add_option("-m,--model", tok.model, "Model or vocab-only GGUF, HF directory, llama2.c .bin")
      ->required();
  tok_cmd->add_option("--tokenizer", tok.tokenizer, "Tokenizer .bin for llama2.c checkpoints");
  tok_cmd->add_flag("--no-bos", tok.no_bos, "Do not add the BOS token");
  tok_cmd->add_flag("--parse-special", tok.parse_special, "Match special tokens written in the text");

  hinge::cli::InfoArgs info;
  auto* info_cmd = app.add_subcommand("info", "Show a model's architecture, tensors and KV size");
  info_cmd->add_option("model", info.model, "GGUF file, Hugging Face directory, or llama2.c .bin")
      ->required();
  info_cmd->add_option("--tokenizer", info.tokenizer, "Tokenizer .bin for llama2.c checkpoints");

  hinge::cli::ConvertArgs conv;
  auto* conv_cmd = app.add_subcommand("convert", "Convert a llama2.c or Hugging Face model to GGUF");
  conv_cmd->add_option("-m,--model,input", conv.input, "llama2.c .bin, HF directory, or GGUF")->required();
  conv_cmd->add_option("--tokenizer", conv.tokenizer, "Tokenizer .bin for llama2.c checkpoints");
  conv_cmd->add_option("-o,--output", conv.output, "Output .gguf path")->required();
  conv_cmd->add_option("--type", conv.type, "Weight type: f32, f16, bf16, q8_0, q4_0, q4_k, q5_k, q6_k (default: keep; q4_k and q5_k keep the output matrix in q6_k, as *_K_M files do)");

  hinge::cli::SynthArgs synth;
  auto* synth_cmd = app.add_subcommand("synth", "Write a random-weight GGUF of a real model shape");
  synth_cmd->add_option("--preset", synth.preset, "Shape: qwen2.5-0.5b, qwen3-0.6b, gemma3-1b, gemma2-2b, phi3-mini, smollm-135m, llama-1b, tiny-<family>, ... (see --list)");
  synth_cmd->add_option("--layers", synth.layers, "Keep only the first N layers (fast tests of a real shape)")
      ->check(CLI::Range(int64_t{1}, int64_t{1024}));
  synth_cmd->add_option("--context", synth.context,
                        "Write this trained context instead of the preset's (random weights: for "
                        "speed at long contexts)")
      ->check(CLI::Range(int64_t{16}, int64_t{1} << 20));
  synth_cmd->add_option("--type", synth.type, "Weight type: f32, f16, bf16, q8_0, q4_0, q4_k, q5_k, q6_k")->capture_default_str();
  synth_cmd->add_option("-o,--output", synth.output, "Output .gguf path");
  synth_cmd->add_option("--seed", synth.seed, "Random seed")->capture_default_str();
  synth_cmd->add_flag("--list", synth.list, "List presets");
  synth_cmd->add_option("--transplant", synth.transplant,
                        "Instead of random weights: rewrite this trained llama-architecture model "
                        "(GGUF, HF directory or llama2.c) as --family, computing the same function "
                        "(dimensions widened with zeros to multiples of 256), for parity tests");
  synth_cmd->add_option("--family", synth.family,
                        "With --transplant: llama, qwen2, phi3, granite or mistral3");
  synth_cmd->add_option("--width", synth.width,
                        "With --transplant: widen the embedding to at least this many dimensions "
                        "and the FFN by the same factor (the same function at the cost of a "
                        "larger model: a costly target whose exact draft is the source, for "
                        "bench/speculative)")
      ->check(CLI::Range(int64_t{0}, int64_t{16384}));

  hinge::cli::BenchArgs bench;
  auto* bench_cmd = app.add_subcommand(
      "bench", "Benchmark the batched engine: N synthetic requests at once, greedy or sampled (--temp)");
  bench_cmd->footer(
      "Prompts: BOS + --shared-prefix random ids + --prompt-tokens random ids per request "
      "(seeded).\nTTFT: start to the step that produced a request's first token; inter-token: "
      "gaps between\na request's tokens, all requests pooled; p50/p99 nearest-rank. KV waste: "
      "(slots allocated -\nslots used) / slots allocated, the mean over steps with slots "
      "allocated. Contiguous: what\nreserving prompt+max_new (or max_model_len) tokens per "
      "request would need, and its waste\ngiven the tokens in the sequences at the end. "
      "Decode-only throughput: output tokens of the steps\nthat computed no prompt token, over "
      "their time (llama-batched-bench's S_TG).");
  bench_cmd->add_option("-m,--model", bench.model,
                        "GGUF file, Hugging Face directory, or llama2.c .bin (not with --membw/--compute/--layouts)");
  bench_cmd->add_flag("--membw", bench.membw,
                      "Measure this machine's sustained memory read bandwidth with -t threads "
                      "(the limit of decode) instead of running a model");
  bench_cmd->add_flag("--compute", bench.compute,
                      "Measure this machine's multiply-add peak per instruction family (AMX int8 "
                      "and bf16, AVX-512 VNNI, BF16 and FMA, AVX2 FMA) with -t threads: the limit "
                      "of prefill. With --membw, both; either saves the machine profile that "
                      "`hinge run` and `hinge bench` print shares of");
  bench_cmd->add_flag("--layouts", bench.layouts,
                      "Time the weight layouts each quantized type can run in on this CPU again "
                      "and cache the fastest for every later hinge process (they are timed once "
                      "per machine and build; run this if the machine was busy then)");
  bench_cmd->add_option("--membw-size", bench.membw_size, "Buffer the bandwidth test streams")
      ->capture_default_str();
  bench_cmd->add_option("--membw-reps", bench.membw_reps, "Timed passes (the median is reported)")
      ->capture_default_str();
  bench_cmd->add_option("--tokenizer", bench.tokenizer, "Tokenizer .bin for llama2.c checkpoints");
  bench_cmd->add_option("--requests", bench.requests, "Requests submitted at once")
      ->capture_default_str();
  bench_cmd->add_option("--prompt-tokens", bench.prompt_tokens,
                        "Random prompt tokens of each request's own (after the shared prefix)")
      ->capture_default_str();
  bench_cmd->add_option("--constrained", bench.constrained,
                        "The first N requests follow a grammar (constrained decoding; the rest free): "
                        "their time per token against the free ones', and the mask time per step");
  bench_cmd->add_option("--grammar", bench.grammar_file, "--constrained: a GBNF grammar file");
  bench_cmd->add_option("--json-schema", bench.json_schema_file,
                        "--constrained: a JSON Schema file (default: any JSON object)");
  bench_cmd->add_option("--gen-tokens", bench.gen_tokens, "Tokens generated per request (no EOS)")
      ->capture_default_str();
  bench_cmd->add_option("--shared-prefix", bench.shared_prefix,
                        "Random tokens every prompt starts with (after BOS), for prefix caching")
      ->capture_default_str();
  bench_cmd->add_option("-s,--seed", bench.seed, "Seed of the random prompts")
      ->capture_default_str();
  bench_cmd->add_flag("--json", bench.json, "Print one JSON object instead of the table");
  bench_cmd->add_flag("--profile", bench.profile,
                      "Time each step's phases (prefill or mixed steps, and decode steps of every "
                      "running request) and print both tables after the run (--json: "
                      "\"prefill_profile\", \"profile\")");
  bench_cmd->add_flag("--sweep", bench.sweep,
                      "Decode over batch x context x KV dtype (the roofline, measured): tok/s and "
                      "the bytes a step streams, weights against KV; contexts share one prefilled "
                      "prompt through the prefix cache");
  bench_cmd->add_option("--sweep-batches", bench.sweep_batches, "--sweep: batch sizes")
      ->capture_default_str();
  bench_cmd->add_option("--sweep-contexts", bench.sweep_contexts, "--sweep: context lengths")
      ->capture_default_str();
  bench_cmd->add_option("--sweep-dtypes", bench.sweep_dtypes, "--sweep: KV dtypes")
      ->capture_default_str();
  bench_cmd->add_option("--svg", bench.svg, "--sweep: write the chart (decode tok/s by context, "
                                            "one line per batch and dtype)");
  bench_cmd->add_option("--temp", bench.temperature, "Sampling temperature; 0 = greedy")
      ->capture_default_str();
  bench_cmd->add_option("--top-k", bench.top_k, "Keep the K most likely tokens; 0 = off")
      ->capture_default_str();
  bench_cmd->add_option("--top-p", bench.top_p, "Nucleus sampling threshold; 1 = off")
      ->capture_default_str();
  bench_cmd->add_option("--min-p", bench.min_p, "Drop tokens below P x the top probability; 0 = off")
      ->capture_default_str();
  bench_cmd->add_flag("--mixed-lengths", bench.mixed_lengths,
                      "Own prompt length uniform in [1, P] and output length uniform in [1, G] "
                      "per request (as if EOS came early)");
  hinge::cli::add_engine_options(bench_cmd, &bench.engine);

  hinge::cli::KvSizeArgs kvsize;
  auto* kvsize_cmd = app.add_subcommand(
      "kv-size", "KV cache bytes per token, per request and per batch: presets, a model file or a "
                 "shape; MHA / GQA / MQA / MLA and KV dtypes side by side");
  kvsize_cmd->add_option("--preset", kvsize.preset, "A model shape: llama-2-70b, llama-3.1-8b, "
                                                    "deepseek-v3, ... (--list)");
  kvsize_cmd->add_option("-m,--model", kvsize.model, "GGUF file, Hugging Face directory, or llama2.c .bin");
  kvsize_cmd->add_option("--tokenizer", kvsize.tokenizer, "Tokenizer .bin for llama2.c checkpoints");
  kvsize_cmd->add_option("--layers", kvsize.layers, "The shape by flags: layers");
  kvsize_cmd->add_option("--heads", kvsize.heads, "Query heads");
  kvsize_cmd->add_option("--kv-heads", kvsize.kv_heads, "KV heads (default: --heads)");
  kvsize_cmd->add_option("--head-dim", kvsize.head_dim, "Head dimension");
  kvsize_cmd->add_option("--window", kvsize.window, "Sliding window of the local layers");
  kvsize_cmd->add_option("--local-layers", kvsize.local_layers, "How many layers have --window");
  kvsize_cmd->add_option("--mla-rank", kvsize.mla_rank,
                         "Multi-head latent attention: the cached latent's rank (kv_lora_rank)");
  kvsize_cmd->add_option("--mla-rope-dim", kvsize.mla_rope_dim,
                         "MLA's decoupled RoPE key dimension (qk_rope_head_dim)")
      ->capture_default_str();
  kvsize_cmd->add_option("-c,--context", kvsize.context,
                         "Tokens per request; 0 = the model's context (4096 when unknown)")
      ->capture_default_str();
  kvsize_cmd->add_option("--batch", kvsize.batch, "Requests at once")->capture_default_str();
  kvsize_cmd->add_option("--dtype", kvsize.dtype, "KV dtype: f32, f16, bf16, fp8, int8, int4")
      ->capture_default_str();
  kvsize_cmd->add_flag("--json", kvsize.json, "One JSON object");
  kvsize_cmd->add_flag("--list", kvsize.list, "List the presets and their sources");

  hinge::cli::PlanArgs planargs;
  auto* plan_cmd = app.add_subcommand(
      "plan", "Requests a deployment holds: weights, KV budget, paged vs contiguous capacity, "
              "f16 / fp8 / int4 KV and a decode roofline, on a GPU preset or this machine");
  plan_cmd->add_option("--model", planargs.model, "A preset (hinge kv-size --list) or a model file")
      ->required();
  plan_cmd->add_option("--gpu", planargs.gpu, "h100-80gb, h200-141gb, a100-80gb, a100-40gb, "
                                              "l4-24gb, mi300x-192gb, or cpu (this machine)")
      ->capture_default_str();
  plan_cmd->add_option("--gpus", planargs.gpus, "Accelerators (tensor parallel: memory and "
                                                "bandwidth add up)")->capture_default_str();
  plan_cmd->add_option("-c,--context", planargs.contexts,
                       "Tokens per request (prompt + output); several give a plan each "
                       "(default 8192)");
  plan_cmd->add_option("--workload", planargs.workload,
                       "JSONL, one request a line with prompt_tokens and output_tokens: plan at "
                       "its length distribution");
  plan_cmd->add_option("--weights", planargs.weights, "Weight dtype: f16, bf16, fp8, int8, int4")
      ->capture_default_str();
  plan_cmd->add_option("--headroom", planargs.headroom,
                       "Share of the memory kept for activations and the runtime")
      ->capture_default_str();
  plan_cmd->add_option("--max-model-len", planargs.max_model_len,
                       "What a contiguous cache reserves per request (default: the model's context)");
  plan_cmd->add_flag("--json", planargs.json, "One JSON array, a plan per context");

  hinge::cli::SimulateArgs sim;
  auto* sim_cmd = hinge::cli::add_simulate_command(app, sim);

  hinge::cli::ContextEvalArgs ctxeval;
  auto* ctxeval_cmd = app.add_subcommand(
      "context-eval",
      "Perplexity per span past the context: window-only, --context-policy shift with sinks, and "
      "sliding window with recompute (StreamingLLM's comparison), teacher-forced");
  ctxeval_cmd->add_option("-m,--model", ctxeval.model, "GGUF file, Hugging Face directory, or llama2.c .bin")
      ->required();
  ctxeval_cmd->add_option("--tokenizer", ctxeval.tokenizer, "Tokenizer .bin for llama2.c checkpoints");
  ctxeval_cmd->add_option("-f,--file", ctxeval.text_file,
                          "Text to feed (UTF-8); default: a synthetic story text of --windows windows");
  ctxeval_cmd->add_option("--windows", ctxeval.windows, "Synthetic text length, in windows")
      ->capture_default_str();
  ctxeval_cmd->add_option("-c,--ctx-size", ctxeval.window, "The context (window) in tokens")
      ->capture_default_str();
  ctxeval_cmd->add_option("--sink-tokens", ctxeval.sink_tokens, "Sink tokens of the shift run")
      ->capture_default_str();
  ctxeval_cmd->add_option("--span", ctxeval.span, "Positions per perplexity span")
      ->capture_default_str();
  ctxeval_cmd->add_option("--block-size", ctxeval.block_size,
                          "Tokens per KV block (sinks and drops are whole blocks)")
      ->capture_default_str();
  ctxeval_cmd->add_option("-t,--threads", ctxeval.threads, "Threads; 0 = all cores")
      ->capture_default_str();
  ctxeval_cmd->add_flag("--json", ctxeval.json, "One JSON object");

  hinge::cli::KvEvalArgs kveval;
  auto* kveval_cmd = app.add_subcommand(
      "kv-eval", "Compare KV storage dtypes with f32 KV, teacher-forced over a text file");
  kveval_cmd->add_option("-m,--model", kveval.model, "GGUF file, Hugging Face directory, or llama2.c .bin")
      ->required();
  kveval_cmd->add_option("--tokenizer", kveval.tokenizer, "Tokenizer .bin for llama2.c checkpoints");
  kveval_cmd->add_option("-f,--file", kveval.text_file, "Text to feed (UTF-8)")->required();
  kveval_cmd->add_option("--dtypes", kveval.dtypes, "Dtypes to compare (default: all)");
  kveval_cmd->add_option("-t,--threads", kveval.threads, "Threads; 0 = all cores")
      ->capture_default_str();
  kveval_cmd->add_flag("--json", kveval.json, "One JSON object per dtype, one per line");

  hinge::cli::ServeArgs serve;
  auto* serve_cmd = app.add_subcommand(
      "serve", "OpenAI-compatible HTTP server (chat, completions, streaming, /metrics, dashboard)");
  serve_cmd->footer(
      "\nAdmission control: each request reserves its worst case in KV blocks\n"
      "(prompt + max_tokens, minus prefix-cache hits) before it runs; requests that do not fit\n"
      "wait in a bounded queue (503 + Retry-After when full), a user over\n"
      "--max-concurrent-per-user gets 429 + Retry-After, and a request larger than\n"
      "--max-request-share of the cache gets 400. 'batch' requests cannot use the\n"
      "--interactive-reserve share. SIGINT/SIGTERM: /health and new requests get 503 while\n"
      "running requests finish (at most --shutdown-grace seconds); then the listener closes,\n"
      "the rest is ended and the process exits 0. Per-client limits (bytes, deadlines, output,\n"
      "connections): docs/serving.md.");
  serve_cmd->add_option("-m,--model", serve.model, "GGUF file, Hugging Face directory, or llama2.c .bin")
      ->required();
  serve_cmd->add_option("--tokenizer", serve.tokenizer, "Tokenizer .bin for llama2.c checkpoints");
  serve_cmd->add_option("--host", serve.host, "Address or host name to listen on (e.g. ::1, localhost)")
      ->capture_default_str();
  serve_cmd->add_option("--port", serve.port, "Port to listen on (0: any free port)")
      ->capture_default_str();
  serve_cmd->add_option("--model-name,--served-model-name", serve.model_names,
                        "Model id clients send and /v1/models lists (default: the file name); "
                        "more names are aliases (--model-name a b, or the flag repeated): "
                        "responses report the first");
  serve_cmd->add_option("--max-queue", serve.max_queue, "Requests waiting for admission at most")
      ->capture_default_str();
  serve_cmd->add_option("--max-concurrent-per-user", serve.max_concurrent_per_user,
                        "Queued + running requests per API key or `user` (0: no limit)")
      ->capture_default_str();
  serve_cmd->add_option("--max-request-share", serve.max_request_share,
                        "Largest share of the KV cache one request may reserve")
      ->capture_default_str();
  serve_cmd->add_option("--interactive-reserve", serve.interactive_reserve,
                        "Share of the KV cache only interactive requests may use")
      ->capture_default_str();
  serve_cmd->add_option("--kv-headroom", serve.kv_headroom,
                        "Share of the KV cache never reserved (slack for running requests)")
      ->capture_default_str();
  serve_cmd->add_option("--queue-timeout", serve.queue_timeout,
                        "Seconds a request may wait for admission before a 503")
      ->capture_default_str();
  serve_cmd->add_option("--shutdown-grace", serve.shutdown_grace,
                        "Seconds running requests get to finish on SIGTERM/SIGINT")
      ->capture_default_str();
  serve_cmd->add_option("--io-threads", serve.io_threads, "HTTP I/O threads")->capture_default_str();
  serve_cmd->add_option("--request-workers", serve.request_workers,
                        "Threads that parse, render and tokenize request bodies")
      ->capture_default_str();
  serve_cmd->add_option("--max-connections", serve.max_connections,
                        "Open connections at most (0: the open-files limit minus a reserve); "
                        "past it idle keep-alive connections make room, else 503")
      ->capture_default_str();
  serve_cmd->add_option("--keep-alive-timeout", serve.keep_alive_timeout,
                        "Seconds a connection may wait for its next request")
      ->capture_default_str();
  serve_cmd->add_option("--header-timeout", serve.header_timeout,
                        "Seconds a request's headers may take to arrive (408 after)")
      ->capture_default_str();
  serve_cmd->add_option("--min-body-rate", serve.min_body_rate,
                        "Slowest mean body upload per second, after --header-timeout of grace")
      ->capture_default_str();
  serve_cmd->add_option("--max-body", serve.max_body, "Largest request body (413 above)")
      ->capture_default_str();
  serve_cmd->add_option("--write-stall-timeout", serve.write_stall_timeout,
                        "Seconds a client may stop reading before its request is aborted")
      ->capture_default_str();
  serve_cmd->add_option("--max-output-buffer", serve.max_output_buffer,
                        "Response bytes queued per connection at most; a client that lets more "
                        "pile up has its request aborted")
      ->capture_default_str();
  serve_cmd->add_option("--cors-origins", serve.cors_origins,
                        "Origins browsers may call from (\"*\" or scheme://host[:port], "
                        "several allowed); default: none");
  serve_cmd->add_flag("-q,--quiet", serve.quiet, "No per-request log lines on stderr");
  serve_cmd->add_option("--metrics-compat", serve.metrics_compat,
                        "vllm: /metrics also exports vLLM's names (vllm:num_requests_waiting, "
                        "vllm:kv_cache_usage_perc, ...) for autoscalers and routers that read them")
      ->check(CLI::IsMember({"vllm"}));
  serve_cmd->add_option("--tool-format", serve.tool_format,
                        "How replies write tool calls: auto (from the chat template), none, hermes, "
                        "llama3_json, mistral, functionary_v3_1, functionary_v3_2, command_r7b, "
                        "command_r_plus, firefunction_v2, deepseek_r1 (docs/tool-calls.md)")
      ->capture_default_str();
  hinge::cli::add_pressure_options(serve_cmd, &serve.pressure, "new requests' max_tokens");
  serve_cmd->add_option("--chat-template-file", serve.chat_template_file,
                        "Jinja chat template to use instead of the model's (as llama-server's), e.g. "
                        "../shared/chat-templates/google-gemma-2-2b-it.jinja");
  serve_cmd->add_option("--tenants", serve.tenants,
                        "Tenants file (JSON: tenants with API key digests, permission versions, "
                        "cache TTL/share, limits; admin keys; public prefixes). Every request "
                        "then needs a key and each tenant gets its own prefix cache; SIGHUP or "
                        "POST /admin/reload re-reads it (docs/security.md)");
  serve_cmd->add_option("--api-key", serve.api_key,
                        "One key every /v1/* request must send as 'Authorization: Bearer KEY' "
                        "(without --tenants; the prefix cache stays shared)");
  serve_cmd->add_option("--api-key-file", serve.api_key_file,
                        "Read the --api-key from this file (its first line): keeps the key out of "
                        "the process list");
  serve_cmd->add_option("--cache-secret-file", serve.cache_secret_file,
                        "32 bytes (raw or 64 hex digits) keying the prefix-cache namespaces; "
                        "default: random at start, so no cache identity outlives the process");
  serve_cmd->add_option("--admin-port", serve.admin_port,
                        "Also listen here for /health, /metrics, /v1/stats, the dashboard (/) and "
                        "/admin/*, with no key needed (0: any free port; default: none, those "
                        "routes need an admin key on the main port when --tenants is given)");
  serve_cmd->add_option("--admin-host", serve.admin_host,
                        "Address of the --admin-port listener (keep it private)")
      ->capture_default_str();
  serve_cmd->add_option("--tls-cert", serve.tls_cert,
                        "PEM certificate (chain) file: serve HTTPS only (TLS 1.2+), so API keys "
                        "never cross the network in clear; needs --tls-key");
  serve_cmd->add_option("--tls-key", serve.tls_key, "PEM private key of --tls-cert");
  serve_cmd->add_option("--cache-ttl", serve.cache_ttl,
                        "Seconds after which a cached prefix block never hits again (0: no "
                        "limit; a tenant's cache_ttl_s overrides it)")
      ->capture_default_str();
  serve_cmd->add_option("--kv-events", serve.kv_events,
                        "Publish KV cache events (blocks stored / removed / cleared) in vLLM's "
                        "format on a ZeroMQ PUB socket bound here, e.g. tcp://127.0.0.1:5557 "
                        "(port 0: any free port), for llm-d / Dynamo routers and hinge route "
                        "(docs/cluster.md)");
  serve_cmd->add_option("--kv-events-replay", serve.kv_events_replay,
                        "Answer replay requests (a start sequence number) on a ZeroMQ ROUTER "
                        "socket bound here, as vLLM's replay endpoint");
  serve_cmd->add_option("--kv-events-format", serve.kv_events_format,
                        "positional (vLLM's tagged arrays) or map (fields by name)")
      ->capture_default_str()->check(CLI::IsMember({"positional", "map"}));
  serve_cmd->add_option("--kv-events-topic", serve.kv_events_topic,
                        "Topic frame of every event message (default: kv@HOST:PORT@MODEL, the "
                        "HTTP address and the served model name)");
  serve_cmd->add_option("--kv-events-medium", serve.kv_events_medium,
                        "The events' medium field (vLLM says GPU for its device cache; hinge's "
                        "cache is in RAM)")
      ->capture_default_str();
  serve_cmd->add_option("--kv-events-buffer", serve.kv_events_buffer,
                        "Event batches kept for replay")
      ->capture_default_str()->check(CLI::Range(int64_t{1}, int64_t{1} << 24));
  serve_cmd->add_option("--kv-disk", serve.kv_disk,
                        "Encrypted disk tier of the KV cache in this directory: finished "
                        "requests' full blocks are sealed (XChaCha20-Poly1305, per-tenant keys "
                        "from the cache secret) into one file each, and a later request "
                        "continuing a prefix evicted from RAM reads them back instead of "
                        "computing them. Give --cache-secret-file so a restarted server can "
                        "read them (docs/cluster.md)");
  serve_cmd->add_option("--kv-disk-size", serve.kv_disk_size,
                        "Most bytes the disk tier holds (least recently used blocks go first), "
                        "e.g. 20GiB")
      ->capture_default_str();
  serve_cmd->add_option("--kv-redis", serve.kv_redis,
                        "Shared KV tier on Redis, redis://[[USER]:PASSWORD@]HOST:PORT[/DB]: the "
                        "same sealed blocks as --kv-disk, one key each (an atomic SET with EX), "
                        "so replicas with the same --cache-secret-file read each other's "
                        "prefixes. Redis down or slow costs hits, never a request "
                        "(docs/cluster.md)");
  serve_cmd->add_option("--kv-redis-ttl", serve.kv_redis_ttl,
                        "Seconds a block lives in Redis (a tenant's cache_ttl_s, when shorter, "
                        "wins; 0: no expiry, leave it to Redis's maxmemory policy)")
      ->capture_default_str()->check(CLI::Range(0.0, 1e9));
  serve_cmd->add_option("--kv-redis-timeout", serve.kv_redis_timeout,
                        "Seconds to wait for Redis to connect or answer before counting it down")
      ->capture_default_str()->check(CLI::Range(0.001, 60.0));
  hinge::cli::add_engine_options(serve_cmd, &serve.engine);

  hinge::cli::RouteArgs route;
  auto* route_cmd = app.add_subcommand(
      "route", "A prefix-aware HTTP router in front of hinge replicas: sends each request where "
               "its prompt's prefix is cached (KV events), else to the least loaded");
  route_cmd->footer(
      "Each replica runs `hinge serve ... --kv-events tcp://HOST:PORT --kv-events-replay "
      "tcp://HOST:PORT` (the router finds the endpoints in its /v1/stats); replicas sharing "
      "--kv-redis also read each other's prefixes. docs/cluster.md");
  route_cmd->add_option("--backend", route.backends, "A replica, http://HOST:PORT (repeat for each)")
      ->required();
  route_cmd->add_option("--host", route.host, "Address to listen on")->capture_default_str();
  route_cmd->add_option("--port", route.port, "Port to listen on (0: any free port)")
      ->capture_default_str()->check(CLI::Range(int64_t{0}, int64_t{65535}));
  route_cmd->add_option("--policy", route.policy,
                        "prefix (cached prefix against load, llm-d's scorers), round-robin or "
                        "least-load")
      ->capture_default_str()->check(CLI::IsMember({"prefix", "round-robin", "least-load"}));
  route_cmd->add_option("--prefix-weight", route.prefix_weight,
                        "Weight of the cached-prefix score (consecutive cached blocks / prompt blocks)")
      ->capture_default_str()->check(CLI::Range(0.0, 1000.0));
  route_cmd->add_option("--queue-weight", route.queue_weight,
                        "Weight of the load score (waiting + in-flight requests, min-max scaled)")
      ->capture_default_str()->check(CLI::Range(0.0, 1000.0));
  route_cmd->add_option("--kv-weight", route.kv_weight, "Weight of the free-KV score (1 - kv_cache_usage_perc)")
      ->capture_default_str()->check(CLI::Range(0.0, 1000.0));
  route_cmd->add_option("--poll-interval", route.poll_interval, "Seconds between polls of each replica's /metrics")
      ->capture_default_str()->check(CLI::Range(0.01, 60.0));
  route_cmd->add_option("--connect-timeout", route.connect_timeout,
                        "Seconds to wait for a replica to accept a connection before trying another")
      ->capture_default_str()->check(CLI::Range(0.01, 60.0));
  route_cmd->add_option("--workers", route.workers, "Requests forwarded at once (more wait in line)")
      ->capture_default_str()->check(CLI::Range(int64_t{1}, int64_t{4096}));
  route_cmd->add_option("--backend-api-key-file", route.backend_api_key_file,
                        "A file holding the replicas' --api-key, for the router's own calls "
                        "(/metrics, /v1/stats, render); clients' keys are passed through");
  route_cmd->add_flag("-q,--quiet", route.quiet, "No log of replicas going down and up");

  hinge::cli::ChatArgs chat;
  auto* chat_cmd = app.add_subcommand(
      "chat", "Interactive chat on the terminal: streaming replies, the prefix cache across turns, "
              "encrypted saved sessions");
  chat_cmd->footer(
      "\nEach line is a turn; the reply streams, then a stats line on stderr shows the prompt's "
      "cached\ntokens. Commands: /reset, /save NAME, /load NAME, /sessions, /logout, /quit, "
      "/help.\nSaved sessions (the conversation and its KV blocks) are encrypted with libsodium "
      "secretstream;\nthe key comes from a passphrase (Argon2id; asked on the first /save or "
      "/load, echo off) or\n--key-file. /logout deletes them, zeroes the KV cache and destroys "
      "the key (docs/bounded-memory.md).");
  chat_cmd->add_option("-m,--model", chat.model, "GGUF file, Hugging Face directory, or llama2.c .bin")
      ->required();
  chat_cmd->add_option("--tokenizer", chat.tokenizer, "Tokenizer .bin for llama2.c checkpoints");
  chat_cmd->add_option("--system", chat.system_prompt, "System prompt of the conversation");
  chat_cmd->add_option("--chat-template-file", chat.chat_template_file,
                       "Jinja chat template to use instead of the model's (without either, turns "
                       "are plain lines)");
  chat_cmd->add_option("-n,--n-predict", chat.n_predict, "Reply tokens at most")
      ->capture_default_str()->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  chat_cmd->add_option("-s,--seed", chat.seed, "Random seed (default: random)");
  chat_cmd->add_option("--session-dir", chat.session_dir,
                       "Folder of saved sessions (default: $XDG_DATA_HOME/hinge/sessions or "
                       "~/.local/share/hinge/sessions)");
  chat_cmd->add_option("--key-file", chat.key_file,
                       "32-byte key (raw or 64 hex digits) for saved sessions instead of a "
                       "passphrase; make one with: head -c 32 /dev/urandom > FILE");
  chat_cmd->add_flag("--no-session-kv", chat.no_session_kv,
                     "/save writes the conversation only, not its KV blocks (a /load then "
                     "computes the history again on the next turn)");
  chat_cmd->add_option("--load", chat.load, "Load this saved session at start (as /load NAME)");
  chat_cmd->add_option("--summary-instruction", chat.summary_instruction,
                       "--context-policy summarize: what the model is asked to write");
  chat_cmd->add_option("--summary-tokens", chat.summary_tokens,
                       "--context-policy summarize: the summary's length at most, in tokens")
      ->capture_default_str();
  chat_cmd->add_flag("--no-stats", chat.no_stats, "No stats line after each reply");
  add_sampling_options(chat_cmd, chat.sampling);
  hinge::cli::add_engine_options(chat_cmd, &chat.engine);
  hinge::cli::add_pressure_options(chat_cmd, &chat.pressure, "a reply");
  chat_cmd->get_option("--context-policy")
      ->description("When the conversation outgrows --ctx-size: 'error' refuses the turn (say "
                    "/reset); 'shift' drops the oldest turns (the system prompt stays) and lets "
                    "a long reply roll with --sink-tokens; 'summarize' replaces the oldest turns "
                    "by a summary the model writes");
  chat_cmd->get_option("--max-num-seqs")
      ->description("Ignored by chat, which runs one reply at a time")->default_str("");

  auto* keygen_cmd = app.add_subcommand(
      "keygen", "Print a fresh API key and the digest line for a tenants file (--tenants)");

  CLI11_PARSE(app, argc, argv);

  // Commands report errors as Status; this only catches what must never escape (e.g. an
  // allocation failure), so the user still gets one line instead of an abort.
  try {
    if (run_cmd->parsed()) return hinge::cli::run_command(run);
    if (kveval_cmd->parsed()) return hinge::cli::kv_eval_command(kveval);
    if (ctxeval_cmd->parsed()) return hinge::cli::context_eval_command(ctxeval);
    if (kvsize_cmd->parsed()) return hinge::cli::kv_size_command(kvsize);
    if (plan_cmd->parsed()) return hinge::cli::plan_command(planargs);
    if (sim_cmd->parsed()) return hinge::cli::simulate_command(sim);
    if (tok_cmd->parsed()) return hinge::cli::tokenize_command(tok);
    if (info_cmd->parsed()) return hinge::cli::info_command(info);
    if (conv_cmd->parsed()) return hinge::cli::convert_command(conv);
    if (synth_cmd->parsed()) return hinge::cli::synth_command(synth);
    if (bench_cmd->parsed())
      return bench.sweep ? hinge::cli::bench_sweep_command(bench) : hinge::cli::bench_command(bench);
    if (serve_cmd->parsed()) return hinge::cli::serve_command(serve);
    if (route_cmd->parsed()) return hinge::cli::route_command(route);
    if (chat_cmd->parsed()) return hinge::cli::chat_command(chat);
    if (keygen_cmd->parsed()) return hinge::cli::keygen_command();
  } catch (const std::bad_alloc&) {
    return hinge::cli::fail("out of memory");
  } catch (const std::exception& e) {
    return hinge::cli::fail(std::string("unexpected error: ") + e.what());
  }
  return 1;
}
