#include "sched/scheduler.h"

#include "sched/kv_demand.h"

#include <algorithm>
#include <utility>

namespace hinge::sched {

const char* request_status_name(RequestStatus s) {
  switch (s) {
    case RequestStatus::kWaiting: return "waiting";
    case RequestStatus::kRunning: return "running";
    case RequestStatus::kPreempted: return "preempted";
    case RequestStatus::kFinished: return "finished";
  }
  return "?";
}

const char* finish_reason_name(FinishReason r) {
  switch (r) {
    case FinishReason::kNone: return "none";
    case FinishReason::kLength: return "length";
    case FinishReason::kStop: return "stop";
    case FinishReason::kAborted: return "abort";
    case FinishReason::kError: return "error";
  }
  return "?";
}

const char* context_policy_name(ContextPolicy p) {
  switch (p) {
    case ContextPolicy::kError: return "error";
    case ContextPolicy::kShift: return "shift";
  }
  return "?";
}

Status SchedulerConfig::validate() const {
  if (max_num_batched_tokens < 1)
    return Status::Errorf("max_num_batched_tokens must be >= 1, got {}", max_num_batched_tokens);
  if (max_num_seqs < 1) return Status::Errorf("max_num_seqs must be >= 1, got {}", max_num_seqs);
  if (block_size_tokens < 1)
    return Status::Errorf("block_size_tokens must be >= 1, got {}", block_size_tokens);
  if (num_kv_blocks < 1) return Status::Errorf("num_kv_blocks must be >= 1, got {}", num_kv_blocks);
  if (num_kv_groups < 1) return Status::Errorf("num_kv_groups must be >= 1, got {}", num_kv_groups);
  if (!kv_group_windows.empty() && kv_group_windows.size() != static_cast<size_t>(num_kv_groups))
    return Status::Errorf("{} KV group windows for {} groups", kv_group_windows.size(), num_kv_groups);
  for (int32_t w : kv_group_windows)
    if (w < 0) return Status::Errorf("KV group window {} is negative", w);
  return Status::Ok();
}

namespace {
kv::KvCacheConfig kv_config(const SchedulerConfig& c) {
  const Status st = c.validate();
  HINGE_CHECK_MSG(st.ok(), "scheduler config: {}", st.message());
  return kv::KvCacheConfig{.num_blocks = c.num_kv_blocks,
                           .block_size_tokens = c.block_size_tokens,
                           .enable_prefix_cache = c.enable_prefix_cache,
                           .fingerprint = c.cache_fingerprint,
                           .num_groups = c.num_kv_groups,
                           .group_windows = c.kv_group_windows};
}
}  // namespace

Scheduler::Scheduler(const SchedulerConfig& config)
    : config_(config),
      limit_seqs_(config.max_num_seqs),
      limit_tokens_(config.max_num_batched_tokens),
      kv_(kv_config(config)) {}

void Scheduler::set_limits(int32_t max_num_seqs, int32_t max_batched_tokens) {
  limit_seqs_ = max_num_seqs > 0 ? std::min(max_num_seqs, config_.max_num_seqs)
                                 : config_.max_num_seqs;
  limit_tokens_ = max_batched_tokens > 0
                      ? std::min(max_batched_tokens, config_.max_num_batched_tokens)
                      : config_.max_num_batched_tokens;
}

Status Scheduler::add_request(RequestId id, RequestParams params) {
  HINGE_RETURN_IF_ERROR(check_request(id, params));
  for (RequestId sid : params.sample_ids) reserved_ids_.insert(sid);
  requests_.emplace(id, Request(id, std::move(params), next_arrival_seq_++));
  insert_sorted(&waiting_, id);
  return Status::Ok();
}

Status Scheduler::check_request(RequestId id, const RequestParams& params) const {
  if (requests_.contains(id)) return Status::Errorf("request {} already exists", id.value);
  if (reserved_ids_.contains(id))
    return Status::Errorf("request {}: id reserved for a parallel sample of another request",
                          id.value);
  if (params.prompt_token_ids.empty()) return Status::Errorf("request {}: empty prompt", id.value);
  if (params.max_new_tokens < 1)
    return Status::Errorf("request {}: max_new_tokens must be >= 1, got {}", id.value,
                          params.max_new_tokens);
  if (params.n < 1 || params.n > config_.max_num_seqs)
    return Status::Errorf("request {}: n = {} parallel samples, must be in [1, max_num_seqs {}]",
                          id.value, params.n, config_.max_num_seqs);
  if (static_cast<int64_t>(params.sample_ids.size()) != params.n - 1)
    return Status::Errorf("request {}: n = {} needs {} sample ids, got {}", id.value, params.n,
                          params.n - 1, params.sample_ids.size());
  for (size_t k = 0; k < params.sample_ids.size(); ++k) {
    const RequestId sid = params.sample_ids[k];
    bool repeated = sid == id;
    for (size_t j = 0; j < k; ++j) repeated = repeated || params.sample_ids[j] == sid;
    if (repeated) return Status::Errorf("request {}: sample id {} repeated", id.value, sid.value);
    if (requests_.contains(sid) || reserved_ids_.contains(sid))
      return Status::Errorf("request {}: sample id {} already in use", id.value, sid.value);
  }
  // The request must fit alone, or preemption could never help it.
  const int64_t num_prompt = static_cast<int64_t>(params.prompt_token_ids.size());
  if (shifts() && num_prompt > window_tokens())
    return Status::Errorf("request {}: prompt {} is longer than the context window {}", id.value,
                          num_prompt, window_tokens());
  for (size_t k = 0; k < params.turn_starts.size(); ++k) {
    const int32_t t = params.turn_starts[k];
    if (t < 0 || t > num_prompt || (k > 0 && t <= params.turn_starts[k - 1]))
      return Status::Errorf("request {}: turn starts must increase strictly within the prompt "
                            "[0, {}]; {} at index {}", id.value, num_prompt, t, k);
  }
  if (shifts()) {
    const int32_t bs = config_.block_size_tokens;
    const int32_t sink_blocks = (std::max(config_.sink_tokens, params.keep_tokens) + bs - 1) / bs;
    if (sink_blocks + 2 > window_tokens() / bs)
      return Status::Errorf(
          "request {}: keeping {} leading tokens leaves less than two blocks of the {}-token "
          "window to shift", id.value, std::max(config_.sink_tokens, params.keep_tokens),
          window_tokens());
  }
  // A shifting sequence never holds more than its window.
  const int64_t max_new = shifts() ? std::clamp<int64_t>(window_tokens() - num_prompt, 1,
                                                         params.max_new_tokens)
                                   : params.max_new_tokens;
  const int64_t max_blocks = worst_case_kv_blocks(
      num_prompt, max_new, params.n,
      KvDemandShape::of(config_.block_size_tokens, config_.num_kv_groups,
                        config_.kv_group_windows, config_.max_num_batched_tokens));
  if (max_blocks > config_.num_kv_blocks) {
    if (params.n == 1)
      return Status::Errorf(
          "request {}: prompt {} + max_new_tokens {} needs {} KV blocks, the cache has {}",
          id.value, num_prompt, params.max_new_tokens, max_blocks, config_.num_kv_blocks);
    return Status::Errorf(
        "request {}: prompt {} + max_new_tokens {} for {} samples needs {} KV blocks, the cache "
        "has {}",
        id.value, num_prompt, params.max_new_tokens, params.n, max_blocks, config_.num_kv_blocks);
  }
  return Status::Ok();
}

bool Scheduler::abort_request(RequestId id) {
  if (!requests_.contains(id)) return false;
  finish(id, FinishReason::kAborted);
  return true;
}

bool Scheduler::finish_request(RequestId id, FinishReason reason) {
  HINGE_CHECK(reason != FinishReason::kNone);
  if (!requests_.contains(id)) return false;
  finish(id, reason);
  return true;
}

SchedulerOutput Scheduler::schedule() {
  SchedulerOutput out;
  schedule(&out);
  return out;
}

void Scheduler::schedule(SchedulerOutput* out_ptr) {
  HINGE_CHECK_MSG(!awaiting_update_,
                  "schedule() called twice without update() or abort_step()");
  awaiting_update_ = true;
  SchedulerOutput& out = *out_ptr;
  out.clear();
  out.finished.swap(finished_ids_);
  int32_t budget = limit_tokens_;

  // 1. Running requests. The victim of a preemption is always running_.back(): the lowest
  // (priority, arrival), which is at or after the request being scheduled, so nothing already
  // in `out` is ever preempted.
  size_t i = 0;
  while (i < running_.size() && budget > 0) {
    Request& r = get(running_[i]);
    if (shifts()) shift_context(r);  // a full window: drop blocks before growing
    const int32_t num_new = std::min(r.num_tokens() - r.num_computed_tokens_, budget);
    HINGE_CHECK_MSG(num_new > 0, "running request {} has nothing to compute", r.id().value);
    std::optional<kv::SlotAllocation> alloc;
    // Draft tokens ride along only where the cache has room for them: never a preemption.
    int32_t num_spec = spec_room(r, budget);
    if (num_spec > 0) {
      alloc = kv_.allocate_slots(r.id(), num_new + num_spec);
      if (!alloc) num_spec = 0;
    }
    for (; !alloc;) {
      alloc = kv_.allocate_slots(r.id(), num_new);
      if (alloc) break;
      const RequestId victim = running_.back();
      preempt(victim);
      out.preempted.push_back(victim);
      if (victim == r.id()) break;
    }
    if (!alloc) break;  // r itself was preempted; it was the last running request
    out.block_copies.insert(out.block_copies.end(), alloc->copies.begin(), alloc->copies.end());
    // Real tokens only: a block full only with drafts is cached once they are accepted.
    kv_.cache_full_blocks(r.id(), r.token_ids(), r.num_computed_tokens_ + num_new);
    add_scheduled(r, num_new + num_spec, &out, num_spec);
    r.num_inflight_tokens_ = num_new + num_spec;
    num_spec_tokens_ += num_spec;
    budget -= num_new + num_spec;
    ++i;
  }

  // 2. Waiting requests, only when no running request had to give way this step.
  // A request with fork_pending() needs n seq slots (its samples after the fork).
  while (out.preempted.empty() && !waiting_.empty() && budget > 0) {
    Request& r = get(waiting_.front());
    // (A lowered limit never stops the first one: n <= the configured max_num_seqs.)
    if (num_running_seqs_ > 0 && num_running_seqs_ + num_seqs(r) > limit_seqs_) break;
    if (shifts()) shift_context(r);  // preempted after a shift: the tokens of its window
    kv_.add_request(r.id(), r.cache_scope(), r.max_tokens());
    kv_.extend_block_hashes(r.token_ids(), r.cache_scope(), &r.block_hashes_);
    const kv::ComputedBlocks hit =
        r.skip_prefix_cache()
            ? kv::ComputedBlocks{}
            : kv_.get_computed_blocks(r.token_ids(), r.cache_scope(), r.block_hashes_);
    const int32_t num_new = std::min(r.num_tokens() - hit.num_cached_tokens, budget);
    auto alloc = kv_.allocate_slots(r.id(), num_new, &hit);
    if (!alloc) {
      kv_.free(r.id());  // holds no blocks: just forgets it
      break;
    }
    waiting_.erase(waiting_.begin());
    insert_sorted(&running_, r.id());
    num_running_seqs_ += num_seqs(r);
    r.status_ = RequestStatus::kRunning;
    r.num_computed_tokens_ = hit.num_cached_tokens;
    if (r.num_cached_tokens_ < 0) r.num_cached_tokens_ = hit.num_cached_tokens;
    out.block_copies.insert(out.block_copies.end(), alloc->copies.begin(), alloc->copies.end());
    // Cached now, not after the step: the next waiting request with the same prefix hits.
    kv_.cache_full_blocks(r.id(), r.token_ids(), r.num_computed_tokens_ + num_new,
                          r.block_hashes_);
    add_scheduled(r, num_new, &out);
    r.num_inflight_tokens_ = num_new;
    budget -= num_new;
  }

  out.num_scheduled_tokens = limit_tokens_ - budget;
  // Slots last, group-major, so each group's are one span (SchedulerOutput::group_slots).
  for (int32_t g = 0; g < kv_.num_groups(); ++g)
    for (const ScheduledRequest& s : out.scheduled)
      for (int32_t p = s.first_position; p < s.end_position(); ++p)
        out.all_slots.push_back(kv_.slot(s.id, p, g));
  num_scheduled_tokens_ += out.num_scheduled_tokens;
  ++num_steps_;
}

void Scheduler::update(const SchedulerOutput& output, std::span<const SampledToken> sampled) {
  HINGE_CHECK_MSG(awaiting_update_, "update() without schedule()");
  awaiting_update_ = false;
  size_t next_sample = 0;
  for (const ScheduledRequest& s : output.scheduled) {
    HINGE_CHECK(s.num_samples >= 1 &&
                output.sample_ids(s).size() == static_cast<size_t>(s.num_samples - 1));
    auto it = requests_.find(s.id);
    if (it == requests_.end()) {  // aborted or finished by the caller since schedule()
      if (!s.samples) continue;
      if (s.num_spec_tokens > 0) {  // its accepted drafts and next token, if given
        while (next_sample < sampled.size() && sampled[next_sample].id == s.id) ++next_sample;
        continue;
      }
      for (int32_t k = 0; k < s.num_samples; ++k) {
        const RequestId expected = k == 0 ? s.id : output.sample_ids(s)[static_cast<size_t>(k - 1)];
        if (next_sample < sampled.size() && sampled[next_sample].id == expected) ++next_sample;
      }
      continue;
    }
    Request& r = it->second;
    HINGE_CHECK_MSG(
        r.status_ == RequestStatus::kRunning && r.num_computed_tokens_ == s.first_position,
        "request {}: update of a stale schedule ({} computed, scheduled from {})", r.id().value,
        r.num_computed_tokens_, s.first_position);
    HINGE_CHECK(r.num_inflight_tokens_ == s.num_new_tokens);
    if (s.num_spec_tokens > 0) {
      update_spec(r, output, s, sampled, &next_sample);
      continue;
    }
    r.num_inflight_tokens_ = 0;
    r.num_computed_tokens_ += s.num_new_tokens;
    kv_.release_behind_window(r.id(), r.num_computed_tokens_);
    if (!s.samples) continue;
    const size_t n = static_cast<size_t>(s.num_samples);
    HINGE_CHECK_MSG(next_sample + n <= sampled.size() && sampled[next_sample].id == s.id,
                    "request {}: no sampled token given", s.id.value);
    if (n > 1) {
      HINGE_CHECK_MSG(r.fork_pending() && s.num_samples == r.n(),
                      "request {}: {} samples scheduled but no fork pending", s.id.value, n);
      for (size_t k = 1; k < n; ++k) {
        HINGE_CHECK_MSG(sampled[next_sample + k].id == output.sample_ids(s)[k - 1],
                        "request {}: sampled token {} is for {}, sample {} expected", s.id.value,
                        k, sampled[next_sample + k].id.value, output.sample_ids(s)[k - 1].value);
        fork_sample(r, static_cast<int32_t>(k), sampled[next_sample + k].token);
      }
      // The parent now counts one seq slot, each sample one: num_running_seqs_ is unchanged.
      r.forked_ = true;
      for (RequestId sid : r.sample_ids_) reserved_ids_.erase(sid);
    }
    r.token_ids_.push_back(sampled[next_sample].token);
    next_sample += n;
    // Each sample finishes on its own max_new_tokens (all the same right after a fork).
    for (size_t k = 0; k < n; ++k) {
      const RequestId id = k == 0 ? s.id : output.sample_ids(s)[k - 1];
      const Request& q = get(id);
      if (q.num_output_tokens() >= q.max_new_tokens()) finish(id, FinishReason::kLength);
    }
  }
  HINGE_CHECK_MSG(next_sample == sampled.size(), "{} sampled tokens given, {} used",
                  sampled.size(), next_sample);
}

void Scheduler::set_spec_tokens(RequestId id, std::span<const int32_t> draft) {
  auto it = requests_.find(id);
  if (it == requests_.end()) return;
  it->second.spec_token_ids_.assign(draft.begin(), draft.end());
}

int32_t Scheduler::spec_room(const Request& r, int32_t budget) const {
  if (r.spec_token_ids_.empty() || r.fork_pending() ||
      r.num_tokens() - r.num_computed_tokens_ != 1)
    return 0;
  int64_t k = std::min<int64_t>(static_cast<int64_t>(r.spec_token_ids_.size()), budget - 1);
  // The accepted drafts and the token after them never pass max_new_tokens or the context.
  k = std::min<int64_t>(k, r.max_new_tokens() - r.num_output_tokens() - 1);
  if (config_.max_model_len > 0) k = std::min<int64_t>(k, config_.max_model_len - r.num_tokens());
  if (shifts()) k = std::min<int64_t>(k, window_tokens() - r.num_tokens());
  return static_cast<int32_t>(std::max<int64_t>(k, 0));
}

void Scheduler::update_spec(Request& r, const SchedulerOutput& output, const ScheduledRequest& s,
                            std::span<const SampledToken> sampled, size_t* next) {
  HINGE_CHECK(s.samples && s.num_samples == 1);
  const auto drafts = output.token_ids(s).subspan(1);
  size_t m = 0;  // entries for r: accepted drafts, then one more token
  while (*next + m < sampled.size() && sampled[*next + m].id == s.id && m <= drafts.size()) ++m;
  HINGE_CHECK_MSG(m >= 1, "request {}: no sampled token given", s.id.value);
  for (size_t j = 0; j + 1 < m; ++j)
    HINGE_CHECK_MSG(sampled[*next + j].token == drafts[j],
                    "request {}: token {} given as an accepted draft is not draft {}",
                    s.id.value, sampled[*next + j].token, j);
  // Computed: the real token and the accepted drafts. The rejected drafts' slots go back.
  r.num_inflight_tokens_ = 0;
  r.num_computed_tokens_ = s.first_position + static_cast<int32_t>(m);
  kv_.trim_slots(r.id(), r.num_computed_tokens_);
  kv_.release_behind_window(r.id(), r.num_computed_tokens_);
  r.spec_token_ids_.clear();
  num_spec_accepted_ += static_cast<int64_t>(m) - 1;
  for (size_t j = 0; j < m; ++j) r.token_ids_.push_back(sampled[*next + j].token);
  HINGE_CHECK(r.num_output_tokens() <= r.max_new_tokens());  // spec_room's bound
  *next += m;
  // The accepted drafts' full blocks are prefix-cache entries now.
  kv_.cache_full_blocks(r.id(), r.token_ids(), r.num_computed_tokens_);
  if (r.num_output_tokens() >= r.max_new_tokens()) finish(r.id(), FinishReason::kLength);
}

void Scheduler::abort_step(const SchedulerOutput& output) {
  HINGE_CHECK_MSG(awaiting_update_, "abort_step() without schedule()");
  awaiting_update_ = false;
  for (const ScheduledRequest& s : output.scheduled) {
    auto it = requests_.find(s.id);
    if (it == requests_.end()) continue;  // aborted or finished by the caller since schedule()
    // schedule() registered the blocks this step fills as prefix-cache entries; the forward
    // pass never wrote them (or only partly): drop them before the blocks go back to the pool,
    // or a later request with this prefix would hit KV that was never computed. A request of
    // the same step that hit them fails here too (it is in output.scheduled).
    kv_.uncache_uncomputed(s.id, it->second.num_computed_tokens_);
    it->second.num_inflight_tokens_ = 0;
    finish(s.id, FinishReason::kError);
  }
}

void Scheduler::fork_sample(Request& parent, int32_t k, int32_t token) {
  HINGE_CHECK(parent.fork_pending() && parent.status_ == RequestStatus::kRunning &&
              parent.num_output_tokens() == 0 && parent.num_inflight_tokens_ == 0);
  const RequestId child_id = parent.sample_ids_[static_cast<size_t>(k - 1)];
  kv_.fork(parent.id(), child_id);
  // Same tokens, computed and cached counts, priority and arrival as the parent.
  Request child = parent;
  child.id_ = child_id;
  child.n_ = 1;
  child.sample_ids_.clear();
  child.parent_id_ = parent.id();
  child.sample_index_ = k;
  child.token_ids_.reserve(static_cast<size_t>(parent.max_tokens()));
  child.token_ids_.push_back(token);
  requests_.emplace(child_id, std::move(child));  // references to parent stay valid
  insert_sorted(&running_, child_id);
}

std::vector<Request> Scheduler::take_finished() { return std::exchange(finished_, {}); }

const Request* Scheduler::find(RequestId id) const {
  auto it = requests_.find(id);
  return it == requests_.end() ? nullptr : &it->second;
}

SchedulerStats Scheduler::stats() const {
  return SchedulerStats{.num_running = static_cast<int32_t>(running_.size()),
                        .num_waiting = static_cast<int32_t>(waiting_.size()),
                        .num_steps = num_steps_,
                        .num_preemptions = num_preemptions_,
                        .num_scheduled_tokens = num_scheduled_tokens_,
                        .num_finished = num_finished_,
                        .num_spec_tokens = num_spec_tokens_,
                        .num_spec_accepted = num_spec_accepted_,
                        .num_context_shifts = num_context_shifts_,
                        .num_dropped_tokens = num_dropped_tokens_};
}

Status Scheduler::check_invariants() const {
  HINGE_RETURN_IF_ERROR(kv_.check_invariants());
  if (running_.size() + waiting_.size() != requests_.size())
    return Status::Errorf("{} running + {} waiting != {} live requests", running_.size(),
                          waiting_.size(), requests_.size());
  int32_t num_seqs_recount = 0;
  for (RequestId id : running_) {
    auto it = requests_.find(id);
    if (it != requests_.end()) num_seqs_recount += num_seqs(it->second);
  }
  if (num_seqs_recount != num_running_seqs_)
    return Status::Errorf("{} running seqs counted, {} recounted", num_running_seqs_,
                          num_seqs_recount);
  if (num_running_seqs_ > config_.max_num_seqs)
    return Status::Errorf("{} running seqs > max_num_seqs {}", num_running_seqs_,
                          config_.max_num_seqs);
  size_t num_reserved = 0;
  for (const auto& [id, r] : requests_) {
    if (r.id() != id)
      return Status::Errorf("request {} stored under id {}", r.id().value, id.value);
    if (!r.fork_pending()) continue;
    if (r.num_output_tokens() != 0)
      return Status::Errorf("request {}: fork pending after {} output tokens", id.value,
                            r.num_output_tokens());
    for (RequestId sid : r.sample_ids()) {
      if (!reserved_ids_.contains(sid) || requests_.contains(sid))
        return Status::Errorf("request {}: sample id {} not reserved or live", id.value, sid.value);
    }
    num_reserved += r.sample_ids().size();
  }
  if (num_reserved != reserved_ids_.size())
    return Status::Errorf("{} sample ids reserved, {} pending", reserved_ids_.size(),
                          num_reserved);
  for (const auto* queue : {&running_, &waiting_}) {
    for (size_t i = 0; i < queue->size(); ++i) {
      const RequestId id = (*queue)[i];
      if (!requests_.contains(id)) return Status::Errorf("queued request {} unknown", id.value);
      if (i > 0 && !before((*queue)[i - 1], id))
        return Status::Errorf("queue out of order at request {}", id.value);
    }
  }
  for (RequestId id : running_) {
    const Request& r = requests_.at(id);
    if (r.status_ != RequestStatus::kRunning)
      return Status::Errorf("running request {} has status {}", id.value,
                            request_status_name(r.status_));
    const int32_t num_reserved = r.num_computed_tokens_ + r.num_inflight_tokens_;
    if (!kv_.has_request(id) || kv_.num_tokens(id) != num_reserved)
      return Status::Errorf("running request {}: {} computed + {} scheduled tokens but {} KV slots",
                            id.value, r.num_computed_tokens_, r.num_inflight_tokens_,
                            kv_.has_request(id) ? kv_.num_tokens(id) : -1);
    if (r.num_inflight_tokens_ != 0 && !awaiting_update_)
      return Status::Errorf("running request {}: scheduled tokens outside a step", id.value);
    // (In a step, the drafts being verified are scheduled beyond the request's tokens.)
    if (r.num_computed_tokens_ + r.num_inflight_tokens_ >
            r.num_tokens() + static_cast<int32_t>(r.spec_token_ids_.size()) ||
        (!awaiting_update_ && r.num_computed_tokens_ >= r.num_tokens()))
      return Status::Errorf("running request {}: nothing left to compute", id.value);
  }
  for (RequestId id : waiting_) {
    const Request& r = requests_.at(id);
    if (r.status_ != RequestStatus::kWaiting && r.status_ != RequestStatus::kPreempted)
      return Status::Errorf("waiting request {} has status {}", id.value,
                            request_status_name(r.status_));
    if (kv_.has_request(id) || r.num_computed_tokens_ != 0 || r.num_inflight_tokens_ != 0)
      return Status::Errorf("waiting request {} holds KV", id.value);
  }
  return Status::Ok();
}

Request& Scheduler::get(RequestId id) {
  auto it = requests_.find(id);
  HINGE_CHECK_MSG(it != requests_.end(), "unknown request {}", id.value);
  return it->second;
}

bool Scheduler::before(RequestId a, RequestId b) const {
  const Request& ra = requests_.at(a);
  const Request& rb = requests_.at(b);
  if (ra.priority() != rb.priority()) return ra.priority() < rb.priority();
  if (ra.arrival_seq() != rb.arrival_seq()) return ra.arrival_seq() < rb.arrival_seq();
  return ra.sample_index() < rb.sample_index();  // samples of one request share its arrival
}

void Scheduler::insert_sorted(std::vector<RequestId>* queue, RequestId id) {
  auto pos = std::upper_bound(queue->begin(), queue->end(), id,
                              [this](RequestId a, RequestId b) { return before(a, b); });
  queue->insert(pos, id);
}

int32_t Scheduler::preempt_to_fit(int32_t max_used_blocks) {
  int32_t n = 0;
  auto used = [this] { return kv_.pool().counters().num_used_blocks - kv_.num_withheld(); };
  while (running_.size() > 1 && used() > max_used_blocks) {
    preempt(running_.back());
    ++n;
  }
  return n;
}

void Scheduler::preempt(RequestId id) {
  Request& r = get(id);
  HINGE_CHECK(r.status_ == RequestStatus::kRunning);
  auto it = std::find(running_.begin(), running_.end(), id);
  HINGE_CHECK(it != running_.end());
  running_.erase(it);
  num_running_seqs_ -= num_seqs(r);
  kv_.free(id);
  r.num_computed_tokens_ = 0;
  r.num_inflight_tokens_ = 0;
  r.block_offsets_.clear();  // recomputed at the positions of its window
  r.spec_token_ids_.clear();
  r.status_ = RequestStatus::kPreempted;
  ++r.num_preemptions_;
  ++num_preemptions_;
  insert_sorted(&waiting_, id);
}

void Scheduler::finish(RequestId id, FinishReason reason) {
  auto it = requests_.find(id);
  HINGE_CHECK(it != requests_.end());
  Request& r = it->second;
  auto& queue = r.status_ == RequestStatus::kRunning ? running_ : waiting_;
  auto qit = std::find(queue.begin(), queue.end(), id);
  HINGE_CHECK(qit != queue.end());
  queue.erase(qit);
  if (r.status_ == RequestStatus::kRunning) num_running_seqs_ -= num_seqs(r);
  if (r.fork_pending())  // finished before its fork: the samples never exist
    for (RequestId sid : r.sample_ids_) reserved_ids_.erase(sid);
  if (kv_.has_request(id)) kv_.free(id);
  r.status_ = RequestStatus::kFinished;
  r.finish_reason_ = reason;
  finished_ids_.push_back(id);
  finished_.push_back(std::move(r));
  requests_.erase(it);
  ++num_finished_;
}

void Scheduler::add_scheduled(const Request& r, int32_t num_new, SchedulerOutput* out,
                              int32_t num_spec) const {
  ScheduledRequest s;
  s.id = r.id();
  s.first_position = r.num_computed_tokens_;
  s.num_new_tokens = num_new;
  s.num_spec_tokens = num_spec;
  s.samples = s.end_position() - num_spec == r.num_tokens();
  s.sample_begin = static_cast<int32_t>(out->all_sample_ids.size());
  if (s.samples && r.fork_pending()) {  // the prompt is complete: n samples, fork in update()
    s.num_samples = r.n();
    out->all_sample_ids.insert(out->all_sample_ids.end(), r.sample_ids().begin(),
                               r.sample_ids().end());
  }
  s.token_begin = static_cast<int32_t>(out->all_token_ids.size());
  const auto tokens = r.token_ids().subspan(static_cast<size_t>(s.first_position),
                                            static_cast<size_t>(num_new - num_spec));
  out->all_token_ids.insert(out->all_token_ids.end(), tokens.begin(), tokens.end());
  out->all_token_ids.insert(out->all_token_ids.end(), r.spec_token_ids_.begin(),
                            r.spec_token_ids_.begin() + num_spec);
  s.block_begin = static_cast<int32_t>(out->all_block_ids.size());
  s.num_blocks = kv_.block_table(r.id()).num_blocks();
  for (int32_t g = 0; g < kv_.num_groups(); ++g)
    for (const kv::BlockId b : kv_.block_table(r.id(), g).blocks())
      out->all_block_ids.push_back(b.value);
  if (!r.block_offsets_.empty()) {  // blocks allocated since the last shift: offset 0
    s.offset_begin = static_cast<int32_t>(out->all_block_offsets.size());
    const size_t have = std::min(r.block_offsets_.size(), static_cast<size_t>(s.num_blocks));
    out->all_block_offsets.insert(out->all_block_offsets.end(), r.block_offsets_.begin(),
                                  r.block_offsets_.begin() + static_cast<ptrdiff_t>(have));
    out->all_block_offsets.resize(out->all_block_offsets.size() + s.num_blocks - have, 0);
  }
  out->scheduled.push_back(s);
}

}  // namespace hinge::sched
