// `hinge simulate`'s flags (its command: cli/cmd_simulate.cpp, cli/cmd_simulate_sweep.cpp).
#include <CLI/CLI.hpp>

#include "cli/commands.h"

namespace hinge::cli {

CLI::App* add_simulate_command(CLI::App& app, SimulateArgs& a) {
  CLI::App* c = app.add_subcommand(
      "simulate",
      "A workload through the real scheduler and KV cache manager with a roofline "
      "cost per step: throughput, TTFT, time per token, prefix hits, preemptions");
  c->add_option("--model", a.model, "A preset (hinge kv-size --list) or a model file")->required();
  c->add_option("--gpu", a.gpu,
                "cpu (this machine's measured profile) or h100-80gb, "
                "h200-141gb, a100-80gb, a100-40gb, l4-24gb, mi300x-192gb")
      ->capture_default_str();
  c->add_option("--gpus", a.gpus, "Accelerators (bandwidth and peak add up)")
      ->capture_default_str();
  c->add_option("-t,--threads", a.threads, "--gpu cpu: the profile of this many threads (0: all)");
  c->add_option("--trace", a.trace,
                "JSONL workload: arrival_s, prompt_tokens, output_tokens, prefix_id, "
                "prefix_tokens, priority per line");
  c->add_option("--requests", a.requests, "Generated requests (as hinge bench)")
      ->capture_default_str();
  c->add_option("--prompt-tokens", a.prompt_tokens, "Own prompt tokens each")
      ->capture_default_str();
  c->add_option("--gen-tokens", a.gen_tokens, "Tokens generated each")->capture_default_str();
  c->add_option("--shared-prefix", a.shared_prefix, "Tokens every prompt starts with")
      ->capture_default_str();
  c->add_flag("--mixed-lengths", a.mixed_lengths, "Own prompt and output uniform up to the above");
  c->add_option("--rate", a.rate, "Arrivals per second (0: all at once)")->capture_default_str();
  c->add_option("-s,--seed", a.seed, "Seed of the generated prompts")->capture_default_str();
  c->add_option("--kv-memory", a.kv_memory,
                "KV cache size (0: what the accelerator leaves, "
                "or room for every request)")
      ->capture_default_str();
  c->add_option("--kv-dtype", a.kv_dtype, "KV dtype: f32, f16, fp8, int8, int4")
      ->capture_default_str();
  c->add_option("--block-size", a.block_size, "Tokens per KV block")->capture_default_str();
  c->add_option("--max-batched-tokens", a.max_batched_tokens, "Token budget per step")
      ->capture_default_str();
  c->add_option("--max-num-seqs", a.max_num_seqs, "Running sequences at most")
      ->capture_default_str();
  c->add_option("--bandwidth-share", a.bandwidth_share,
                "Share of the bandwidth a step achieves (calibration)")
      ->capture_default_str();
  c->add_option("--compute-share", a.compute_share,
                "Share of the peak prefill achieves (calibration)")
      ->capture_default_str();
  c->add_option("--step-overhead-ms", a.step_overhead_ms, "Fixed cost per step (calibration)")
      ->capture_default_str();
  c->add_option("--bandwidth-gbps", a.bandwidth_gbps,
                "--gpu cpu: this bandwidth (GB/s) instead of the machine profile's");
  c->add_option("--peak-gflops", a.peak_gflops,
                "--gpu cpu: this peak (GFLOP/s) instead of the machine profile's");
  c->add_option("--decode-peak-gflops", a.decode_peak_gflops,
                "--gpu cpu: the rate of decode tokens' matrices (GFLOP/s; small batches "
                "run below the prefill peak)");
  c->add_option("--attention-gflops", a.attention_gflops,
                "--gpu cpu: the rate of attention's FLOPs (GFLOP/s)");
  c->add_flag("--json", a.json, "One JSON object");
  c->add_flag("--steps", a.json_steps, "With --json: every step (times, tokens, KV blocks)");
  c->add_flag("--admission", a.admission,
              "Arrivals go through hinge serve's admission control first (worst-case KV "
              "reservations, a bounded queue, refusals by reason)");
  c->add_option("--max-queue", a.max_queue, "--admission: waiting requests at most")
      ->capture_default_str();
  c->add_option("--queue-timeout", a.queue_timeout, "--admission: seconds a request may wait")
      ->capture_default_str();
  c->add_option("--max-request-share", a.max_request_share,
                "--admission: the largest share of the KV pool one request may reserve")
      ->capture_default_str();
  c->add_option("--svg", a.svg,
                "Write an SVG chart: KV blocks, requests and where each "
                "step's time went, over time");
  c->add_option("--workload", a.workload,
                "bench (hinge bench's requests, the flags above), chat (--requests conversations "
                "of --turns messages, each turn the whole conversation so far, sent --think-s "
                "after the answer), rag (--documents of --document-tokens, Zipf popularity, a "
                "question of --prompt-tokens each) or burst (--bursts of --requests prompts, "
                "--burst-interval apart)")
      ->capture_default_str();
  c->add_option("--turns", a.workload_spec.turns, "--workload chat: messages per conversation")
      ->capture_default_str();
  c->add_option("--think-s", a.workload_spec.think_s,
                "--workload chat: seconds between an answer and the next message")
      ->capture_default_str();
  c->add_option("--documents", a.workload_spec.documents, "--workload rag: documents")->capture_default_str();
  c->add_option("--document-tokens", a.workload_spec.document_tokens, "--workload rag: tokens per document")
      ->capture_default_str();
  c->add_option("--zipf", a.workload_spec.zipf, "--workload rag: popularity exponent (0: uniform)")
      ->capture_default_str();
  c->add_option("--bursts", a.workload_spec.bursts, "--workload burst: bursts")->capture_default_str();
  c->add_option("--burst-interval", a.workload_spec.interval_s, "--workload burst: seconds between bursts")
      ->capture_default_str();
  c->add_flag("--sweep", a.sweep,
              "Predict hinge bench --sweep's grid: decode tok/s of B sequences at context L per KV "
              "dtype (--gen-tokens each), as a table, --json or --svg");
  c->add_option("--sweep-batches", a.sweep_batches, "--sweep: batch sizes")->capture_default_str();
  c->add_option("--sweep-contexts", a.sweep_contexts, "--sweep: context lengths")
      ->capture_default_str();
  c->add_option("--sweep-dtypes", a.sweep_dtypes, "--sweep: KV dtypes")->capture_default_str();
  c->add_option("--compare", a.compare,
                "--sweep: hinge bench --sweep --json output to set beside the prediction (ratios; "
                "its points on the --svg chart)");
  return c;
}

}  // namespace hinge::cli
