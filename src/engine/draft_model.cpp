#include "engine/draft_model.h"

#include <algorithm>
#include <chrono>
#include <numeric>

#include "common/elapsed.h"
#include "engine/kv_calibration.h"
#include "kernels/ops.h"
#include "model/kv_cache.h"

namespace hinge {

StatusOr<std::unique_ptr<DraftModel>> DraftModel::create(const LoadedModel& model,
                                                         ThreadPool& pool, kv::KvDtype k_dtype,
                                                         kv::KvDtype v_dtype, int32_t block_size,
                                                         int64_t num_tokens,
                                                         int32_t max_batch_tokens,
                                                         int32_t max_seqs) {
  // One group of every layer: sliding-window layers keep all their keys (the kernels read
  // only the window), which a draft's small KV affords.
  const kv::KvSpec spec = kv_spec_for(model.config, k_dtype, v_dtype, block_size);
  const int64_t blocks = std::max<int64_t>(max_seqs, (num_tokens + block_size - 1) / block_size);
  auto arena = kv::KvArena::create(spec, blocks);
  if (!arena.ok())
    return Status::Errorf("--draft-model: its KV cache: {}", arena.status().message());
  std::unique_ptr<DraftModel> d(new DraftModel(model, pool, std::move(*arena), block_size,
                                               max_batch_tokens, max_seqs));
  // A lossy KV format's state fixed before any request, as the target's (kv_calibration.h):
  // the drafts do not depend on what ran first.
  const int64_t ctx = std::min<int64_t>(model.config.context_length, num_tokens);
  auto cal = calibrate_kv(d->transformer_, d->arena_, static_cast<int32_t>(ctx));
  if (!cal.ok()) return Status::Errorf("--draft-model: {}", cal.status().message());
  return d;
}

DraftModel::DraftModel(const LoadedModel& model, ThreadPool& pool, kv::KvArena arena,
                       int32_t block_size, int32_t max_batch_tokens, int32_t max_seqs)
    : model_(model),
      arena_(std::move(arena)),
      transformer_(model.config, model.weights, pool, max_batch_tokens, model.file_mappings),
      block_size_(block_size),
      max_batch_tokens_(max_batch_tokens) {
  free_blocks_.resize(static_cast<size_t>(arena_.num_blocks()));
  // Popped from the back: block 0 first.
  std::iota(free_blocks_.rbegin(), free_blocks_.rend(), 0);
  const size_t seqs = static_cast<size_t>(max_seqs);
  tokens_.reserve(static_cast<size_t>(max_batch_tokens));
  slots_.reserve(static_cast<size_t>(max_batch_tokens));
  attn_.reserve(seqs);
  logit_rows_.reserve(seqs);
  pieces_.reserve(seqs);
  logits_.resize(seqs * static_cast<size_t>(model.config.n_vocab));
  stats_.kv_bytes = arena_.bytes();
}

int32_t DraftModel::valid_prefix(const Seq& s, std::span<const int32_t> tokens) {
  const int32_t len = static_cast<int32_t>(tokens.size());
  int32_t valid = std::min(s.num_computed, s.fed_from);
  for (size_t i = 0; i < s.fed.size() && valid == s.fed_from + static_cast<int32_t>(i); ++i) {
    const int32_t pos = s.fed_from + static_cast<int32_t>(i);
    if (pos >= len || pos >= s.num_computed || tokens[static_cast<size_t>(pos)] != s.fed[i]) break;
    ++valid;
  }
  // The request's last token is fed again when nothing after it is: it gives the logits.
  return std::min(valid, len - 1);
}

bool DraftModel::reserve(Seq& s, int32_t n) {
  const size_t need = static_cast<size_t>((n + block_size_ - 1) / block_size_);
  while (s.blocks.size() < need) {
    if (free_blocks_.empty()) {
      free_seq(s);
      return false;
    }
    s.blocks.push_back(free_blocks_.back());
    free_blocks_.pop_back();
  }
  return true;
}

void DraftModel::free_seq(Seq& s) {
  free_blocks_.insert(free_blocks_.end(), s.blocks.rbegin(), s.blocks.rend());
  s.blocks.clear();
  s.num_computed = 0;
  s.fed_from = 0;
  s.fed.clear();
}

void DraftModel::release(kv::RequestId id) {
  auto it = seqs_.find(id);
  if (it == seqs_.end()) return;
  free_seq(it->second);
  seqs_.erase(it);
}

Status DraftModel::failed(std::span<DraftJob> jobs, Status st) {
  for (DraftJob& job : jobs) job.out->clear();
  for (auto& [id, seq] : seqs_) free_seq(seq);
  seqs_.clear();
  return st;
}

DraftModelStats DraftModel::stats() const {
  DraftModelStats s = stats_;
  s.sequences = static_cast<int32_t>(seqs_.size());
  return s;
}

void DraftModel::draw(DraftJob& job, int32_t i, const float* logits) {
  const int64_t vocab = model_.config.n_vocab;
  if (job.sampler == nullptr) {
    job.out->push_back(static_cast<int32_t>(kernels::argmax(logits, vocab)));
    return;
  }
  float* q = job.probs + static_cast<size_t>(i) * static_cast<size_t>(vocab);
  job.sampler->distribution(logits, {}, scratch_, nullptr, q);
  double total = 0.0;
  for (int64_t t = 0; t < vocab; ++t) total += q[t];
  job.out->push_back(job.sampler->draw_weights(q, total));
}

Status DraftModel::run(std::span<const Piece> pieces, std::span<DraftJob> jobs) {
  tokens_.clear();
  slots_.clear();
  attn_.clear();
  logit_rows_.clear();
  int32_t row = 0;
  for (const Piece& p : pieces) {
    const DraftJob& job = jobs[p.job];
    Seq& s = *job_seqs_[p.job];
    kernels::AttentionSeq a;
    a.query_begin = row;
    a.num_queries = p.count;
    a.first_position = p.first_position;
    a.block_table = s.blocks.data();
    a.num_blocks = static_cast<int32_t>(s.blocks.size());
    attn_.push_back(a);
    for (int32_t j = 0; j < p.count; ++j) {
      const int32_t pos = p.first_position + j;
      // Catch-up rows read the request's tokens; a decode row its own last draft.
      const int32_t t = pos < static_cast<int32_t>(job.tokens.size())
                            ? job.tokens[static_cast<size_t>(pos)]
                            : job.out->back();
      tokens_.push_back(t);
      slots_.push_back(int64_t{s.blocks[static_cast<size_t>(pos / block_size_)]} * block_size_ +
                       pos % block_size_);
    }
    row += p.count;
    if (p.last) logit_rows_.push_back(row - 1);
  }
  if (logit_rows_.size() * static_cast<size_t>(model_.config.n_vocab) > logits_.size())
    logits_.resize(logit_rows_.size() * static_cast<size_t>(model_.config.n_vocab));
  ForwardBatch b;
  b.token_ids = tokens_;
  b.slot_mapping = slots_;
  b.seqs = attn_;
  b.logit_rows = logit_rows_;
  ++stats_.forward_passes;
  stats_.tokens_computed += row;
  HINGE_RETURN_IF_ERROR(transformer_.forward_batch(b, arena_, logits_.data()));
  const size_t vocab = static_cast<size_t>(model_.config.n_vocab);
  size_t lr = 0;
  for (const Piece& p : pieces) {
    Seq& s = *job_seqs_[p.job];
    s.num_computed = std::max(s.num_computed, p.first_position + p.count);
    if (!p.last) continue;
    DraftJob& job = jobs[p.job];
    draw(job, static_cast<int32_t>(job.out->size()), &logits_[lr++ * vocab]);
  }
  return Status::Ok();
}

Status DraftModel::propose(std::span<DraftJob> jobs) {
  const AddElapsed timed(&stats_.seconds);
  const int64_t context = model_.config.context_length;
  job_seqs_.assign(jobs.size(), nullptr);
  pending_.assign(jobs.size(), 0);
  int32_t k_max = 0;
  // 1. Sync each sequence with its request; room for the drafts it will feed.
  for (size_t j = 0; j < jobs.size(); ++j) {
    DraftJob& job = jobs[j];
    job.out->clear();
    const int32_t len = static_cast<int32_t>(job.tokens.size());
    if (job.k < 0 || len < (job.k > 0 ? 1 : 2)) continue;
    Seq& s = seqs_[job.id];
    // Near the draft's context, fewer drafts.
    if (job.k > 1) job.k = static_cast<int32_t>(std::min<int64_t>(job.k, context - len + 1));
    const int32_t end = len + job.k - 1;  // positions the draft computes: [0, end)
    if (job.k < 1 || end > context || !reserve(s, end)) {
      free_seq(s);
      continue;
    }
    s.num_computed = valid_prefix(s, job.tokens);  // the rest is rolled back
    if (job.k == 0) s.num_computed = std::min(s.num_computed, len - 1);
    pending_[j] = s.num_computed;
    s.fed_from = job.k > 0 ? len : len - 1;  // a catch-up job feeds all but the last token
    s.fed.clear();
    job_seqs_[j] = &s;
    k_max = std::max(k_max, job.k);
  }
  // 2. Catch up, every job in the same passes, chunks of at most max_batch_tokens.
  for (;;) {
    pieces_.clear();
    int32_t budget = max_batch_tokens_;
    for (size_t j = 0; j < jobs.size() && budget > 0; ++j) {
      if (job_seqs_[j] == nullptr) continue;
      const int32_t len = static_cast<int32_t>(jobs[j].tokens.size());
      const int32_t stop = jobs[j].k > 0 ? len : len - 1;
      const int32_t n = std::min(budget, stop - pending_[j]);
      if (n <= 0) continue;
      pieces_.push_back({j, pending_[j], n, jobs[j].k > 0 && pending_[j] + n == len});
      pending_[j] += n;
      budget -= n;
    }
    if (pieces_.empty()) break;
    if (Status st = run(pieces_, jobs); !st.ok()) return failed(jobs, st);
  }
  // 3. Decode: draft i + 1 of every job that wants it from draft i (passes of at most
  // max_batch_tokens requests).
  for (int32_t i = 1; i < k_max; ++i) {
    for (size_t from = 0; from < jobs.size();) {
      pieces_.clear();
      for (; from < jobs.size() && static_cast<int32_t>(pieces_.size()) < max_batch_tokens_;
           ++from) {
        if (job_seqs_[from] == nullptr || jobs[from].k <= i) continue;
        const int32_t pos = static_cast<int32_t>(jobs[from].tokens.size()) + i - 1;
        pieces_.push_back({from, pos, 1, true});
        job_seqs_[from]->fed.push_back(jobs[from].out->back());
      }
      if (pieces_.empty()) break;
      if (Status st = run(pieces_, jobs); !st.ok()) return failed(jobs, st);
    }
  }
  return Status::Ok();
}

}  // namespace hinge
