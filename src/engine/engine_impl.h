// EngineImpl: the Engine (hinge/engine.h). Its members and small operations are here; the
// constructor, requests and stats are in engine.cpp, the step (schedule -> copy-on-write ->
// one forward pass -> prompt logprobs -> sample -> update) in engine_step.cpp. Internal to
// src/engine/.
#pragma once

#include <fmt/format.h>
#include <xxhash.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <optional>
#include <unordered_map>

#include "common/thread_pool.h"
#include "engine/cache_identity.h"
#include "engine/constrained.h"
#include "engine/draft_model.h"
#include "engine/kv_budget.h"
#include "engine/kv_calibration.h"
#include "engine/kv_tiering.h"
#include "engine/memory_budget.h"
#include "engine/request_check.h"
#include "engine/sample_state.h"
#include "hinge/engine.h"
#include "kv/kv_arena.h"
#include "kv/kv_memory_guard.h"
#include "kv/kv_reclaimer.h"
#include "kv/kv_transfer.h"
#include "model/loaded_model.h"
#include "model/rope_rotations.h"
#include "model/transformer.h"
#include "pressure/thread_adapter.h"
#include "sched/scheduler.h"
#include "tokenizer/tokenizer.h"

namespace hinge::engine_detail {

// Where one scheduled request's logits are in this step's logits buffer.
struct StepRows {
  int32_t prompt_row = 0;       // first row of its prompt-logprob positions
  int32_t prompt_position = 0;  // the position of that row
  int32_t num_prompt_rows = 0;  // 0: none this step
  int32_t sample_row = -1;      // the row it samples from; -1: it does not sample
  // Speculative decoding: rows sample_row .. sample_row + num_spec are its next token's and
  // after each draft's.
  int32_t num_spec = 0;
};

class EngineImpl final : public Engine {
 public:
  EngineImpl(const LoadedModel& model, const Tokenizer* tokenizer, const EngineConfig& config,
             const kv::KvSpec& spec, const KvBudgetInput& budget, int32_t max_model_len);

  Status check_request(const GenerateRequest& req) const override {
    return check_generate_request(req, model_.config, max_model_len_, config_.max_num_seqs,
                                  config_.context_policy);
  }

  int32_t cached_prefix_blocks(std::span<const int32_t> prompt, const CacheScope& scope) override {
    sched_.set_cache_time(seconds_since_created());  // TTLs as of now, not the last step
    const kv::ComputedBlocks hit = sched_.kv().get_computed_blocks(prompt, scope);
    // Blocks the request would adopt (local groups' entries behind their window are not).
    return static_cast<int32_t>(
        std::count_if(hit.blocks.begin(), hit.blocks.end(),
                      [](kv::BlockId b) { return b != kv::kReleasedBlock; }));
  }

  void set_cache_owner_policy(int32_t owner, double cache_share, double ttl_s) override {
    HINGE_CHECK(cache_share >= 0 && cache_share <= 1 && ttl_s >= 0);
    const double blocks = cache_share * sched_.kv().pool().num_blocks();
    sched_.set_cache_owner_policy(
        owner, cache_share >= 1 ? INT32_MAX : static_cast<int32_t>(blocks), ttl_s);
  }
  int32_t purge_cache_owner(int32_t owner) override {
    return flushed(sched_.purge_cache_owner(owner));
  }
  int32_t retire_cache_epochs(int32_t owner, uint64_t current) override {
    return flushed(sched_.retire_cache_owner_epochs(owner, current));
  }
  int32_t retire_cache_owner(int32_t owner) override {
    return flushed(sched_.retire_cache_owner(owner));
  }
  int32_t reset_prefix_cache() override { return flushed(sched_.reset_prefix_cache()); }

  std::string kv_block_map() const override {
    std::string map = sched_.kv().pool().render_map(1 << 30);
    std::erase(map, '\n');
    return map;
  }

  int32_t max_model_len() const override { return max_model_len_; }
  const std::string& memory_breakdown() const override { return memory_breakdown_; }

  void set_kv_block_limit(int32_t blocks) override {
    reclaimer_.set_limit(blocks);
    flush_events();
  }
  int64_t shrink_kv_cache() override { return flushed(reclaimer_.shrink()); }
  void set_step_limits(int32_t max_num_seqs, int32_t max_batched_tokens) override {
    sched_.set_limits(max_num_seqs, max_batched_tokens);
  }

  StatusOr<RequestId> add_request(GenerateRequest req) override;

  bool abort(RequestId id) override {
    auto g = book_.groups.find(id);
    if (g == book_.groups.end()) return false;
    if (tier_waiting_.erase(id) > 0) {  // still waiting for the tier: never scheduled
      for (RequestId sid : g->second->ids) pending_aborts_.push_back(sid);
      return true;
    }
    bool any = false;
    for (RequestId sid : g->second->ids) {
      if (!book_.samples.contains(sid)) continue;  // this sample already finished
      if (sched_.abort_request(sid)) {
        any = true;
      } else {
        // Not forked yet: the sample exists only in the engine.
        pending_aborts_.push_back(sid);
        any = true;
      }
    }
    return any;
  }

  bool abort_sample(RequestId id, int32_t index) override {
    auto g = book_.groups.find(id);
    if (g == book_.groups.end() || index < 0 ||
        index >= static_cast<int32_t>(g->second->ids.size()))
      return false;
    const RequestId sid = g->second->ids[static_cast<size_t>(index)];
    if (!book_.samples.contains(sid)) return false;
    // Before the fork the samples are one scheduler request: only abort() can stop it.
    const sched::Request* first = sched_.find(g->second->ids[0]);
    if (first && first->fork_pending()) return false;
    return sched_.abort_request(sid);
  }

  bool has_unfinished() const override { return !book_.samples.empty(); }

  Status step(std::vector<RequestDelta>* deltas) override;

  // Requests whose tier reads finished (their blocks now cached) go to the scheduler.
  void admit_fetched();
  Status attach_kv_tier(kv::KvTierStore* store) override {
    if (!config_.enable_prefix_cache)
      return Status::Error("a KV tier needs the prefix cache (drop --no-prefix-cache)");
    if (!std::ranges::all_of(spec_.group_windows(), [](int32_t w) { return w == 0; }))
      return Status::Error(
          "this model has sliding-window layers, whose KV is not kept for a "
          "whole prefix: a KV tier cannot hold its blocks");
    tiering_ =
        std::make_unique<KvTiering>(&sched_.cache_for_kv_components(), &arena_, &transfer_, store);
    return Status::Ok();
  }
  int64_t kv_tier_block_bytes() const override { return transfer_.bytes_per_token_block(); }
  void flush_kv_tier() override {
    if (tiering_) tiering_->flush();
  }

  EngineStats stats() const override;
  const StepProfile* step_profile() const override {
    return config_.profile_steps ? &profile_ : nullptr;
  }
  const StepProfile* prefill_profile() const override {
    return config_.profile_steps ? &prefill_profile_ : nullptr;
  }

  StatusOr<int32_t> export_prefix_kv(std::span<const int32_t> tokens, const CacheScope& scope,
                                     std::vector<uint8_t>* out) override {
    return transfer_.export_prefix(tokens, scope, out);
  }
  StatusOr<int32_t> import_prefix_kv(std::span<const int32_t> tokens, const CacheScope& scope,
                                     std::span<const uint8_t> bytes) override {
    reclaimer_.reconcile();  // blocks withheld under pressure stay out of reach
    auto imported = transfer_.import_prefix(tokens, scope, bytes);
    flush_events();
    return imported;
  }
  int64_t wipe_kv_cache() override {
    const int64_t zeroed = transfer_.wipe_free_blocks();
    reclaimer_.shrink();
    return flushed(zeroed);
  }
  const kv::KvSpec& kv_spec() const override { return spec_; }
  const Status& init_status() const { return arena_status_.ok() ? init_status_ : arena_status_; }
  const EngineConfig& config() const override { return config_; }
  void fail_next_steps_for_testing(int32_t n) override { fail_steps_.store(n); }

 private:
  // The KV arena: from the memory budget when there is one (what remains once the model is
  // resident), else from kv_num_blocks. A failure leaves a one-block-per-group arena and
  // arena_status_ set (Engine::create returns it).
  kv::KvArena make_arena(const KvBudgetInput& in);

  // The budget's limit is below the arena: requests holding more than it give way (recompute,
  // latest arrival of the lowest priority first) rather than grow. One request always goes on:
  // below what requests hold plus one step of it the limit gives way instead (a bounded
  // overshoot, counted), or it would be preempted and re-admitted forever while the rest of the
  // process stays large.
  void hold_budget();

  KvMemoryGuardConfig guard_config() const {
    KvMemoryGuardConfig g;
    if (config_.memory_budget_bytes <= 0 || !arena_status_.ok()) return g;
    g.budget_bytes = config_.memory_budget_bytes;
    g.low_watermark_bytes =
        config_.kv_low_watermark_bytes >= 0 ? config_.kv_low_watermark_bytes : arena_.bytes() / 8;
    return g;
  }

  // The calibration step, in the constructor's member order: after the model and the arena,
  // before the scheduler (its cache is keyed by the result).
  uint64_t run_calibration(int32_t max_model_len) {
    if (!arena_status_.ok()) return 0;  // the engine will not start
    auto cal = calibrate_kv(transformer_, arena_, max_model_len);
    if (!cal.ok()) {
      init_status_ = cal.status();
      return 0;
    }
    return *cal;
  }
  static uint64_t with_calibration(uint64_t fingerprint, uint64_t calibration) {
    return calibration == 0 ? fingerprint
                            : XXH3_64bits_withSeed(&calibration, sizeof calibration, fingerprint);
  }

  Status run_forward(const sched::SchedulerOutput& out);

  // The forward pass of `out` failed (nothing was sampled): its requests finish with kError
  // instead of the scheduler's update(), every other request goes on. Samples 1..n-1 of a
  // request that had not forked yet exist only here: they finish with it.
  void fail_step(const sched::SchedulerOutput& out, std::vector<RequestDelta>* deltas);

  // Sample sid's final delta (SampleBook::finish); its draft model KV goes back.
  void finish_sample(RequestId sid, FinishReason why, std::vector<RequestDelta>* deltas) {
    book_.finish(sid, why, deltas);
    if (draft_model_) draft_model_->release(sid);
  }

  // The end of every step: final deltas of the requests the scheduler finished, of `errored`
  // (kError) and of pending aborts; each delta's usage.
  void finish_step(std::vector<RequestDelta>* deltas, std::span<const RequestId> errored = {});

  // The cache's events so far go to the sink (EngineConfig::kv_event_sink).
  void flush_events() {
    kv::KvEventLog& log = sched_.kv_event_log();
    if (config_.kv_event_sink != nullptr && !log.empty()) config_.kv_event_sink->publish(&log);
  }
  template <class T>
  T flushed(T result) {
    flush_events();
    return result;
  }

  // The prompt positions of r whose logits give prompt logprobs this step: those in
  // [first_position, end) not recorded yet whose next token is a prompt token. prompt_row is
  // the batch row of the first one (run_forward turns it into a logits-buffer row).
  StepRows prompt_logprob_rows(const sched::ScheduledRequest& r, int32_t query_begin) const;

  void record_prompt_logprobs(const sched::SchedulerOutput& out);

  // Draws every sample's token (in parallel on the pool: each sampler and scratch is one
  // thread's), then turns them into deltas in schedule order on this thread.
  void sample(const sched::SchedulerOutput& out, std::vector<RequestDelta>* deltas);
  // Speculative decoding, before schedule(): each decoding request's drafts for this step
  // (engine/spec_decode.h), none for one with forced tokens.
  void propose_drafts();
  // Request id's sample when it decodes one token next (forked, its prompt done), else null;
  // *r: its scheduler request.
  SampleState* decoding_sample(RequestId id, const sched::Request** r);
  // The draft model's (engine/draft_model.h) for the requests that draft this step.
  void propose_model_drafts();
  // Whether a decoding sample drafts with the draft model: not with forced tokens, not after a
  // context shift (the draft has no shift).
  static bool drafts_with_model(const SampleState& st, const sched::Request& r) {
    return st.params->forced_tokens.empty() && r.num_dropped_tokens() == 0;
  }
  // draft_jobs_ through the draft model; a failure leaves them without drafts (decoding goes
  // on: the draft's failure is not the requests').
  void run_draft_jobs();
  // After update(): the draft model computes the prompts this step completed (all but the
  // last token), so its prefill is part of the prefill step.
  void catch_up_prefilled(const sched::SchedulerOutput& out);

 private:
  const LoadedModel& model_;
  const Tokenizer* tok_;
  std::unique_ptr<ConstrainedVocab> constrained_;  // on the first grammar request
  const std::chrono::steady_clock::time_point created_ = std::chrono::steady_clock::now();
  double seconds_since_created() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - created_).count();
  }
  double next_expiry_scan_ = 0;
  EngineConfig config_;
  kv::KvSpec spec_;
  // Per KV group: its layers rotate with the sliding-window layers' RoPE (a group holds one
  // kind of layer; a window beyond the context makes no window, but keeps its RoPE). Empty
  // when the spec has no explicit groups (one full-attention group).
  const std::vector<uint8_t> local_rope_group_ = [this] {
    std::vector<uint8_t> v;
    for (const kv::KvGroup& g : spec_.groups)
      v.push_back(!g.layers.empty() && model_.config.is_local(g.layers.front()) ? 1 : 0);
    return v;
  }();
  int32_t max_model_len_;
  ThreadPool pool_;
  ThreadAdapter threads_;  // pool_'s active threads follow the free cores
  Transformer transformer_;
  // Phase times (EngineConfig::profile_steps) of decode steps and of the others.
  StepProfile profile_{false}, prefill_profile_{true};
  // Sizing of the arena (make_arena, in member order: after the model is packed, so the
  // memory budget sees what is resident).
  std::string memory_breakdown_;
  Status arena_status_;
  kv::KvArena arena_;
  Status init_status_;           // the calibration pass's (Engine::create returns it)
  uint64_t kv_calibration_ = 0;  // kv_calibration.h; before sched_, which is keyed by it
  uint64_t kv_fingerprint_ = 0;
  sched::Scheduler sched_;
  KvReclaimer reclaimer_;  // memory pressure: withholds blocks of sched_'s pool, pages of arena_
  KvMemoryGuard guard_;    // the memory budget held while running (through reclaimer_)
  KvTransfer transfer_;    // saved sessions: prefix blocks out of and into arena_
  std::unique_ptr<KvTiering> tiering_;  // EngineConfig::kv_tier
  // Requests waiting for a read of the KV tier, not in the scheduler yet.
  std::unordered_map<RequestId, sched::RequestParams> tier_waiting_;
  std::vector<RequestId> tier_ready_;
  std::vector<RequestId> tier_failed_;

  uint64_t next_id_ = 1;
  SampleBook book_;  // live samples, their groups, this step's deltas
  std::vector<RequestId> pending_aborts_;

  // Per-step buffers (capacity kept).
  sched::SchedulerOutput out_;
  std::vector<int32_t> logit_rows_;
  std::vector<StepRows> step_rows_;  // per out.scheduled entry
  std::vector<kernels::AttentionSeq> seqs_;
  RopeRotations rotations_;        // query rotations of shifted blocks (full-attention layers)
  RopeRotations rotations_local_;  // ... of sliding-window layers (their own RoPE)
  std::vector<float> logits_;
  // One sample to draw this step (sample()).
  struct Draw {
    RequestId sid;
    SampleState* st = nullptr;
    const sched::Request* req = nullptr;
    const float* logits = nullptr;  // the first row; a speculative draw's rows follow
    // Speculative decoding: the drafts verified (num_spec of them, rows 1..num_spec after).
    int32_t num_spec = 0;
    const int32_t* drafts = nullptr;
    // A draft model's sampled drafts: q of draft i at draft_probs[i * n_vocab] (rejection
    // sampling); null: deterministic drafts (accepted when the draw equals them).
    const float* draft_probs = nullptr;
    // What the draw emits: the accepted drafts then one token (just one without drafts).
    std::array<int32_t, kMaxSpecTokens + 1> tokens{};
    int32_t num_tokens = 0;
    // With a grammar: the first grammar_advanced tokens advanced the matcher during
    // verification; grammar_done >= 0: the last token (EOS, or a draft completing the grammar)
    // ends the sample and was handled there.
    int32_t grammar_advanced = 0;
    int32_t grammar_done = -1;
  };
  std::vector<Draw> draws_;
  // Verification of one draw's drafts (Draw::num_spec > 0) on pool thread tid
  // (engine_spec.cpp).
  void verify(Draw& d, SamplerScratch& scratch, const uint64_t* allowed, int tid);
  std::vector<SamplerScratch> scratch_;  // one per pool thread
  std::vector<std::vector<int32_t>> spec_history_;  // per pool thread: history + accepted
  std::vector<int32_t> draft_;                      // propose_drafts' scratch
  std::unique_ptr<DraftModel> draft_model_;         // SpecMode::kDraft
  std::vector<DraftJob> draft_jobs_;
  std::vector<std::vector<float>> spec_probs_;      // per pool thread: p of a verified row
  std::vector<sched::SampledToken> sampled_;

  int64_t steps_ = 0;
  double step_seconds_ = 0;
  int32_t max_position_ = -1;
  double sample_seconds_ = 0;
  int64_t prompt_tokens_computed_ = 0;
  int64_t output_tokens_ = 0;
  int64_t spec_verifications_ = 0;
  int64_t spec_draft_tokens_ = 0;
  int64_t spec_accepted_tokens_ = 0;
  int32_t kv_blocks_peak_ = 0;
  std::atomic<int32_t> fail_steps_{0};  // fail_next_steps_for_testing
};

}  // namespace hinge::engine_detail
