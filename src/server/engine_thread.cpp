#include "server/engine_thread.h"

#include <algorithm>
#include <cstdio>
#include <future>

#include "common/units.h"
#include <utility>

namespace hinge {

namespace {
constexpr auto kMapRefresh = std::chrono::milliseconds(250);
constexpr auto kQueuePoll = std::chrono::milliseconds(100);  // expiry checks while queued
constexpr auto kIdleStatsRefresh = std::chrono::seconds(1);  // stats() while idle
}  // namespace

const char* submit_result_name(SubmitResult::Kind k) {
  using K = SubmitResult::Kind;
  switch (k) {
    case K::kAccepted: return "accepted";
    case K::kInvalid: return "invalid";
    case K::kTooLarge: return "too_large";
    case K::kUserLimit: return "user_limit";
    case K::kQueueFull: return "queue_full";
    case K::kTimedOut: return "queue_timeout";
    case K::kShuttingDown: return "shutting_down";
    case K::kPressure: return "memory_pressure";
    case K::kCancelled: return "cancelled";
  }
  return "?";
}

EngineThread::EngineThread(std::unique_ptr<Engine> engine,
                           std::optional<sched::AdmissionConfig> admission,
                           PressurePolicyConfig pressure_policy)
    : engine_(std::move(engine)), pressure_policy_(pressure_policy) {
  HINGE_CHECK(engine_ != nullptr);
  const EngineStats s = engine_->stats();
  max_model_len_ = engine_->max_model_len();
  block_size_ = engine_->config().block_size;
  kv_groups_ = engine_->kv_spec().num_groups();
  kv_demand_ = sched::KvDemandShape::of(block_size_, kv_groups_, engine_->kv_spec().group_windows(),
                                        engine_->config().max_batched_tokens);
  detokenizes_ = engine_->config().detokenize;
  shifts_context_ = engine_->config().context_policy == ContextPolicy::kShift;
  num_blocks_ = s.kv_blocks_total;
  if (admission) {
    admission->num_blocks = num_blocks_;
    admission->block_size_tokens = block_size_;
    admission->num_kv_groups = kv_groups_;
    admission_.emplace(*admission);
    max_request_blocks_ = admission_->config().max_request_blocks();
  }
  stats_.engine = s;
  stats_.kv_block_map = engine_->kv_block_map();
  if (admission_) stats_.admission = admission_->stats(0);
  thread_ = std::thread([this] { loop(); });
}

EngineThread::~EngineThread() { stop(); }

SubmitTicket EngineThread::enqueue(GenerateRequest request, SubmitOptions options,
                                   ResultFn on_result, Sink sink) {
  HINGE_CHECK(on_result && sink);
  const auto now = Clock::now();
  SubmitTicket ticket;
  bool refused = false;
  {
    std::lock_guard lock(mu_);
    ticket = SubmitTicket(next_ticket_++);
    refused = stopping_ || draining_;
    if (!refused) {
      num_active_.fetch_add(1);
      queue_.emplace_back(Add{ticket, std::move(request), std::move(options),
                              std::move(on_result), std::move(sink), now});
    }
  }
  if (refused) {
    SubmitResult r;
    r.kind = SubmitResult::Kind::kShuttingDown;
    r.message = "the server is shutting down";
    r.retry_after_s = 5;
    on_result(r);
    return ticket;
  }
  cv_.notify_one();
  return ticket;
}

void EngineThread::set_pressure(pressure::PressureLevel level, std::string reasons,
                                pressure::PressureLevel thermal) {
  {
    std::lock_guard lock(mu_);
    if (stopping_) return;
    queue_.emplace_back(SetPressure{level, std::move(reasons), thermal});
  }
  cv_.notify_one();
}

int32_t EngineThread::call(std::function<int32_t(Engine&)> fn) {
  auto done = std::make_shared<std::promise<int32_t>>();
  std::future<int32_t> result = done->get_future();
  {
    std::lock_guard lock(mu_);
    if (stopping_) return -1;
    queue_.emplace_back(Call{std::move(fn), std::move(done)});
  }
  cv_.notify_one();
  try {
    return result.get();
  } catch (const std::future_error&) {  // the loop ended before running it
    return -1;
  }
}

void EngineThread::cancel(SubmitTicket ticket) {
  {
    std::lock_guard lock(mu_);
    if (stopping_) return;
    queue_.emplace_back(Cancel{ticket});
  }
  cv_.notify_one();
}

void EngineThread::cancel_sample(SubmitTicket ticket, int32_t index) {
  {
    std::lock_guard lock(mu_);
    if (stopping_) return;
    queue_.emplace_back(Cancel{ticket, index});
  }
  cv_.notify_one();
}

StatusOr<SubmitTicket> EngineThread::submit(GenerateRequest request, Sink sink) {
  if (!sink) return Status::Error("submit: a sink is required");
  auto done = std::make_shared<std::promise<SubmitResult>>();
  auto result = done->get_future();
  const SubmitTicket ticket = enqueue(
      std::move(request), {}, [done](const SubmitResult& r) { done->set_value(r); },
      std::move(sink));
  const SubmitResult r = result.get();
  if (!r.accepted()) return Status::Error(r.message);
  return ticket;
}

EngineThreadStats EngineThread::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

int32_t EngineThread::num_active() const { return num_active_.load(); }

bool EngineThread::wait_idle(double timeout_s) const {
  std::unique_lock lock(mu_);
  return idle_cv_.wait_for(lock, std::chrono::duration<double>(timeout_s), [&] {
    const EngineStats& e = stats_.engine;
    return !unpublished_ && num_active_.load() == 0 && queue_.empty() && stats_.active == 0 &&
           e.running == 0 && e.waiting == 0 && e.kv_blocks_used == 0;
  });
}

void EngineThread::drain() {
  std::lock_guard lock(mu_);
  draining_ = true;
}

void EngineThread::stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_one();
  if (thread_.joinable()) thread_.join();
}

double EngineThread::seconds_since_start() const {
  return std::chrono::duration<double>(Clock::now() - t0_).count();
}

void EngineThread::reject(ResultFn& fn, SubmitResult::Kind kind, std::string message,
                          int32_t retry_s, Clock::time_point at) {
  SubmitResult r;
  r.kind = kind;
  r.message = std::move(message);
  r.retry_after_s = retry_s;
  r.queue_seconds = std::chrono::duration<double>(Clock::now() - at).count();
  fn(r);
  num_active_.fetch_sub(1);
}

void EngineThread::start(SubmitTicket ticket, Pending& p) {
  const int32_t n = p.request.n;
  auto id = engine_->add_request(std::move(p.request));
  if (!id.ok()) {
    if (admission_) admission_->cancel(ticket.value);
    reject(p.on_result, SubmitResult::Kind::kInvalid, id.status().message(), 0, p.at);
    return;
  }
  running_.emplace(ticket, *id);
  active_.emplace(*id, Active{ticket, std::move(p.sink), n});
  SubmitResult r;
  r.queue_seconds = std::chrono::duration<double>(Clock::now() - p.at).count();
  p.on_result(r);
}

void EngineThread::handle_add(Add& add, bool stopping) {
  using K = SubmitResult::Kind;
  if (stopping) {
    reject(add.on_result, K::kShuttingDown, "the server is shutting down", 5, add.at);
    return;
  }
  if (paused()) {
    ++pressure_.rejected;
    reject(add.on_result, K::kPressure,
           "the server is under critical memory pressure and admits no new requests; retry later",
           pressure_policy_.retry_after_s, add.at);
    return;
  }
  if (actions_.max_tokens_cap > 0 && add.request.max_new_tokens > actions_.max_tokens_cap) {
    add.request.max_new_tokens = actions_.max_tokens_cap;  // finishes with "length"
    ++pressure_.capped;
  }
  if (Status st = engine_->check_request(add.request); !st.ok()) {
    reject(add.on_result, K::kInvalid, st.message(), 0, add.at);
    return;
  }
  Pending p{std::move(add.request), std::move(add.on_result), std::move(add.sink), add.at};
  if (!admission_) {
    start(add.ticket, p);
    return;
  }
  sched::AdmissionTicket t;
  t.id = add.ticket.value;
  t.user = std::move(add.options.user);
  t.max_concurrent = add.options.max_concurrent;
  t.priority = p.request.priority;
  const int64_t n_prompt = static_cast<int64_t>(p.request.prompt_token_ids.size());
  int64_t max_new = p.request.max_new_tokens;
  if (shifts_context_) {  // a shifting sequence never holds more than its window
    const int64_t window = max_model_len_ / block_size_ * block_size_;
    max_new = std::clamp<int64_t>(window - n_prompt, 1, max_new);
  }
  t.worst_case_blocks = static_cast<int32_t>(std::min<int64_t>(
      sched::worst_case_kv_blocks(n_prompt, max_new, p.request.n, kv_demand_), INT32_MAX));
  const EngineStats s = engine_->stats();
  const std::vector<int32_t>& prompt = p.request.prompt_token_ids;
  const CacheScope& scope = p.request.cache_scope;
  const sched::AdmissionOffer o = admission_->offer(
      t, seconds_since_start(), s.kv_blocks_total - s.kv_blocks_used - s.kv_blocks_withheld,
      [&](uint64_t) {
        // A prompt-logprobs request computes every position: no prefix-hit discount.
        return p.request.prompt_logprobs >= 0 ? 0 : engine_->cached_prefix_blocks(prompt, scope);
      });
  switch (o.verdict) {
    case sched::AdmissionVerdict::kAdmitted: start(add.ticket, p); return;
    case sched::AdmissionVerdict::kQueued: pending_.emplace(add.ticket, std::move(p)); return;
    case sched::AdmissionVerdict::kTooLarge: reject(p.on_result, K::kTooLarge, o.message, 0, p.at); return;
    case sched::AdmissionVerdict::kUserLimit:
      reject(p.on_result, K::kUserLimit, o.message, o.retry_after_s, p.at);
      return;
    case sched::AdmissionVerdict::kQueueFull:
    case sched::AdmissionVerdict::kTimedOut:
      reject(p.on_result, K::kQueueFull, o.message, o.retry_after_s, p.at);
      return;
  }
}

void EngineThread::handle_cancel(SubmitTicket ticket) {
  if (auto it = pending_.find(ticket); it != pending_.end()) {
    if (admission_) admission_->cancel(ticket.value);
    Pending p = std::move(it->second);
    pending_.erase(it);
    reject(p.on_result, SubmitResult::Kind::kCancelled, "cancelled", 0, p.at);
    return;
  }
  if (auto it = running_.find(ticket); it != running_.end()) engine_->abort(it->second);
}

void EngineThread::admit_queued() {
  if (!admission_ || pending_.empty()) return;  // expiry and admission concern queued tickets
  const double now = seconds_since_start();
  for (uint64_t ticket : admission_->expire(now)) {
    auto it = pending_.find(SubmitTicket(ticket));
    if (it == pending_.end()) continue;
    Pending p = std::move(it->second);
    pending_.erase(it);
    reject(p.on_result, SubmitResult::Kind::kTimedOut,
           "the request waited too long for KV cache memory; retry later",
           admission_->retry_after_queue_full(now), p.at);
  }
  while (!paused()) {
    const EngineStats s = engine_->stats();
    auto cached = [&](uint64_t ticket) {
      const Pending& p = pending_.at(SubmitTicket(ticket));
      if (p.request.prompt_logprobs >= 0) return 0;  // computes every position
      return engine_->cached_prefix_blocks(p.request.prompt_token_ids, p.request.cache_scope);
    };
    const auto next = admission_->admit_next(
        now, s.kv_blocks_total - s.kv_blocks_used - s.kv_blocks_withheld, cached);
    if (!next) break;
    auto it = pending_.find(SubmitTicket(*next));
    HINGE_CHECK(it != pending_.end());
    Pending p = std::move(it->second);
    pending_.erase(it);
    start(SubmitTicket(*next), p);
  }
}

void EngineThread::handle_pressure(SetPressure& p) {
  const bool changed = p.level != pressure_.level || p.thermal != pressure_.thermal;
  const bool memory_changed = p.level != pressure_.level;
  pressure_.level = p.level;
  pressure_.thermal = p.thermal;
  pressure_.reasons = std::move(p.reasons);
  if (!changed) return;
  if (memory_changed) ++pressure_.transitions[static_cast<int>(p.level)];
  apply_pressure(memory_changed);
  const EngineStats s = engine_->stats();
  std::fprintf(stderr,
               "hinge: memory pressure %s, temperature %s%s%s: KV usable %d of %d blocks, "
               "max_num_seqs %d, step tokens %d%s%s; RSS fell by %s so far\n",
               pressure::pressure_level_name(p.level), pressure::pressure_level_name(p.thermal),
               pressure_.reasons.empty() ? "" : " (",
               pressure_.reasons.empty() ? "" : (pressure_.reasons + ")").c_str(),
               s.kv_blocks_limit, s.kv_blocks_total, s.max_num_seqs_now, s.max_batched_tokens_now,
               actions_.max_tokens_cap > 0
                   ? (", new max_tokens <= " + std::to_string(actions_.max_tokens_cap)).c_str()
                   : "",
               actions_.pause_admission ? ", admission paused" : "",
               format_bytes(static_cast<uint64_t>(s.kv_bytes_released)).c_str());
}

void EngineThread::apply_pressure(bool transition) {
  const EngineStats s = engine_->stats();
  const EngineConfig& c = engine_->config();
  // Without admission control nothing bounds what running requests will still need: keep
  // every block usable (the other actions still apply).
  const int32_t reserved = admission_ ? admission_->stats(seconds_since_start()).reserved_blocks
                                      : s.kv_blocks_total;
  actions_ = pressure_actions(pressure_.level, pressure_policy_, c.max_num_seqs,
                              c.max_batched_tokens, s.kv_blocks_total, s.kv_blocks_used, reserved,
                              pressure_.thermal);
  engine_->set_step_limits(actions_.max_num_seqs, actions_.max_batched_tokens);
  engine_->set_kv_block_limit(actions_.kv_block_limit);
  if (transition && actions_.shrink_cache) {  // what stays usable: no cached pages kept
    engine_->shrink_kv_cache();
    ++pressure_.shrinks;
  }
}

void EngineThread::dispatch(const std::vector<RequestDelta>& deltas) {
  for (const RequestDelta& d : deltas) {
    auto it = active_.find(d.id);
    if (it == active_.end()) continue;
    it->second.sink(d);
    if (d.finished() && --it->second.samples_left == 0) {
      const SubmitTicket ticket = it->second.ticket;
      if (admission_) admission_->release(ticket.value, seconds_since_start());
      running_.erase(ticket);
      active_.erase(it);
      num_active_.fetch_sub(1);
    }
  }
}

void EngineThread::loop() {
  std::vector<RequestDelta> deltas;
  std::deque<Command> commands;
  for (;;) {
    bool stopping = false;
    {
      std::unique_lock lock(mu_);
      auto ready = [&] { return stopping_ || !queue_.empty() || engine_->has_unfinished(); };
      if (pending_.empty())
        // Idle: wake once a second all the same, so that what changes without a step (the KV
        // tier's writes landing after the last request) reaches stats() and /metrics.
        cv_.wait_for(lock, kIdleStatsRefresh, ready);
      else
        cv_.wait_for(lock, kQueuePoll, ready);
      commands.swap(queue_);
      if (!commands.empty()) unpublished_ = true;
      stopping = stopping_;
    }
    for (Command& c : commands) {
      if (auto* add = std::get_if<Add>(&c))
        handle_add(*add, stopping);
      else if (auto* call = std::get_if<Call>(&c))
        call->done->set_value(call->fn(*engine_));
      else if (auto* sp = std::get_if<SetPressure>(&c))
        handle_pressure(*sp);
      else if (const Cancel& cc = std::get<Cancel>(c); cc.sample < 0)
        handle_cancel(cc.ticket);
      else if (auto it = running_.find(cc.ticket); it != running_.end())
        engine_->abort_sample(it->second, cc.sample);
    }
    commands.clear();
    if (stopping) {
      for (auto& [ticket, p] : pending_) {
        if (admission_) admission_->cancel(ticket.value);
        reject(p.on_result, SubmitResult::Kind::kShuttingDown, "the server is shutting down", 5,
               p.at);
      }
      pending_.clear();
      for (const auto& [id, a] : active_) engine_->abort(id);
    }
    admit_queued();
    if (engine_->has_unfinished()) {
      // A failed step (a bug, a broken model) has finished the requests it scheduled with
      // kError: their sinks get those final deltas like any other, and the loop serves on.
      if (Status st = engine_->step(&deltas); !st.ok())
        std::fprintf(stderr, "hinge: engine step failed: %s\n", st.message().c_str());
      // A request's last delta goes out after the engine's stats that count it, so /metrics
      // and /v1/stats read after a response include it (no step's counts arrive late).
      if (std::any_of(deltas.begin(), deltas.end(),
                      [](const RequestDelta& d) { return d.finished(); })) {
        EngineStats es = engine_->stats();
        std::lock_guard lock(mu_);
        stats_.engine = std::move(es);
      }
      dispatch(deltas);
    }
    // Under pressure the KV limit follows what requests hold and have reserved.
    if (pressure_.level != pressure::PressureLevel::kNormal) apply_pressure(false);
    const auto now = Clock::now();
    // <= 4 Hz while busy, and once more before going idle (the loop then blocks on cv_).
    std::optional<std::string> map;  // rendered outside the lock, at most 4 Hz while busy
    if (now - last_map_ >= kMapRefresh || !engine_->has_unfinished()) {
      map = engine_->kv_block_map();
      last_map_ = now;
    }
    {
      std::lock_guard lock(mu_);
      stats_.engine = engine_->stats();
      stats_.pressure = pressure_;
      if (admission_) stats_.admission = admission_->stats(seconds_since_start());
      if (map) stats_.kv_block_map = std::move(*map);
      stats_.active = num_active_.load();
      stats_.draining = draining_;
      unpublished_ = false;
      idle_cv_.notify_all();
      if (stopping_ && queue_.empty() && !engine_->has_unfinished()) break;
    }
  }
}

}  // namespace hinge
