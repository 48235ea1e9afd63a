// Speculative decoding in the engine (engine/spec_decode.h): the proposal step before
// schedule() — prompt lookup or the draft model — and the verification of one draw's drafts
// (called from sample(), engine_step.cpp).
#include "engine/engine_impl.h"

namespace hinge::engine_detail {

namespace {
// The acceptance a draft model's request assumes before its first verification (half-length
// drafts first: at zero acceptance the controller pauses after 2 + 1 + 1 draft passes instead
// of 4 + 2 + 1 + 1; a good draft is back at full length after two verifications).
constexpr double kDraftModelInitial = 0.5;
}  // namespace

SampleState* EngineImpl::decoding_sample(RequestId id, const sched::Request** r) {
  *r = sched_.find(id);
  if (*r == nullptr || (*r)->fork_pending() ||
      (*r)->num_tokens() - (*r)->num_computed_tokens() != 1)
    return nullptr;
  auto it = book_.samples.find(id);
  return it == book_.samples.end() ? nullptr : &it->second;
}

void EngineImpl::propose_drafts() {
  if (config_.spec_mode == SpecMode::kDraft && config_.spec_verify_k == 0) {
    propose_model_drafts();
    return;
  }
  for (RequestId id : sched_.running()) {
    const sched::Request* r = nullptr;
    SampleState* sp = decoding_sample(id, &r);
    // Forced tokens (evaluation) decode one at a time; a grammar's requests draft too (their
    // masks follow the accepted drafts during verification).
    if (sp == nullptr || !sp->params->forced_tokens.empty()) continue;
    SampleState& st = *sp;
    if (st.spec.k_max() == 0) st.spec = SpecController(config_.spec_k);
    draft_.clear();
    if (config_.spec_verify_k > 0) {  // the verification-cost benchmark
      draft_.assign(static_cast<size_t>(config_.spec_verify_k), r->token_ids().back());
      sched_.set_spec_tokens(id, draft_);
      continue;
    }
    const int32_t k = st.spec.next_k();
    if (k > 0)
      ngram_draft(r->token_ids(), config_.spec_ngram_min, config_.spec_ngram_max, k, &draft_);
    sched_.set_spec_tokens(id, draft_);  // none: clears what an earlier step left
  }
}

void EngineImpl::propose_model_drafts() {
  const size_t vocab = static_cast<size_t>(model_.config.n_vocab);
  draft_jobs_.clear();
  for (RequestId id : sched_.running()) {
    const sched::Request* r = nullptr;
    SampleState* sp = decoding_sample(id, &r);
    if (sp == nullptr) continue;
    SampleState& st = *sp;
    // After a context shift the sequence is no longer the text the positions say: the draft
    // stops drafting for it.
    if (!drafts_with_model(st, *r)) {
      sched_.set_spec_tokens(id, {});
      draft_model_->release(id);
      continue;
    }
    // A draft model's drafts cost a pass each: start at half length, grow as they pass.
    if (st.spec.k_max() == 0) st.spec = SpecController(config_.spec_k, kDraftModelInitial);
    const int32_t k = st.spec.next_k();
    if (k == 0) {
      sched_.set_spec_tokens(id, {});
      continue;
    }
    DraftJob job;
    job.id = id;
    job.tokens = r->token_ids();
    job.k = k;
    job.out = &st.drafts;
    if (st.params->sampling.temperature > 0.0f) {  // drafts drawn from q, kept for verification
      if (!st.draft_sampler) {
        SamplingParams p = sample_params(st.params->sampling, st.index);
        p.seed ^= 0xD1B54A32D192ED03ull;  // the draft's own stream
        p.repetition_penalty = 1.0f;
        p.presence_penalty = p.frequency_penalty = 0.0f;
        st.draft_sampler.emplace(p, model_.config.n_vocab);
      }
      // q of each draft: as many rows as the longest draft so far (not spec_k up front).
      if (st.draft_probs.size() < static_cast<size_t>(k) * vocab)
        st.draft_probs.resize(static_cast<size_t>(k) * vocab);
      job.sampler = &*st.draft_sampler;
      job.probs = st.draft_probs.data();
    }
    draft_jobs_.push_back(job);
  }
  run_draft_jobs();
  for (const DraftJob& job : draft_jobs_) sched_.set_spec_tokens(job.id, *job.out);
}

void EngineImpl::catch_up_prefilled(const sched::SchedulerOutput& out) {
  draft_jobs_.clear();
  for (const sched::ScheduledRequest& r : out.scheduled) {
    const sched::Request* req = nullptr;
    const SampleState* st = decoding_sample(r.id, &req);
    // Only the step that computed the end of the prompt.
    if (st == nullptr || r.first_position >= req->num_kept_prompt_tokens() ||
        !drafts_with_model(*st, *req))
      continue;
    DraftJob job;
    job.id = r.id;
    job.tokens = req->token_ids();
    job.k = 0;
    job.out = &draft_;
    draft_jobs_.push_back(job);
  }
  run_draft_jobs();
}

void EngineImpl::run_draft_jobs() {
  if (draft_jobs_.empty()) return;
  if (Status s = draft_model_->propose(draft_jobs_); !s.ok())
    std::fprintf(stderr, "hinge: warning: the draft model's step failed: %s\n",
                 s.message().c_str());
}

void EngineImpl::verify(Draw& d, SamplerScratch& scratch, const uint64_t* allowed, int tid) {
  const size_t vocab = static_cast<size_t>(model_.config.n_vocab);
  // Row i is sampled with the drafts accepted before it in the history. Only the penalties'
  // window of the history is read: without penalties none is copied.
  const std::span<const int32_t> seq = d.req->token_ids();
  const int64_t window = d.st->sampler.history_window();
  std::vector<int32_t>& history = spec_history_[static_cast<size_t>(tid)];
  history.clear();
  if (window != 0) {
    const size_t keep =
        window < 0 ? seq.size() : std::min(seq.size(), static_cast<size_t>(window));
    history.assign(seq.end() - static_cast<ptrdiff_t>(keep), seq.end());
  }
  d.num_tokens = 0;
  // With a grammar, row i's mask is the state after the drafts accepted before it: an accepted
  // draft advances the matcher here (sample() does not advance it again); the last token
  // emitted advances it there, as without drafts.
  d.grammar_advanced = 0;
  for (int32_t i = 0; i <= d.num_spec; ++i) {
    if (i > 0 && d.st->matcher) allowed = fill_allowed(*d.st, *constrained_);
    const float* row = d.logits + static_cast<size_t>(i) * vocab;
    const std::span<const int32_t> hist = window != 0 ? std::span<const int32_t>(history) : seq;
    int32_t t;
    if (d.draft_probs != nullptr && i < d.num_spec) {
      // Speculative sampling (Leviathan et al., Chen et al.): draft x ~ q is accepted with
      // probability min(1, p(x) / q(x)), one uniform of the sample's stream; else the token is
      // drawn from max(0, p - q), renormalized (a second uniform).
      float* p = spec_probs_[static_cast<size_t>(tid)].data();
      d.st->sampler.distribution(row, hist, scratch, allowed, p);
      const float* q = d.draft_probs + static_cast<size_t>(i) * vocab;
      const int32_t x = d.drafts[i];
      if (d.st->sampler.uniform() * q[x] < p[x]) {
        t = x;
      } else {
        double residual = 0.0;
        for (size_t v = 0; v < vocab; ++v) residual += std::max(0.0f, p[v] - q[v]);
        if (residual > 0.0) {
          for (size_t v = 0; v < vocab; ++v) p[v] = std::max(0.0f, p[v] - q[v]);
        } else {  // p == q up to rounding: p itself
          residual = 0.0;
          for (size_t v = 0; v < vocab; ++v) residual += p[v];
        }
        t = d.st->sampler.draw_weights(p, residual);
      }
    } else {
      // Deterministic drafts (prompt lookup, greedy drafts) and the token after the last
      // draft: the request's own draw; a draft is accepted when the draw equals it.
      t = d.st->sampler.sample(row, hist, scratch, allowed);
    }
    d.tokens[static_cast<size_t>(d.num_tokens++)] = t;
    if (i == d.num_spec || t != d.drafts[i]) break;
    if (d.st->matcher) {
      // EOS, or a draft that completes the grammar, ends the sample: emitted last.
      if ((tok_ && tok_->is_eog(t)) || advance_grammar(*d.st, *constrained_, t)) {
        d.grammar_done = t;
        break;
      }
      ++d.grammar_advanced;
    }
    if (window != 0) history.push_back(t);
  }
}

}  // namespace hinge::engine_detail
