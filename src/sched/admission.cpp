#include "sched/admission.h"

#include "sched/kv_demand.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace hinge::sched {

namespace {
constexpr size_t kRateWindow = 64;     // finishes the drain rate is measured over
constexpr int32_t kDefaultRetryS = 5;  // before anything was measured
constexpr int32_t kMaxRetryS = 120;

int32_t clamp_retry(double seconds) {
  if (!(seconds > 0) || !std::isfinite(seconds)) return kMaxRetryS;
  return static_cast<int32_t>(std::clamp(std::ceil(seconds), 1.0, double{kMaxRetryS}));
}
int32_t share_of(int32_t blocks, double fraction) {
  return static_cast<int32_t>(std::floor(blocks * std::clamp(fraction, 0.0, 1.0)));
}
}  // namespace

int32_t AdmissionConfig::headroom_blocks() const { return share_of(num_blocks, headroom_fraction); }
int32_t AdmissionConfig::interactive_reserve_blocks() const {
  return share_of(num_blocks, interactive_reserve_fraction);
}
int32_t AdmissionConfig::max_request_blocks() const {
  // Never more than an interactive request can be given.
  return std::min(share_of(num_blocks, max_request_share), num_blocks - headroom_blocks());
}

const char* admission_verdict_name(AdmissionVerdict v) {
  switch (v) {
    case AdmissionVerdict::kAdmitted: return "admitted";
    case AdmissionVerdict::kQueued: return "queued";
    case AdmissionVerdict::kTooLarge: return "too_large";
    case AdmissionVerdict::kUserLimit: return "user_limit";
    case AdmissionVerdict::kQueueFull: return "queue_full";
    case AdmissionVerdict::kTimedOut: return "queue_timeout";
  }
  return "?";
}

AdmissionController::AdmissionController(const AdmissionConfig& config) : config_(config) {
  HINGE_CHECK(config_.num_blocks > 0 && config_.block_size_tokens > 0 &&
              config_.num_kv_groups > 0 && config_.max_queue >= 0);
}

int32_t AdmissionController::worst_case_blocks(int64_t prompt_tokens, int64_t max_tokens,
                                               int32_t n, int32_t block_size_tokens,
                                               int32_t num_groups) {
  return static_cast<int32_t>(std::min<int64_t>(
      worst_case_kv_blocks(prompt_tokens, max_tokens, n, block_size_tokens, num_groups),
      INT32_MAX));
}

AdmissionOffer AdmissionController::offer(const AdmissionTicket& t, double now,
                                          int32_t free_plus_evictable,
                                          const CachedBlocksFn& cached_blocks) {
  HINGE_CHECK_MSG(!entries_.contains(t.id), "ticket {} offered twice", t.id);
  ++counters_.offered_total;
  AdmissionOffer o;
  const int32_t limit = config_.max_request_blocks();
  if (t.worst_case_blocks > limit) {
    ++counters_.rejected_too_large;
    o.verdict = AdmissionVerdict::kTooLarge;
    o.message = fmt::format(
        "this request needs up to {} KV blocks ({} tokens) for its prompt and max_tokens, more "
        "than the {} blocks ({} tokens) one request may use; lower max_tokens, n or the prompt",
        t.worst_case_blocks,
        int64_t{t.worst_case_blocks} / config_.num_kv_groups * config_.block_size_tokens, limit,
        int64_t{limit} / config_.num_kv_groups * config_.block_size_tokens);
    return o;
  }
  const int32_t user_cap = t.max_concurrent > 0 ? t.max_concurrent : config_.max_concurrent_per_user;
  if (user_cap > 0 && !t.user.empty()) {
    auto it = per_user_.find(t.user);
    if (it != per_user_.end() && it->second >= user_cap) {
      ++counters_.rejected_user_limit;
      o.verdict = AdmissionVerdict::kUserLimit;
      o.retry_after_s = retry_after_user_limit();
      o.message = fmt::format(
          "too many concurrent requests for this {} (limit {}); retry after {} s",
          t.max_concurrent > 0 ? "tenant" : "user", user_cap, o.retry_after_s);
      return o;
    }
  }
  // Start at once when nothing of this class (or, for batch, nothing interactive) waits.
  const bool nothing_ahead = interactive_.empty() && (t.priority == Priority::kInteractive || batch_.empty());
  Entry e;
  e.ticket = t;
  e.enqueued_at = now;
  entries_.emplace(t.id, std::move(e));
  if (!t.user.empty()) ++per_user_[t.user];
  if (nothing_ahead) {
    if (auto reserved = try_admit(t.id, now, free_plus_evictable, cached_blocks)) {
      o.verdict = AdmissionVerdict::kAdmitted;
      o.reserved_blocks = *reserved;
      return o;
    }
  }
  if (static_cast<int32_t>(interactive_.size() + batch_.size()) >= config_.max_queue) {
    forget(t.id);
    ++counters_.rejected_queue_full;
    o.verdict = AdmissionVerdict::kQueueFull;
    o.retry_after_s = retry_after_queue_full(now);
    o.message = fmt::format("the server is overloaded ({} requests waiting); retry after {} s",
                            interactive_.size() + batch_.size(), o.retry_after_s);
    return o;
  }
  queue_of(t.priority).push_back(t.id);
  return o;
}

std::optional<int32_t> AdmissionController::try_admit(uint64_t id, double now,
                                                      int32_t free_plus_evictable,
                                                      const CachedBlocksFn& cached_blocks) {
  Entry& e = entries_.at(id);
  const int32_t cached = cached_blocks ? std::max(0, cached_blocks(id)) : 0;
  const int32_t need = std::max(0, e.ticket.worst_case_blocks - cached);
  // A request alone in an idle pool is always admitted (it passed the size limit at offer).
  if (num_admitted_ != 0 && !fits(e, need, free_plus_evictable)) return std::nullopt;
  e.admitted = true;
  e.admitted_at = now;
  e.reserved = need;
  reserved_blocks_ += need;
  ++num_admitted_;
  ++counters_.admitted_total;
  return need;
}

bool AdmissionController::fits(const Entry& e, int32_t need, int32_t free_plus_evictable) const {
  int32_t limit = config_.num_blocks - config_.headroom_blocks();
  if (e.ticket.priority == Priority::kBatch) limit -= config_.interactive_reserve_blocks();
  return reserved_blocks_ + need <= limit &&
         need <= free_plus_evictable - config_.headroom_blocks();
}

std::optional<uint64_t> AdmissionController::admit_next(double now, int32_t free_plus_evictable,
                                                        const CachedBlocksFn& cached_blocks) {
  std::deque<uint64_t>* q = !interactive_.empty() ? &interactive_ : &batch_;
  if (q->empty()) return std::nullopt;
  const uint64_t id = q->front();
  if (!try_admit(id, now, free_plus_evictable, cached_blocks)) return std::nullopt;
  q->pop_front();
  return id;
}

std::vector<uint64_t> AdmissionController::expire(double now) {
  std::vector<uint64_t> out;
  for (auto* q : {&interactive_, &batch_}) {
    while (!q->empty() && now - entries_.at(q->front()).enqueued_at > config_.queue_timeout_s) {
      const uint64_t id = q->front();
      q->pop_front();
      forget(id);
      ++counters_.rejected_timed_out;
      out.push_back(id);
    }
  }
  return out;
}

void AdmissionController::forget(uint64_t id) {
  auto it = entries_.find(id);
  if (it == entries_.end()) return;
  const Entry& e = it->second;
  if (e.admitted) {
    reserved_blocks_ -= e.reserved;
    --num_admitted_;
  }
  if (!e.ticket.user.empty()) {
    auto u = per_user_.find(e.ticket.user);
    if (u != per_user_.end() && --u->second == 0) per_user_.erase(u);
  }
  entries_.erase(it);
}

bool AdmissionController::cancel(uint64_t id) {
  auto it = entries_.find(id);
  if (it == entries_.end()) return false;
  if (!it->second.admitted) {
    auto& q = queue_of(it->second.ticket.priority);
    q.erase(std::find(q.begin(), q.end(), id));
    ++counters_.cancelled_total;
  }
  forget(id);
  return true;
}

void AdmissionController::release(uint64_t id, double now) {
  auto it = entries_.find(id);
  if (it == entries_.end() || !it->second.admitted) return;
  const double service = std::max(0.0, now - it->second.admitted_at);
  mean_service_s_ = mean_service_s_ == 0 ? service : 0.9 * mean_service_s_ + 0.1 * service;
  recent_finishes_.push_back(now);
  if (recent_finishes_.size() > kRateWindow) recent_finishes_.pop_front();
  forget(id);
}

double AdmissionController::drain_rate(double now) const {
  if (recent_finishes_.size() < 2) return 0;
  // Finishes per second over the window up to now (an idle stretch lowers the rate).
  const double span = std::max(now, recent_finishes_.back()) - recent_finishes_.front();
  if (span <= 0) return 0;
  return static_cast<double>(recent_finishes_.size() - 1) / span;
}

int32_t AdmissionController::retry_after_queue_full(double now) const {
  const double rate = drain_rate(now);
  if (rate <= 0) return kDefaultRetryS;
  return clamp_retry(static_cast<double>(interactive_.size() + batch_.size()) / rate);
}

int32_t AdmissionController::retry_after_user_limit() const {
  return mean_service_s_ > 0 ? clamp_retry(mean_service_s_) : kDefaultRetryS;
}

AdmissionStats AdmissionController::stats(double now) const {
  AdmissionStats s = counters_;
  s.queued_interactive = static_cast<int32_t>(interactive_.size());
  s.queued_batch = static_cast<int32_t>(batch_.size());
  s.admitted = num_admitted_;
  s.reserved_blocks = reserved_blocks_;
  s.drain_rate_per_s = drain_rate(now);
  return s;
}

bool AdmissionController::check_invariants() const {
  int32_t reserved = 0, admitted = 0;
  std::unordered_map<std::string, int32_t> users;
  for (const auto& [id, e] : entries_) {
    if (e.admitted) {
      reserved += e.reserved;
      ++admitted;
    }
    if (!e.ticket.user.empty()) ++users[e.ticket.user];
  }
  const size_t queued = interactive_.size() + batch_.size();
  return reserved == reserved_blocks_ && admitted == num_admitted_ && users == per_user_ &&
         queued + static_cast<size_t>(admitted) == entries_.size() &&
         static_cast<int32_t>(queued) <= config_.max_queue;
}

}  // namespace hinge::sched
