// The engine step: schedule -> copy-on-write -> one forward pass for the whole step -> prompt
// logprobs -> sample -> update, and the end of a step (finished requests, KV tier reads and
// writes, KV events). engine_impl.h.
#include "common/elapsed.h"
#include "engine/engine_impl.h"

namespace hinge::engine_detail {

Status EngineImpl::step(std::vector<RequestDelta>* deltas) {
  const AddElapsed timed(&step_seconds_);
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
  if (config_.spec_mode != SpecMode::kNone) propose_drafts();
  sched_.schedule(&out_);
  const sched::SchedulerOutput& out = out_;
  ++steps_;
  for (const kv::BlockCopy& cp : out.block_copies) arena_.copy_block(cp.src, cp.dst);
  kv_blocks_peak_ = std::max(
      kv_blocks_peak_, sched_.kv().pool().counters().num_used_blocks - sched_.kv().num_withheld());

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
    sample_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - s0).count();
  }
  sched_.update(out, sampled_);
  for (const auto& s : sampled_) {
    auto it = book_.samples.find(s.id);
    if (it != book_.samples.end() && it->second.stop_seen && sched_.find(s.id) != nullptr)
      sched_.finish_request(s.id, FinishReason::kStop);
  }
  if (draft_model_ && config_.spec_verify_k == 0) catch_up_prefilled(out);
  finish_step(deltas, tier_failed_);
  tier_failed_.clear();
  deltas->resize(book_.num_deltas);
  if (book_.samples.empty()) guard_.tick(seconds_since_created(), true);
  // Nothing to run but reads of the tier: wait for one (briefly) instead of spinning.
  if (out.empty() && !tier_waiting_.empty()) tiering_->wait(0.005);
  return Status::Ok();
}

void EngineImpl::admit_fetched() {
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

Status EngineImpl::run_forward(const sched::SchedulerOutput& out) {
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
    if (r.samples) {  // the last row, and with drafts the row before each of them
      rows.sample_row = static_cast<int32_t>(logit_rows_.size());
      rows.num_spec = r.num_spec_tokens;
      for (int32_t j = r.num_spec_tokens; j >= 0; --j) logit_rows_.push_back(row - 1 - j);
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
  // More rows than max_num_seqs only with prompt logprobs or drafts: grow, keep the capacity.
  const size_t need = logit_rows_.size() * static_cast<size_t>(model_.config.n_vocab);
  if (need > logits_.size()) logits_.resize(need);
  return transformer_.forward_batch(b, arena_, logits_.data());
}

void EngineImpl::fail_step(const sched::SchedulerOutput& out, std::vector<RequestDelta>* deltas) {
  std::vector<RequestId> unforked;  // (a failed step may allocate)
  for (const sched::ScheduledRequest& r : out.scheduled) {
    const sched::Request* req = sched_.find(r.id);
    if (req && req->fork_pending())
      unforked.insert(unforked.end(), req->sample_ids().begin(), req->sample_ids().end());
  }
  sched_.abort_step(out);
  finish_step(deltas, unforked);
}

void EngineImpl::finish_step(std::vector<RequestDelta>* deltas,
                             std::span<const RequestId> errored) {
  for (sched::Request& r : sched_.take_finished()) {
    // Its full blocks (prompt and output, still cached) to the KV tier; not after a context
    // shift, whose cache view is no longer a prefix.
    if (tiering_ && r.num_dropped_tokens() == 0)
      tiering_->write_back(r.token_ids().first(static_cast<size_t>(r.num_computed_tokens())),
                           r.cache_scope());
    finish_sample(r.id(), r.finish_reason(), deltas);
  }
  for (RequestId sid : errored) finish_sample(sid, FinishReason::kError, deltas);
  for (RequestId sid : pending_aborts_) finish_sample(sid, FinishReason::kAborted, deltas);
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

StepRows EngineImpl::prompt_logprob_rows(const sched::ScheduledRequest& r,
                                         int32_t query_begin) const {
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

void EngineImpl::record_prompt_logprobs(const sched::SchedulerOutput& out) {
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
      fill_logprobs(&logits_[static_cast<size_t>(rows.prompt_row + k) * vocab],
                    model_.config.n_vocab, prompt[static_cast<size_t>(pos) + 1],
                    g.params.prompt_logprobs, &g.prompt_logprobs.back());
    }
  }
}

void EngineImpl::sample(const sched::SchedulerOutput& out, std::vector<RequestDelta>* deltas) {
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
      Draw d;
      d.sid = sid;
      d.st = &book_.samples.at(sid);
      d.req = req;
      d.logits = logits;
      if (r.num_spec_tokens > 0) {
        d.num_spec = r.num_spec_tokens;
        d.drafts = out.token_ids(r).data() + 1;
        if (draft_model_ && d.st->draft_sampler) d.draft_probs = d.st->draft_probs.data();
      }
      draws_.push_back(d);
    }
  }
  const int64_t n = static_cast<int64_t>(draws_.size());
  auto draw_range = [&](int64_t b, int64_t e, int tid) {
    SamplerScratch& scratch = scratch_[static_cast<size_t>(tid)];
    for (int64_t j = b; j < e; ++j) {
      Draw& d = draws_[static_cast<size_t>(j)];
      d.grammar_done = -1;
      const uint64_t* allowed = d.st->matcher ? fill_allowed(*d.st, *constrained_) : nullptr;
      if (d.num_spec == 0) {
        d.tokens[0] = d.st->sampler.sample(d.logits, d.req->token_ids(), scratch, allowed);
        d.num_tokens = 1;
        continue;
      }
      verify(d, scratch, allowed, tid);
    }
  };
  if (n > 1 && pool_.size() > 1) {
    pool_.run([&](int tid, int nt) {
      const int64_t per = (n + nt - 1) / nt;
      const int64_t b = std::min(n, tid * per), e = std::min(n, b + per);
      draw_range(b, e, tid);
    });
  } else {
    draw_range(0, n, 0);
  }
  for (Draw& dr : draws_) {
    SampleState& st = *dr.st;
    const Group& g = *book_.groups.at(st.group);
    st.usage.cached_tokens = std::max(0, dr.req->num_cached_tokens());
    st.usage.dropped_tokens = dr.req->num_dropped_tokens();
    if (dr.num_spec > 0) {
      ++spec_verifications_;
      spec_draft_tokens_ += dr.num_spec;
      spec_accepted_tokens_ += dr.num_tokens - 1;
      st.spec.observe(dr.num_spec, dr.num_tokens - 1);
    }
    RequestDelta& d = book_.delta_for(dr.sid, deltas);
    if (g.params.prompt_logprobs >= 0 && !st.prompt_logprobs_sent) {
      d.prompt_logprobs = g.prompt_logprobs;
      st.prompt_logprobs_sent = true;
    }
    const std::vector<int32_t>& forced = st.params->forced_tokens;
    // Each emitted token in order; EOS or a stop ends the sample there (the scheduler is told
    // of the tokens up to it only).
    for (int32_t i = 0; i < dr.num_tokens && !st.stop_seen; ++i) {
      const int32_t token = forced.empty() ? dr.tokens[static_cast<size_t>(i)]
                                           : forced[static_cast<size_t>(st.usage.completion_tokens)];
      const float* logits = dr.logits + static_cast<size_t>(i) * vocab;
      sampled_.push_back({dr.sid, token});
      ++output_tokens_;
      if (tok_ && (!st.params->sampling.ignore_eos || st.matcher) && tok_->is_eog(token)) {
        st.stop_seen = true;
        break;
      }
      if (st.matcher) {
        if (i < dr.grammar_advanced) {
          // advanced when the draft was accepted
        } else if (i == dr.num_tokens - 1 && dr.grammar_done >= 0) {
          st.stop_seen = true;  // the draft that completed the grammar (advanced there)
        } else if (advance_grammar(st, *constrained_, token)) {
          st.stop_seen = true;
        }
      }
      d.token_ids.push_back(token);
      if (st.params->logprobs >= 0) {
        d.logprobs.emplace_back();
        fill_logprobs(logits, model_.config.n_vocab, token, st.params->logprobs,
                      &d.logprobs.back());
      }
      ++st.usage.completion_tokens;
      if (st.output) {
        d.text += st.output->push(token);
        if (st.output->stopped()) st.stop_seen = true;
      }
    }
  }
}

}  // namespace hinge::engine_detail
