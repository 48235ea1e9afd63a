// The engine: construction (arena, calibration, scheduler), requests, stats, the memory
// budget held while running, and Engine::create (engine_impl.h; the step is engine_step.cpp).
#include "engine/engine_impl.h"

namespace hinge {

namespace engine_detail {

EngineImpl::EngineImpl(const LoadedModel& model, const Tokenizer* tokenizer,
                       const EngineConfig& config, const kv::KvSpec& spec,
                       const KvBudgetInput& budget, int32_t max_model_len)
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
  if (config.profile_steps) transformer_.set_profile(&profile_, &prefill_profile_);
  const size_t vocab = static_cast<size_t>(model.config.n_vocab);
  logits_.resize(static_cast<size_t>(config.max_num_seqs) * vocab);
  scratch_.resize(static_cast<size_t>(pool_.capacity()));
  spec_history_.resize(static_cast<size_t>(pool_.capacity()));
  draws_.reserve(static_cast<size_t>(config.max_num_seqs));
  // Every per-step buffer at its largest once, so steady steps allocate nothing: tokens up
  // to the step budget, block tables of every running sequence at full length.
  const size_t t = static_cast<size_t>(config.max_batched_tokens);
  const size_t seqs = static_cast<size_t>(config.max_num_seqs);
  const size_t groups = static_cast<size_t>(spec.num_groups());
  const size_t table =
      static_cast<size_t>((max_model_len_ + config.block_size - 1) / config.block_size);
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
  if (config.spec_mode == SpecMode::kDraft && init_status_.ok() && arena_status_.ok()) {
    // The draft's KV holds as many tokens as the model's (at most every sequence at full
    // length), and every sequence's drafts.
    const int64_t tokens =
        std::min(arena_.num_blocks() / std::max(1, spec.num_groups()) * config.block_size,
                 int64_t{config.max_num_seqs} * max_model_len_) +
        int64_t{config.max_num_seqs} * (kMaxSpecTokens + config.block_size);
    auto d = DraftModel::create(*config.draft_model, pool_, config.k_dtype, config.v_dtype,
                                config.block_size, tokens, config.max_batched_tokens,
                                config.max_num_seqs);
    if (d.ok()) {
      draft_model_ = std::move(*d);
      draft_jobs_.reserve(seqs);
      spec_probs_.assign(static_cast<size_t>(pool_.capacity()), std::vector<float>(vocab));
      memory_breakdown_ += fmt::format("{}draft model KV {:.1f} MiB",
                                       memory_breakdown_.empty() ? "" : "; ",
                                       static_cast<double>(draft_model_->stats().kv_bytes) /
                                           (1 << 20));
    } else {
      init_status_ = d.status();
    }
  }
  if (config.kv_event_sink != nullptr) {
    sched_.enable_kv_events();
    flush_events();
  }
}

StatusOr<RequestId> EngineImpl::add_request(GenerateRequest req) {
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

EngineStats EngineImpl::stats() const {
  EngineStats s;
  const sched::SchedulerStats ss = sched_.stats();
  s.steps = steps_;
  s.step_seconds = step_seconds_;
  s.sample_seconds = sample_seconds_;
  s.weights_packed_bytes = transformer_.packed_bytes();
  s.weights_pack_seconds = transformer_.pack_seconds();
  if (constrained_) {
    s.mask_seconds = constrained_->mask_seconds();
    s.masks = constrained_->masks();
    s.mask_cache_hits = constrained_->cache_hits();
  }
  s.prompt_tokens_computed = prompt_tokens_computed_;
  s.output_tokens = output_tokens_;
  s.spec_verifications = spec_verifications_;
  s.spec_draft_tokens = spec_draft_tokens_;
  s.spec_accepted_tokens = spec_accepted_tokens_;
  if (draft_model_) {
    const DraftModelStats d = draft_model_->stats();
    s.spec_draft_model_passes = d.forward_passes;
    s.spec_draft_model_tokens = d.tokens_computed;
    s.spec_draft_model_seconds = d.seconds;
    s.spec_draft_model_kv_bytes = d.kv_bytes;
  }
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

kv::KvArena EngineImpl::make_arena(const KvBudgetInput& in) {
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

void EngineImpl::hold_budget() {
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

}  // namespace engine_detail

using engine_detail::EngineImpl;

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
          "--sink-tokens",
          max_len, config.sink_tokens, bs, need);
  }
  if (config.spec_mode == SpecMode::kDraft) {
    if (config.draft_model == nullptr)
      return Status::Error("--speculative draft needs --draft-model FILE");
    const ModelConfig& d = config.draft_model->config;
    if (d.n_vocab != c.n_vocab)
      return Status::Errorf(
          "--draft-model: its vocabulary has {} tokens, the model's {}: a draft model must "
          "share the model's vocabulary (a smaller model of the same family and tokenizer)",
          d.n_vocab, c.n_vocab);
    if (config.memory_budget_bytes > 0)
      return Status::Errorf(
          "--speculative draft: {} does not count a draft model's memory yet; run without a "
          "memory budget, or use --speculative ngram",
          config.memory_budget_source);
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
