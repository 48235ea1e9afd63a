// hinge's C++ engine API: continuous batching over a paged, prefix-cached KV cache.
//
//   auto engine = hinge::Engine::create(model, &tokenizer, config).value();
//   hinge::RequestId id = engine->add_request({.prompt_token_ids = ids, ...}).value();
//   std::vector<hinge::RequestDelta> deltas;
//   while (engine->has_unfinished()) {
//     HINGE_RETURN_IF_ERROR(engine->step(&deltas));   // one forward pass for the whole batch
//     for (auto& d : deltas) ...                      // new tokens/text per (request, sample)
//   }
//
// Each step: the scheduler picks requests and token counts under one token budget, copy-on-write
// block copies are applied, every scheduled token of every request goes through the model in
// one forward pass (each weight matrix read once per step), one token is sampled per request
// that reached its end, and the scheduler advances, finishes or preempts (by recompute).
// The LM head runs for the sampling rows only, plus every prompt row of requests that asked for
// prompt logprobs (the logits buffer grows once to fit them; other steps never allocate).
//
// Threading: not thread-safe. One thread (the engine thread) owns an Engine and calls every
// method; a server wraps it with a request queue and per-request output channels.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "common/status.h"
#include "engine/sampling_params.h"
#include "kv/kv_events.h"
#include "kv/kv_tier.h"
#include "kv/kv_ids.h"
#include "kv/kv_spec.h"
#include "kv/kv_stats.h"
#include "sched/request_types.h"

namespace hinge {

class StepProfile;
class Tokenizer;
struct LoadedModel;

using kv::CacheNamespace;
using kv::CacheScope;
using kv::KvDtype;
using kv::RequestId;
using sched::ContextPolicy;
using sched::FinishReason;
using sched::Priority;

// Speculative decoding (engine/spec_decode.h): none, prompt lookup (n-gram drafts from the
// request's own tokens, no extra model) or a draft model (EngineConfig::draft_model).
enum class SpecMode : uint8_t { kNone, kNgram, kDraft };
inline constexpr int32_t kMaxSpecTokens = 16;  // draft tokens per verification, at most

struct EngineConfig {
  int32_t threads = 1;
  // Run as many of the threads as there are free cores (pressure/thread_adapter.h): fewer while
  // other programs take cores, all again when they are free. The CLI turns it on (off with
  // --no-adapt-threads); off here so that a library caller's (and a test's) kernels always
  // split work the same way.
  bool adapt_threads = false;
  std::string cpu_root = "/";              // where proc/stat and cgroup files are read (tests)
  // KV arena size. 0: kv_memory_fraction of the memory available after the weights.
  int64_t kv_memory_bytes = 0;
  double kv_memory_fraction = 0.5;
  int32_t block_size = 16;                 // tokens per KV block
  KvDtype k_dtype = KvDtype::kF16;
  KvDtype v_dtype = KvDtype::kF16;
  int32_t max_batched_tokens = 512;        // token budget per step
  int32_t max_num_seqs = 64;               // running sequences at most
  int32_t max_model_len = 0;               // 0: the model's context length
  // KV groups (kv/kv_spec.h) the layers are split into, as consecutive ranges; each request
  // holds a block table per group. Every group is full attention today, so more than one
  // only costs bookkeeping (--kv-groups, for tests and to measure that cost); sliding-window
  // layers will be groups of their own. At most the model's layer count.
  int32_t kv_groups = 1;
  // Hard budget for the process's resident memory (engine/memory_budget.h): weights, KV arena,
  // scratch and a runtime reserve stay under it; the KV arena gets what remains (at most
  // kv_memory_bytes when that is set too). 0: none. memory_budget_source names it in messages.
  int64_t memory_budget_bytes = 0;
  std::string memory_budget_source = "--memory-budget";
  // With a memory budget, the budget is also held while running (kv/kv_memory_guard.h): RSS is
  // read between steps, the KV blocks usable shrink when the rest of the process grew, and the
  // pages of free KV blocks beyond those in use plus this low watermark go back to the OS
  // (cached ones once no request is left), so RSS follows use. -1: 1/8 of the KV arena.
  // The context (max_model_len) is lowered to what the budget's arena holds for one sequence.
  int64_t kv_low_watermark_bytes = -1;
  // A sequence that reaches max_model_len: kError finishes it with kLength (a longer request is
  // refused); kShift keeps its first ceil(sink_tokens / block) blocks and the most recent ones
  // and drops whole blocks in between, positions re-assigned within the cache (StreamingLLM),
  // so max_new_tokens may exceed the context (--context-policy, --sink-tokens). Full-attention
  // models only; the context must hold the sinks and two more blocks.
  ContextPolicy context_policy = ContextPolicy::kError;
  int32_t sink_tokens = 4;
  bool enable_prefix_cache = true;         // false: --no-prefix-cache
  bool kv_debug = false;                   // print the block map each step (HINGE_KV_DEBUG=1)
  // Time each step's phases (Engine::step_profile, prefill_profile; `hinge run --profile`).
  bool profile_steps = false;
  // False: deltas carry token ids only (no text, stop strings ignored; EOS still ends a
  // sample) — the server detokenizes and matches stop strings on its own threads.
  bool detokenize = true;
  // KV events (kv/kv_events.h): when set, the prefix cache's stored / removed / cleared events
  // go to this sink, an all-cleared first, then at the end of every step and of each call
  // below that changes the cache (purge, reset, import, wipe, pressure). Called on the engine
  // thread; must outlive the engine.
  kv::KvEventSink* kv_event_sink = nullptr;
  // Speculative decoding (--speculative, --spec-k): a decoding request proposes up to spec_k
  // draft tokens (fewer as its acceptance falls) that its next step verifies together with its
  // next token (a grammar's mask following the accepted drafts). Requests with forced tokens
  // decode one token at a time.
  SpecMode spec_mode = SpecMode::kNone;
  int32_t spec_k = 4;            // [1, 16]
  int32_t spec_ngram_min = 2;    // prompt lookup: n-gram lengths tried, longest first
  int32_t spec_ngram_max = 4;
  // kDraft: the draft model (same vocabulary as the model; engine/draft_model.h), owned by the
  // caller and outliving the engine. Its KV cache holds as many tokens as the model's.
  const LoadedModel* draft_model = nullptr;
  // Benchmarks only (HINGE_SPEC_VERIFY_K=k in the environment of the CLI): every decoding
  // request verifies exactly k drafts each step (copies of its last token, almost never
  // accepted), which measures what verifying k tokens costs against one decode step.
  int32_t spec_verify_k = 0;

  Status validate() const;
};

struct GenerateRequest {
  std::vector<int32_t> prompt_token_ids;   // non-empty (start from BOS for an empty prompt)
  SamplingParams sampling;
  int32_t max_new_tokens = 256;
  int32_t n = 1;                           // parallel samples sharing the prompt's KV blocks
  // Log-probabilities of each sampled token (log-softmax of the model's raw logits) and of the
  // `logprobs` most likely tokens at that position; -1: none, 0: the sampled token's only.
  int32_t logprobs = -1;
  // Prompt log-probabilities (OpenAI's echo + logprobs, vLLM's prompt_logprobs): -1 none; k in
  // [0, 20]: the log-probability of every prompt token after the first given the ones before
  // it, and the k most likely tokens at that position (RequestDelta::prompt_logprobs). Such a
  // request computes the LM head at every prompt position (others: only the last) and never
  // adopts a prefix-cache hit (every position must be computed); its blocks are still cached.
  int32_t prompt_logprobs = -1;
  Priority priority = Priority::kInteractive;
  // Prefix cache sharing scope: namespace and owner (kv_ids.h), derived by the server from the
  // tenant, never from client input.
  CacheScope cache_scope{};
  // ContextPolicy::kShift keeps these leading tokens besides the sinks (a system prompt).
  int32_t keep_tokens = 0;
  // ContextPolicy::kShift drops whole turns when it can: where the prompt's chat turns start
  // (strictly increasing token positions within the prompt; sched::RequestParams::turn_starts).
  std::vector<int32_t> turn_starts{};
  // Teacher forcing (evaluation, n == 1): output token i is forced_tokens[i] instead of the
  // sampler's choice, its log-probability under the model reported as usual (logprobs >= 0);
  // at least max_new_tokens of them. Empty: sample.
  std::vector<int32_t> forced_tokens{};
};

struct RequestUsage {
  int32_t prompt_tokens = 0;
  int32_t cached_tokens = 0;      // prompt tokens found in the prefix cache
  int32_t completion_tokens = 0;  // of this sample
  // ContextPolicy::kShift: tokens of this sample's sequence dropped from the cache so far
  // (the response is "truncated" when > 0).
  int32_t dropped_tokens = 0;
};

struct TokenLogprob {
  int32_t token = 0;
  float logprob = 0;
};

// Log-probabilities at one generated position.
struct PositionLogprobs {
  TokenLogprob sampled;
  std::vector<TokenLogprob> top;  // most likely first (GenerateRequest::logprobs of them)
};

// What one step produced for one sample of one request.
struct RequestDelta {
  RequestId id;
  int32_t index = 0;                 // sample index in [0, n)
  std::vector<int32_t> token_ids;    // new tokens (EOS is not included)
  std::string text;                  // new text safe to show (complete UTF-8, no stop string)
  FinishReason finish_reason = FinishReason::kNone;  // kNone while the sample continues
  RequestUsage usage;                // cumulative for this sample
  std::vector<PositionLogprobs> logprobs;  // one per token_ids entry when requested
  // GenerateRequest::prompt_logprobs >= 0: in each sample's first delta that has a sampled
  // token (EOS included), the prompt_token_ids.size() - 1 entries of prompt positions 1..end:
  // entry i holds prompt token i + 1 (as `sampled`) given tokens 0..i. Empty otherwise.
  std::vector<PositionLogprobs> prompt_logprobs{};
  bool finished() const { return finish_reason != FinishReason::kNone; }
};

struct EngineStats {
  int64_t steps = 0;
  int64_t prompt_tokens_computed = 0;  // prefill work actually done (prefix hits excluded)
  int64_t output_tokens = 0;
  // Speculative decoding: verifications (request-steps with drafts), draft tokens verified and
  // accepted. Tokens per verification = (accepted + verifications) / verifications.
  int64_t spec_verifications = 0;
  int64_t spec_draft_tokens = 0;
  int64_t spec_accepted_tokens = 0;
  // kDraft: the draft model's forward passes, tokens it computed (catch-up and drafts), time
  // spent proposing, and its KV arena.
  int64_t spec_draft_model_passes = 0;
  int64_t spec_draft_model_tokens = 0;
  double spec_draft_model_seconds = 0;
  int64_t spec_draft_model_kv_bytes = 0;
  int64_t preemptions = 0;
  int64_t context_shifts = 0;          // ContextPolicy::kShift drops, and the tokens dropped
  int64_t context_dropped_tokens = 0;
  int32_t max_position = -1;           // the highest position any step computed (-1: none)
  int32_t running = 0;
  int32_t waiting = 0;
  int32_t kv_blocks_total = 0;
  int32_t kv_blocks_used = 0;          // referenced by live requests
  int32_t kv_blocks_peak = 0;          // most ever referenced at once
  int64_t kv_bytes_total = 0;
  // What cached KV blocks are keyed under besides their tokens: model, KV format and
  // calibration (kv_calibration: a digest of the fp8 scales and K-shift means fixed at engine
  // start; 0 for plain float KV, which has none).
  uint64_t kv_fingerprint = 0;
  uint64_t kv_calibration = 0;
  int64_t kv_bytes_per_block = 0;
  // Memory pressure (set_kv_block_limit): blocks taken out of use (not in kv_blocks_used),
  // the usable limit, what RSS fell by when their pages went back to the OS (measured), the
  // scheduler's limits now.
  int32_t kv_blocks_withheld = 0;
  int32_t kv_blocks_limit = 0;
  int64_t kv_bytes_released = 0;
  // The memory budget held while running (EngineConfig::kv_low_watermark_bytes): the budget
  // (0: none), RSS and the KV arena's resident bytes at the last reading, the highest RSS
  // read, the blocks the budget leaves (the total: no limit), readings with a limit below the
  // total, and the bytes of free KV blocks returned to the OS beyond the low watermark.
  int64_t memory_budget_bytes = 0;
  int64_t rss_bytes = 0;
  int64_t rss_peak_bytes = 0;
  int64_t kv_resident_bytes = 0;
  int32_t memory_budget_kv_limit_blocks = 0;
  int64_t memory_budget_limited = 0;
  int64_t memory_budget_overshoots = 0;  // steps the limit gave way so one request could go on
  int64_t kv_trimmed_bytes = 0;
  int64_t kv_low_watermark_bytes = 0;
  int32_t max_num_seqs_now = 0;
  int32_t max_batched_tokens_now = 0;
  // CPU contention (adapt_threads): compute threads in use now, other programs' use of our
  // cores at the last reading (cores), how often the thread count changed.
  int32_t threads_active = 1;
  double cpu_others_cores = 0;
  int64_t thread_changes = 0;
  int64_t kv_slots_allocated = 0;      // token slots of the blocks live requests hold, now
  int64_t kv_slots_used = 0;           // of which hold a token
  kv::KvCacheStats kv;                 // prefix queries/hits, evictions, copy-on-write copies
  // Wall time inside step() and, of it, in drawing the sampled tokens (penalties, the chain,
  // logprobs; on the pool): what sampling costs next to the forward pass, in the same run.
  double step_seconds = 0;
  double sample_seconds = 0;
  // The weights copied into this CPU's packed layouts at start (kernels/kernel_choice.h): their
  // bytes and the wall time the copy took (0 / 0 where nothing was packed).
  int64_t weights_packed_bytes = 0;
  double weights_pack_seconds = 0;
  // Constrained decoding: the CPU seconds spent computing grammar masks (summed over the
  // threads that sample, so it may exceed sample_seconds), and the masks computed.
  double mask_seconds = 0;
  int64_t masks = 0;
  int64_t mask_cache_hits = 0;  // masks copied from an earlier one of the same grammar state
  // The KV tier (EngineConfig::kv_tier): requests that waited for a read, blocks brought back
  // into RAM, blocks written, blocks not queued for writing (queue full), the time waited.
  int64_t kv_tier_fetches = 0;
  int64_t kv_tier_restored_blocks = 0;
  int64_t kv_tier_written_blocks = 0;
  int64_t kv_tier_dropped_writes = 0;
  int64_t kv_tier_queued_bytes = 0;  // waiting to be written now
  double kv_tier_wait_seconds = 0;
};

class Engine {
 public:
  // Sizes the KV arena, allocates it and every scratch buffer. The model and tokenizer must
  // outlive the engine. tokenizer may be null: no text in deltas, no EOS or stop strings.
  static StatusOr<std::unique_ptr<Engine>> create(const LoadedModel& model,
                                                  const Tokenizer* tokenizer,
                                                  const EngineConfig& config);
  virtual ~Engine() = default;

  // Queues a request. Errors (nothing queued): empty prompt, token id out of range, prompt +
  // max_new_tokens beyond max_model_len, bad sampling params, n < 1, a request that could never
  // fit the KV arena even alone.
  virtual StatusOr<RequestId> add_request(GenerateRequest request) = 0;
  // The validation add_request does, without queuing anything.
  virtual Status check_request(const GenerateRequest& request) const = 0;
  // Full KV blocks of `prompt` found in the prefix cache of scope's namespaces now (a query: no
  // counter moves); 0 with the prefix cache off.
  virtual int32_t cached_prefix_blocks(std::span<const int32_t> prompt,
                                       const CacheScope& scope) = 0;
  // Prefix-cache owners (tenants; kv/block_pool.h). Policy: at most cache_share of the pool
  // cached-but-unreferenced for this owner (its own least recently used go first past it), and
  // entries older than ttl_s seconds (0: no limit) never hit again.
  virtual void set_cache_owner_policy(int32_t owner, double cache_share, double ttl_s) = 0;
  // Drops every cached block of the owner now; its running requests publish no more. Returns
  // the blocks dropped.
  virtual int32_t purge_cache_owner(int32_t owner) = 0;
  // The owner's permission version (CacheScope::epoch) is now `current`: entries made under
  // another are dropped, its running requests of another publish no more. Returns how many.
  virtual int32_t retire_cache_epochs(int32_t owner, uint64_t current) = 0;
  // purge_cache_owner, and the owner's requests never cache again (its tenant was removed).
  virtual int32_t retire_cache_owner(int32_t owner) = 0;
  // Drops every cached prefix block of every owner (running requests keep theirs); a KV event
  // sink sees one AllBlocksCleared. Returns the blocks freed.
  virtual int32_t reset_prefix_cache() = 0;
  // A KV tier (kv/kv_tier.h: disk, Redis), before the first request: finished requests' full
  // blocks are written to it and a new request's prompt continuing beyond its RAM hit is read
  // back from it before it is scheduled (engine/kv_tiering.h). Errors: the prefix cache is
  // off, sliding-window layers (no whole prefix is kept). The store must outlive the engine.
  virtual Status attach_kv_tier(kv::KvTierStore* store) = 0;
  // Bytes of one block as a tier stores it (every KV group's block).
  virtual int64_t kv_tier_block_bytes() const = 0;
  // Waits until every block queued for the KV tier reached it (tests, tools).
  virtual void flush_kv_tier() = 0;
  // Finishes a live request (all its samples) with kAborted; a final delta for each sample is
  // returned by the next step(). False when the id is unknown or already finished.
  virtual bool abort(RequestId id) = 0;
  // Finishes one sample (index in [0, n)) of a live request with kAborted; the others go on.
  // False when unknown, already finished, or before the request forked into its samples (its
  // prompt is still being computed: use abort()).
  virtual bool abort_sample(RequestId id, int32_t index) = 0;
  // Runs one step; `deltas` is cleared, then receives one entry per (request, sample) that got
  // tokens or finished this step.
  // Errors: the forward pass failed (a bug, a broken model). Every sample of the requests that
  // step scheduled is then finished with kError (their KV freed; the final deltas are in
  // `deltas`, with those of aborts and earlier finishes), the rest is untouched, and the engine
  // stays usable: step() again serves the others and any new request.
  virtual Status step(std::vector<RequestDelta>* deltas) = 0;
  virtual bool has_unfinished() const = 0;

  virtual EngineStats stats() const = 0;
  // Where the decode steps' time went, phase by phase (EngineConfig::profile_steps); null
  // when off.
  virtual const StepProfile* step_profile() const = 0;
  // The same for the other steps: prefill, and prefill chunks batched with decodes.
  virtual const StepProfile* prefill_profile() const = 0;
  // The KV block map, one char per block (kv::BlockPool::render_map's legend), no newlines.
  virtual std::string kv_block_map() const = 0;
  virtual int32_t max_model_len() const = 0;
  // The memory budget's breakdown, one line (EngineConfig::memory_budget_bytes); empty without.
  virtual const std::string& memory_breakdown() const = 0;

  // Memory pressure (pressure/pressure_policy.h decides; each applies at once):
  // At most `blocks` of the KV arena usable: free blocks beyond it are withheld and their pages
  // returned to the OS, now and as requests free blocks; a block a request holds is never
  // taken. The total (or more) lifts the limit.
  virtual void set_kv_block_limit(int32_t blocks) = 0;
  // Evicts every cached block no request uses and returns the pages of all free blocks.
  // Returns the bytes released.
  virtual int64_t shrink_kv_cache() = 0;
  // The scheduler's running-sequence and per-step token limits, at most the configured ones
  // (0: the configured one).
  virtual void set_step_limits(int32_t max_num_seqs, int32_t max_batched_tokens) = 0;
  // Saved sessions (kv/kv_transfer.h), between steps:
  // Appends the raw bytes of the full blocks of `tokens` cached now in scope (the longest cached
  // run from the start; per block every KV group's block) to *out; returns how many blocks.
  // Error for models with sliding-window layers.
  virtual StatusOr<int32_t> export_prefix_kv(std::span<const int32_t> tokens,
                                             const CacheScope& scope,
                                             std::vector<uint8_t>* out) = 0;
  // Puts exported blocks back (same kv_fingerprint, same tokens) as prefix-cache entries of
  // scope, so a prompt starting with `tokens` hits them; returns the prefix's blocks cached now
  // (fewer than given when free blocks run out).
  virtual StatusOr<int32_t> import_prefix_kv(std::span<const int32_t> tokens,
                                             const CacheScope& scope,
                                             std::span<const uint8_t> bytes) = 0;
  // Evicts every cached block no request uses, zeroes every free block's bytes and returns
  // their pages to the OS (a logout). Returns the bytes zeroed.
  virtual int64_t wipe_kv_cache() = 0;
  virtual const kv::KvSpec& kv_spec() const = 0;
  virtual const EngineConfig& config() const = 0;

  // Test hook: the next n steps that have work fail as a broken forward pass would (step()
  // returns an error), before the model runs or any KV is written. The one method that is safe
  // from any thread (an atomic counter), so a test can arm it on an engine an EngineThread owns.
  virtual void fail_next_steps_for_testing(int32_t n) = 0;
};

}  // namespace hinge
