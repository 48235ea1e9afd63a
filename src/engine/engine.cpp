// The engine loop: schedule -> copy-on-write -> one forward pass for the whole step -> prompt
// logprobs -> sample -> update, plus the per-sample output state (sampler, detokenizer, stop
// strings).
#include "hinge/engine.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <optional>
#include <unordered_map>

#include <fmt/format.h>
#include <xxhash.h>

#include "common/thread_pool.h"
#include "engine/cache_identity.h"
#include "engine/kv_budget.h"
#include "engine/kv_calibration.h"
#include "kv/kv_memory_guard.h"
#include "kv/kv_reclaimer.h"
#include "kv/kv_transfer.h"
#include "engine/memory_budget.h"
#include "engine/request_check.h"
#include "engine/constrained.h"
#include "engine/kv_tiering.h"
#include "engine/sample_state.h"
#include "pressure/thread_adapter.h"
#include "kv/kv_arena.h"
#include "model/rope_rotations.h"
#include "model/transformer.h"
#include "model/loaded_model.h"
#include "sched/scheduler.h"
#include "tokenizer/tokenizer.h"

namespace hinge {

namespace {

// Where one scheduled request's logits are in this step's logits buffer.
struct StepRows {
  int32_t prompt_row = 0;        // first row of its prompt-logprob positions
  int32_t prompt_position = 0;   // the position of that row
  int32_t num_prompt_rows = 0;   // 0: none this step
  int32_t sample_row = -1;       // the row it samples from; -1: it does not sample
};

class EngineImpl final : public Engine {
 public:
  EngineImpl(const LoadedModel& model, const Tokenizer* tokenizer, const EngineConfig& config,
             const kv::KvSpec& spec, const KvBudgetInput& budget, int32_t max_model_len)
      : model_(model),
        tok_(tokenizer),
        config_(config),
        spec_(spec),
        max_model_len_(max_model_len),
        pool_(config.threads),
        threads_(config.adapt_threads, config.threads, config.cpu_root),
        transformer_(model.config, model.weights, pool_, config.max_batched_tokens,
               model.file_mappings),
        arena_(make_arena(budget)),
        kv_calibration_(run_calibration(max_model_len_)),
        kv_fingerprint_(with_calibration(kv_cache_fingerprint(model, spec), kv_calibration_)),
        sched_(sched::SchedulerConfig{.max_num_batched_tokens = config.max_batched_tokens,
                                      .max_num_seqs = config.max_num_seqs,
                                      .block_size_tokens = config.block_size,
                                      .num_kv_blocks = static_cast<int32_t>(arena_.num_blocks()),
                                      .num_kv_groups = spec.num_groups(),
                                      .kv_group_windows = spec.group_windows(),
                                      .enable_prefix_cache = config.enable_prefix_cache,
                                      .cache_fingerprint = kv_fingerprint_,
                                      .context_policy = config.context_policy,
                                      .max_model_len = max_model_len_,
                                      .sink_tokens = config.sink_tokens}),
        reclaimer_(&sched_.cache_for_kv_components(), &arena_),
        guard_(&sched_.cache_for_kv_components(), &arena_, &reclaimer_, guard_config()),
        transfer_(&sched_.cache_for_kv_components(), &arena_),
        rotations_(transformer_.rope_global(), config.block_size),
        rotations_local_(transformer_.rope_local(), config.block_size) {
    const size_t vocab = static_cast<size_t>(model.config.n_vocab);
    logits_.resize(static_cast<size_t>(config.max_num_seqs) * vocab);
    scratch_.resize(static_cast<size_t>(pool_.capacity()));
    draws_.reserve(static_cast<size_t>(config.max_num_seqs));
    // Every per-step buffer at its largest once, so steady steps allocate nothing: tokens up
    // to the step budget, block tables of every running sequence at full length.
    const size_t t = static_cast<size_t>(config.max_batched_tokens);
    const size_t seqs = static_cast<size_t>(config.max_num_seqs);
    const size_t groups = static_cast<size_t>(spec.num_groups());
    const size_t table = static_cast<size_t>((max_model_len_ + config.block_size - 1) /
                                             config.block_size);
    out_.scheduled.reserve(seqs);
    out_.all_token_ids.reserve(t);
    out_.all_slots.reserve(t * groups);
    out_.all_block_ids.reserve(seqs * table * groups);
    out_.all_sample_ids.reserve(seqs);
    out_.block_copies.reserve(seqs * groups);
    out_.preempted.reserve(seqs);
    logit_rows_.reserve(seqs);
    seqs_.reserve(seqs * groups);
    // Every group's sequences take their pointers from one of the two (a reallocation would
    // leave the step's earlier pointers dangling).
    rotations_.reserve(seqs * (table + 1) * groups);  // + 1: a block while it shifts
    rotations_local_.reserve(seqs * (table + 1) * groups);
    step_rows_.reserve(seqs);
    sampled_.reserve(seqs);
    book_.delta_sids.reserve(seqs);
    if (config.kv_event_sink != nullptr) {
      sched_.enable_kv_events();
      flush_events();
    }
  }

  Status check_request(const GenerateRequest& req) const override {
    return check_generate_request(req, model_.config, max_model_len_, config_.max_num_seqs,
                                  config_.context_policy);
  }

  int32_t cached_prefix_blocks(std::span<const int32_t> prompt,
                               const CacheScope& scope) override {
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
    sched_.set_cache_owner_policy(owner, cache_share >= 1 ? INT32_MAX : static_cast<int32_t>(blocks),
                                     ttl_s);
  }
  int32_t purge_cache_owner(int32_t owner) override { return flushed(sched_.purge_cache_owner(owner)); }
  int32_t retire_cache_epochs(int32_t owner, uint64_t current) override {
    return flushed(sched_.retire_cache_owner_epochs(owner, current));
  }
  int32_t retire_cache_owner(int32_t owner) override { return flushed(sched_.retire_cache_owner(owner)); }
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

  StatusOr<RequestId> add_request(GenerateRequest req) override {
    HINGE_RETURN_IF_ERROR(check_request(req));
    if (req.sampling.grammar) {  // the vocabulary's trie, once
      if (tok_ == nullptr) return Status::Error("a grammar needs the engine's tokenizer");
      if (!constrained_) constrained_ = std::make_unique<ConstrainedVocab>(*tok_);
    }
    const RequestId id(next_id_);
    sched::RequestParams p;
    p.prompt_token_ids = req.prompt_token_ids;
    p.max_new_tokens = req.max_new_tokens;
    p.priority = req.priority;
    p.cache_scope = req.cache_scope;
    p.n = req.n;
    p.skip_prefix_cache = req.prompt_logprobs >= 0;
    p.keep_tokens = req.keep_tokens;
    p.turn_starts = req.turn_starts;
    for (int32_t i = 1; i < req.n; ++i) p.sample_ids.push_back(RequestId(next_id_ + i));
    if (tiering_ && !p.skip_prefix_cache && sched_.check_request(id, p).ok() &&
        tiering_->start_fetch(id, p.prompt_token_ids, p.cache_scope)) {
      tier_waiting_.emplace(id, std::move(p));  // scheduled when its blocks are read
    } else {
      HINGE_RETURN_IF_ERROR(sched_.add_request(id, std::move(p)));
    }
    next_id_ += static_cast<uint64_t>(req.n);

    book_.add(id, std::move(req), model_.config.n_vocab, tok_, config_.detokenize);
    return id;
  }

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
    if (g == book_.groups.end() || index < 0 || index >= static_cast<int32_t>(g->second->ids.size()))
      return false;
    const RequestId sid = g->second->ids[static_cast<size_t>(index)];
    if (!book_.samples.contains(sid)) return false;
    // Before the fork the samples are one scheduler request: only abort() can stop it.
    const sched::Request* first = sched_.find(g->second->ids[0]);
    if (first && first->fork_pending()) return false;
    return sched_.abort_request(sid);
  }

  bool has_unfinished() const override { return !book_.samples.empty(); }

  Status step(std::vector<RequestDelta>* deltas) override {
    const auto t0 = std::chrono::steady_clock::now();
    struct AddElapsed {  // step_seconds_ on every return
      std::chrono::steady_clock::time_point t0;
      double* total;
      ~AddElapsed() {
        *total += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      }
    } timed{t0, &step_seconds_};
    // The caller's deltas are reused in place; the rest are dropped at the end.
    book_.begin_step(steps_ + 1);
    // The TTL clock; expired entries are reclaimed about once a second (a scan of the pool).
    const double now = seconds_since_created();
    sched_.set_cache_time(now);
    if (now >= next_expiry_scan_) {
      sched_.expire_cache_entries();
      next_expiry_scan_ = now + 1.0;
    }
    guard_.tick(now, false);
    if (tiering_) admit_fetched();
    if (reclaimer_.budget_limit() < arena_.num_blocks()) hold_budget();
    if (reclaimer_.limited()) reclaimer_.reconcile();  // withhold what requests freed
    threads_.tick(pool_);
    sched_.schedule(&out_);
    const sched::SchedulerOutput& out = out_;
    ++steps_;
    for (const kv::BlockCopy& cp : out.block_copies) arena_.copy_block(cp.src, cp.dst);
    kv_blocks_peak_ = std::max(kv_blocks_peak_, sched_.kv().pool().counters().num_used_blocks -
                                                    sched_.kv().num_withheld());

    sampled_.clear();
    if (!out.empty()) {
      if (Status st = run_forward(out); !st.ok()) {
        fail_step(out, deltas);
        deltas->resize(book_.num_deltas);
        return st;
      }
      record_prompt_logprobs(out);
      const auto s0 = std::chrono::steady_clock::now();
      sample(out, deltas);
      sample_seconds_ +=
          std::chrono::duration<double>(std::chrono::steady_clock::now() - s0).count();
    }
    sched_.update(out, sampled_);
    for (const auto& s : sampled_) {
      auto it = book_.samples.find(s.id);
      if (it != book_.samples.end() && it->second.stop_seen && sched_.find(s.id) != nullptr)
        sched_.finish_request(s.id, FinishReason::kStop);
    }
    finish_step(deltas, tier_failed_);
    tier_failed_.clear();
    deltas->resize(book_.num_deltas);
    if (book_.samples.empty()) guard_.tick(seconds_since_created(), true);
    // Nothing to run but reads of the tier: wait for one (briefly) instead of spinning.
    if (out.empty() && !tier_waiting_.empty()) tiering_->wait(0.005);
    return Status::Ok();
  }

  // Requests whose tier reads finished (their blocks now cached) go to the scheduler.
  void admit_fetched() {
    tier_ready_.clear();
    tiering_->poll(&tier_ready_);
    for (RequestId id : tier_ready_) {
      auto it = tier_waiting_.find(id);
      if (it == tier_waiting_.end()) continue;  // aborted while waiting
      sched::RequestParams p = std::move(it->second);
      tier_waiting_.erase(it);
      std::vector<RequestId> sids{id};
      sids.insert(sids.end(), p.sample_ids.begin(), p.sample_ids.end());
      if (!sched_.add_request(id, std::move(p)).ok())  // checked when it arrived: not expected
        tier_failed_.insert(tier_failed_.end(), sids.begin(), sids.end());
    }
    flush_events();
  }
  Status attach_kv_tier(kv::KvTierStore* store) override {
    if (!config_.enable_prefix_cache)
      return Status::Error("a KV tier needs the prefix cache (drop --no-prefix-cache)");
    if (!std::ranges::all_of(spec_.group_windows(), [](int32_t w) { return w == 0; }))
      return Status::Error("this model has sliding-window layers, whose KV is not kept for a "
                           "whole prefix: a KV tier cannot hold its blocks");
    tiering_ = std::make_unique<KvTiering>(&sched_.cache_for_kv_components(), &arena_,
                                           &transfer_, store);
    return Status::Ok();
  }
  int64_t kv_tier_block_bytes() const override { return transfer_.bytes_per_token_block(); }
  void flush_kv_tier() override {
    if (tiering_) tiering_->flush();
  }

  EngineStats stats() const override {
    EngineStats s;
    const sched::SchedulerStats ss = sched_.stats();
    s.steps = steps_;
    s.step_seconds = step_seconds_;
    s.sample_seconds = sample_seconds_;
    if (constrained_) {
      s.mask_seconds = constrained_->mask_seconds();
      s.masks = constrained_->masks();
      s.mask_cache_hits = constrained_->cache_hits();
    }
    s.prompt_tokens_computed = prompt_tokens_computed_;
    s.output_tokens = output_tokens_;
    s.preemptions = ss.num_preemptions;
    s.context_shifts = ss.num_context_shifts;
    s.context_dropped_tokens = ss.num_dropped_tokens;
    s.max_position = max_position_;
    s.running = ss.num_running;
    s.waiting = ss.num_waiting + static_cast<int32_t>(tier_waiting_.size());
    if (tiering_) {
      const KvTieringStats t = tiering_->stats();
      s.kv_tier_fetches = t.fetches;
      s.kv_tier_restored_blocks = t.restored_blocks;
      s.kv_tier_written_blocks = t.written_blocks;
      s.kv_tier_dropped_writes = t.dropped_writes;
      s.kv_tier_queued_bytes = t.queued_bytes;
      s.kv_tier_wait_seconds = t.fetch_wait_seconds;
    }
    s.kv = sched_.kv().stats();
    s.kv_blocks_total = s.kv.pool.num_total_blocks;
    s.kv_blocks_withheld = s.kv.num_withheld_blocks;
    s.kv_blocks_used = s.kv.pool.num_used_blocks - s.kv_blocks_withheld;
    s.kv_blocks_limit = std::min(reclaimer_.limit(), s.kv_blocks_total);
    s.kv_bytes_released = reclaimer_.bytes_released();
    fill_memory_budget_stats(guard_, &s);
    s.max_num_seqs_now = sched_.max_num_seqs_now();
    s.max_batched_tokens_now = sched_.max_batched_tokens_now();
    const ThreadAdapterStats ts = threads_.stats(pool_);
    s.threads_active = ts.threads_active;
    s.cpu_others_cores = ts.cpu_others_cores;
    s.thread_changes = ts.thread_changes;
    s.kv_blocks_peak = kv_blocks_peak_;
    s.kv_bytes_per_block = arena_.bytes_per_block();
    s.kv_bytes_total = arena_.bytes();
    s.kv_fingerprint = kv_fingerprint_;
    s.kv_calibration = kv_calibration_;
    const int64_t bs = config_.block_size;
    for (RequestId id : sched_.running()) {
      if (!sched_.kv().has_request(id)) continue;
      s.kv_slots_allocated += sched_.kv().block_table(id).num_blocks() * bs;
      s.kv_slots_used += sched_.kv().num_tokens(id);
    }
    return s;
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
  kv::KvArena make_arena(const KvBudgetInput& in) {
    ArenaSizing z;
    z.budget = in;
    z.memory_budget_bytes = config_.memory_budget_bytes;
    z.memory_budget_source = config_.memory_budget_source;
    z.max_num_seqs = config_.max_num_seqs;
    z.threads = config_.threads;
    z.n_vocab = model_.config.n_vocab;
    z.file_mappings = model_.file_mappings;
    z.dropped_file_bytes = transformer_.dropped_file_bytes();
    z.packed_bytes = transformer_.packed_bytes();
    z.max_batched_tokens = config_.max_batched_tokens;
    StatusOr<int64_t> blocks = kv_arena_blocks(z, &memory_breakdown_);
    if (blocks.ok() && config_.memory_budget_bytes > 0)
      max_model_len_ = budget_context_tokens(z, *blocks, max_model_len_, &memory_breakdown_);
    if (blocks.ok()) {
      auto a = kv::KvArena::create(in.spec, *blocks);
      if (a.ok()) return std::move(*a);
      arena_status_ = a.status();
    } else {
      arena_status_ = blocks.status();
    }
    return std::move(kv::KvArena::create(in.spec, in.spec.num_groups()).value());
  }

  // The budget's limit is below the arena: requests holding more than it give way (recompute,
  // latest arrival of the lowest priority first) rather than grow. One request always goes on:
  // below what requests hold plus one step of it the limit gives way instead (a bounded
  // overshoot, counted), or it would be preempted and re-admitted forever while the rest of the
  // process stays large.
  void hold_budget() {
    sched_.preempt_to_fit(reclaimer_.budget_limit());
    const kv::KvCacheManager& kv = sched_.kv();
    const int32_t used = kv.pool().counters().num_used_blocks - kv.num_withheld();
    const int32_t step_blocks =
        ((config_.max_batched_tokens + config_.block_size - 1) / config_.block_size + 1) *
        spec_.num_groups();
    const int32_t floor = std::min<int32_t>(used + step_blocks, arena_.num_blocks());
    if (reclaimer_.budget_limit() < floor) {
      reclaimer_.set_budget_limit(floor);
      guard_.count_overshoot();
    }
  }

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

  Status run_forward(const sched::SchedulerOutput& out) {
    int32_t left = fail_steps_.load();
    while (left > 0 && !fail_steps_.compare_exchange_weak(left, left - 1)) {
    }
    if (left > 0)
      return Status::Error("forward pass failed (injected by fail_next_steps_for_testing)");
    logit_rows_.clear();
    seqs_.clear();
    step_rows_.clear();
    rotations_.clear();
    rotations_local_.clear();
    // A shifted sequence's query rotations use the RoPE of the group's layers (sliding-window
    // layers may have their own base, as Gemma 3's).
    auto rotations_of = [&](int32_t g) -> RopeRotations& {
      const bool local = static_cast<size_t>(g) < local_rope_group_.size() &&
                         local_rope_group_[static_cast<size_t>(g)] != 0;
      return local ? rotations_local_ : rotations_;
    };
    int32_t row = 0;
    for (const sched::ScheduledRequest& r : out.scheduled) {
      kernels::AttentionSeq seq;
      seq.query_begin = row;
      seq.num_queries = r.num_new_tokens;
      seq.first_position = r.first_position;
      max_position_ = std::max(max_position_, r.end_position() - 1);
      seq.num_blocks = r.num_blocks;
      seq.block_table = out.block_table(r).data();  // the scheduler's copy, read in place
      if (const auto offsets = out.block_offsets(r); !offsets.empty())
        seq.block_rotation = rotations_of(0).tables(offsets);
      seqs_.push_back(seq);
      StepRows rows = prompt_logprob_rows(r, seq.query_begin);
      for (int32_t k = 0; k < rows.num_prompt_rows; ++k) logit_rows_.push_back(rows.prompt_row + k);
      rows.prompt_row = static_cast<int32_t>(logit_rows_.size()) - rows.num_prompt_rows;
      row += r.num_new_tokens;
      if (r.samples) {
        rows.sample_row = static_cast<int32_t>(logit_rows_.size());
        logit_rows_.push_back(row - 1);
      }
      step_rows_.push_back(rows);
      const sched::Request* req = sched_.find(r.id);
      if (req) {
        const int32_t prompt_end = req->num_kept_prompt_tokens();
        if (r.first_position < prompt_end)
          prompt_tokens_computed_ += std::min(r.end_position(), prompt_end) - r.first_position;
      }
    }
    // The other KV groups' sequences: the same rows through their own block tables.
    const size_t num_seqs = seqs_.size();
    for (int32_t g = 1; g < spec_.num_groups(); ++g) {
      for (size_t i = 0; i < num_seqs; ++i) {
        kernels::AttentionSeq seq = seqs_[i];
        seq.block_table = out.block_table(out.scheduled[i], g).data();
        if (const auto offsets = out.block_offsets(out.scheduled[i]); !offsets.empty())
          seq.block_rotation = rotations_of(g).tables(offsets);
        seqs_.push_back(seq);
      }
    }
    ForwardBatch b;
    b.token_ids = out.all_token_ids;  // in schedule order: the batch's rows
    b.slot_mapping = out.all_slots;   // every group's, group-major
    b.seqs = seqs_;
    b.logit_rows = logit_rows_;
    // More rows than max_num_seqs only with prompt logprobs: grow once, keep the capacity.
    const size_t need = logit_rows_.size() * static_cast<size_t>(model_.config.n_vocab);
    if (need > logits_.size()) logits_.resize(need);
    return transformer_.forward_batch(b, arena_, logits_.data());
  }

  // The forward pass of `out` failed (nothing was sampled): its requests finish with kError
  // instead of the scheduler's update(), every other request goes on. Samples 1..n-1 of a
  // request that had not forked yet exist only here: they finish with it.
  void fail_step(const sched::SchedulerOutput& out, std::vector<RequestDelta>* deltas) {
    std::vector<RequestId> unforked;  // (a failed step may allocate)
    for (const sched::ScheduledRequest& r : out.scheduled) {
      const sched::Request* req = sched_.find(r.id);
      if (req && req->fork_pending())
        unforked.insert(unforked.end(), req->sample_ids().begin(), req->sample_ids().end());
    }
    sched_.abort_step(out);
    finish_step(deltas, unforked);
  }

  // The end of every step: final deltas of the requests the scheduler finished, of `errored`
  // (kError) and of pending aborts; each delta's usage.
  void finish_step(std::vector<RequestDelta>* deltas, std::span<const RequestId> errored = {}) {
    for (sched::Request& r : sched_.take_finished()) {
      // Its full blocks (prompt and output, still cached) to the KV tier; not after a context
      // shift, whose cache view is no longer a prefix.
      if (tiering_ && r.num_dropped_tokens() == 0)
        tiering_->write_back(r.token_ids().first(static_cast<size_t>(r.num_computed_tokens())),
                             r.cache_scope());
      book_.finish(r.id(), r.finish_reason(), deltas);
    }
    for (RequestId sid : errored) book_.finish(sid, FinishReason::kError, deltas);
    for (RequestId sid : pending_aborts_) book_.finish(sid, FinishReason::kAborted, deltas);
    pending_aborts_.clear();
    for (size_t i = 0; i < book_.num_deltas; ++i) {
      auto it = book_.samples.find(book_.delta_sids[i]);
      if (it != book_.samples.end()) (*deltas)[i].usage = it->second.usage;
    }
    if (config_.kv_debug)
      std::fprintf(stderr, "step %lld\n%s\n", static_cast<long long>(steps_),
                   sched_.kv().debug_string().c_str());
    flush_events();
  }

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
  StepRows prompt_logprob_rows(const sched::ScheduledRequest& r, int32_t query_begin) const {
    StepRows rows;
    auto st = book_.samples.find(r.id);
    if (st == book_.samples.end()) return rows;
    const Group& g = *book_.groups.at(st->second.group);
    if (g.params.prompt_logprobs < 0) return rows;
    const int32_t n_prompt = static_cast<int32_t>(g.params.prompt_token_ids.size());
    const int32_t lo = std::max(r.first_position, static_cast<int32_t>(g.prompt_logprobs.size()));
    const int32_t hi = std::min(r.end_position(), n_prompt - 1);
    if (lo >= hi) return rows;
    rows.prompt_row = query_begin + (lo - r.first_position);
    rows.prompt_position = lo;
    rows.num_prompt_rows = hi - lo;
    return rows;
  }

  void record_prompt_logprobs(const sched::SchedulerOutput& out) {
    const size_t vocab = static_cast<size_t>(model_.config.n_vocab);
    for (size_t i = 0; i < out.scheduled.size(); ++i) {
      const StepRows& rows = step_rows_[i];
      if (rows.num_prompt_rows == 0) continue;
      Group& g = *book_.groups.at(book_.samples.at(out.scheduled[i].id).group);
      const std::vector<int32_t>& prompt = g.params.prompt_token_ids;
      for (int32_t k = 0; k < rows.num_prompt_rows; ++k) {
        const int32_t pos = rows.prompt_position + k;
        HINGE_CHECK(pos == static_cast<int32_t>(g.prompt_logprobs.size()));
        g.prompt_logprobs.emplace_back();
        fill_logprobs(&logits_[static_cast<size_t>(rows.prompt_row + k) * vocab], model_.config.n_vocab,
                      prompt[static_cast<size_t>(pos) + 1], g.params.prompt_logprobs,
                      &g.prompt_logprobs.back());
      }
    }
  }

  // Draws every sample's token (in parallel on the pool: each sampler and scratch is one
  // thread's), then turns them into deltas in schedule order on this thread.
  void sample(const sched::SchedulerOutput& out, std::vector<RequestDelta>* deltas) {
    const size_t vocab = static_cast<size_t>(model_.config.n_vocab);
    draws_.clear();
    for (size_t i = 0; i < out.scheduled.size(); ++i) {
      const sched::ScheduledRequest& r = out.scheduled[i];
      if (!r.samples) continue;
      const sched::Request* req = sched_.find(r.id);
      if (!req) continue;  // aborted since schedule()
      const float* logits = &logits_[static_cast<size_t>(step_rows_[i].sample_row) * vocab];
      const Group& g = *book_.groups.at(book_.samples.at(r.id).group);
      for (int32_t k = 0; k < r.num_samples; ++k) {
        const RequestId sid =
            k == 0 ? r.id : g.ids[static_cast<size_t>(book_.samples.at(r.id).index + k)];
        draws_.push_back({sid, &book_.samples.at(sid), req, logits, 0});
      }
    }
    const int64_t n = static_cast<int64_t>(draws_.size());
    auto draw_range = [&](int64_t b, int64_t e, SamplerScratch& scratch) {
      for (int64_t j = b; j < e; ++j) {
        Draw& d = draws_[static_cast<size_t>(j)];
        const uint64_t* allowed = d.st->matcher ? fill_allowed(*d.st, *constrained_) : nullptr;
        d.token = d.st->sampler.sample(d.logits, d.req->token_ids(), scratch, allowed);
      }
    };
    if (n > 1 && pool_.size() > 1) {
      pool_.run([&](int tid, int nt) {
        const int64_t per = (n + nt - 1) / nt;
        const int64_t b = std::min(n, tid * per), e = std::min(n, b + per);
        draw_range(b, e, scratch_[static_cast<size_t>(tid)]);
      });
    } else {
      draw_range(0, n, scratch_[0]);
    }
    for (const Draw& dr : draws_) {
      SampleState& st = *dr.st;
      const Group& g = *book_.groups.at(st.group);
      st.usage.cached_tokens = std::max(0, dr.req->num_cached_tokens());
      st.usage.dropped_tokens = dr.req->num_dropped_tokens();
      const std::vector<int32_t>& forced = st.params->forced_tokens;
      const int32_t token =
          forced.empty() ? dr.token : forced[static_cast<size_t>(st.usage.completion_tokens)];
      sampled_.push_back({dr.sid, token});
      ++output_tokens_;
      RequestDelta& d = book_.delta_for(dr.sid, deltas);
      if (g.params.prompt_logprobs >= 0 && !st.prompt_logprobs_sent) {
        d.prompt_logprobs = g.prompt_logprobs;
        st.prompt_logprobs_sent = true;
      }
      if (tok_ && (!st.params->sampling.ignore_eos || st.matcher) && tok_->is_eog(token)) {
        st.stop_seen = true;
        continue;
      }
      if (st.matcher && advance_grammar(st, *constrained_, token)) st.stop_seen = true;
      d.token_ids.push_back(token);
      if (st.params->logprobs >= 0) {
        d.logprobs.emplace_back();
        fill_logprobs(dr.logits, model_.config.n_vocab, token, st.params->logprobs,
                      &d.logprobs.back());
      }
      ++st.usage.completion_tokens;
      if (st.output) {
        d.text += st.output->push(token);
        if (st.output->stopped()) st.stop_seen = true;
      }
    }
  }

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
  // Sizing of the arena (make_arena, in member order: after the model is packed, so the
  // memory budget sees what is resident).
  std::string memory_breakdown_;
  Status arena_status_;
  kv::KvArena arena_;
  Status init_status_;  // the calibration pass's (Engine::create returns it)
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
  std::vector<StepRows> step_rows_;     // per out.scheduled entry
  std::vector<kernels::AttentionSeq> seqs_;
  RopeRotations rotations_;        // query rotations of shifted blocks (full-attention layers)
  RopeRotations rotations_local_;  // ... of sliding-window layers (their own RoPE)
  std::vector<float> logits_;
  // One sample to draw this step (sample()).
  struct Draw {
    RequestId sid;
    SampleState* st;
    const sched::Request* req;
    const float* logits;
    int32_t token;
  };
  std::vector<Draw> draws_;
  std::vector<SamplerScratch> scratch_;  // one per pool thread
  std::vector<sched::SampledToken> sampled_;

  int64_t steps_ = 0;
  double step_seconds_ = 0;
  int32_t max_position_ = -1;
  double sample_seconds_ = 0;
  int64_t prompt_tokens_computed_ = 0;
  int64_t output_tokens_ = 0;
  int32_t kv_blocks_peak_ = 0;
  std::atomic<int32_t> fail_steps_{0};  // fail_next_steps_for_testing
};

}  // namespace

StatusOr<std::unique_ptr<Engine>> Engine::create(const LoadedModel& model,
                                                 const Tokenizer* tokenizer,
                                                 const EngineConfig& config) {
  HINGE_RETURN_IF_ERROR(config.validate());
  const ModelConfig& c = model.config;
  const int64_t max_len = config.max_model_len > 0
                              ? std::min<int64_t>(config.max_model_len, c.context_length)
                              : c.context_length;
  HINGE_ASSIGN_OR_RETURN(const kv::KvSpec spec, kv_spec_for(c, config.k_dtype, config.v_dtype,
                                                            config.block_size, config.kv_groups));
  if (config.context_policy == ContextPolicy::kShift) {
    const int64_t bs = config.block_size;
    const int64_t sink_blocks = (int64_t{config.sink_tokens} + bs - 1) / bs;
    const int64_t need = (sink_blocks + 2) * bs;
    if (max_len < need)
      return Status::Errorf(
          "--context-policy shift: the context of {} tokens must hold the {} sink tokens (whole "
          "blocks of {}) and two more blocks: at least {} tokens; raise --ctx-size or lower "
          "--sink-tokens", max_len, config.sink_tokens, bs, need);
  }
  KvBudgetInput in;
  in.spec = spec;
  in.kv_memory_bytes = config.kv_memory_bytes;
  in.kv_memory_fraction = config.kv_memory_fraction;
  in.available_bytes = config.kv_memory_bytes > 0 ? 0 : available_memory_bytes();
  in.weight_bytes = static_cast<int64_t>(model.file_bytes);
  in.max_num_seqs = config.max_num_seqs;
  in.max_model_len = max_len;
  if (config.memory_budget_bytes > 0)  // refuse before packing when the weights cannot fit
    HINGE_RETURN_IF_ERROR(check_weights_fit(config.memory_budget_bytes, config.memory_budget_source,
                                            model.file_mappings, model.file_bytes,
                                            spec.bytes_per_block()));
  auto engine = std::make_unique<EngineImpl>(model, tokenizer, config, spec, in,
                                             static_cast<int32_t>(max_len));
  HINGE_RETURN_IF_ERROR(engine->init_status());
  return std::unique_ptr<Engine>(std::move(engine));
}

}  // namespace hinge
