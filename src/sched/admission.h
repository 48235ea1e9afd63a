// AdmissionController: decides which requests may enter the engine, so that the KV cache never
// runs out and no client waits forever. Pure bookkeeping (no model, no clock of its own: every
// call gets `now` in seconds). Not thread-safe: the engine thread owns it.
//
// Each request is sized by its worst case in KV blocks (worst_case_blocks, the formula of
// sched/kv_demand.h the scheduler uses too). Admitted requests hold that reservation until
// they finish.
//
//   offer(t, ...)     -> kAdmitted  (nothing of its class or above waits and it fits now),
//                        kTooLarge  (400: needs more than max_request_share of the pool),
//                        kUserLimit (429: the user already has max_concurrent_per_user requests
//                                    queued or running),
//                        kQueueFull (503: it cannot start now and max_queue requests already
//                                    wait; max_queue 0 means "start now or be refused"),
//                        kQueued    (waits; admit_next() takes it when it fits).
//   admit_next(...)   the oldest queued interactive request, else the oldest batch one, if
//                     its reservation (minus the blocks it would hit in the prefix cache) fits:
//                       interactive: reserved + need <= pool - headroom
//                       batch:       reserved + need <= pool - headroom - interactive_reserve
//                     and the pool's free + evictable blocks minus the headroom cover need. A
//                     head that does not fit blocks its class (no overtaking, no starvation);
//                     a batch request never overtakes a waiting interactive one.
//   expire(now)       queued requests older than queue_timeout_s leave with kTimedOut (503).
//   cancel(id)        a client gone while queued or running; release(id) when it finished.
//
// Retry-After estimates: queue full -> queue length / measured drain rate (finishes per second
// over the recent releases), user limit -> the mean time a request spends admitted; both
// rounded up and clamped to [1, 120] s; 5 s before anything was measured.
//
// The prefix-hit discount is an estimate (a hit block may belong to another request's
// reservation and outlive it); the headroom absorbs that, and the scheduler's preemption by
// recompute is the backstop, never an out-of-memory.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "sched/request.h"

namespace hinge::sched {

struct AdmissionConfig {
  int32_t num_blocks = 0;                  // KV pool size
  int32_t block_size_tokens = 16;
  int32_t num_kv_groups = 1;               // KV groups: each holds blocks for every position
  double headroom_fraction = 0.05;         // of the pool, never reserved (estimate slack)
  double interactive_reserve_fraction = 0.2;  // of the pool, only interactive requests use it
  double max_request_share = 1.0;          // a request needing more of the pool: kTooLarge
  int32_t max_queue = 256;                 // waiting requests at most (both classes)
  int32_t max_concurrent_per_user = 0;     // queued + running per user key; 0: unlimited
  double queue_timeout_s = 120;            // longest wait in the queue

  int32_t headroom_blocks() const;
  int32_t interactive_reserve_blocks() const;
  int32_t max_request_blocks() const;
};

enum class AdmissionVerdict : uint8_t {
  kAdmitted,
  kQueued,
  kTooLarge,
  kUserLimit,
  kQueueFull,
  kTimedOut
};
const char* admission_verdict_name(AdmissionVerdict v);  // "queued", "too_large", ...

struct AdmissionTicket {
  uint64_t id = 0;
  std::string user;  // concurrency key (API key, `user` or tenant); empty: no per-user cap
  Priority priority = Priority::kInteractive;
  int32_t worst_case_blocks = 0;
  // This key's cap on queued + running requests (a tenant's max_concurrent); 0: the
  // config's max_concurrent_per_user.
  int32_t max_concurrent = 0;
};

struct AdmissionOffer {
  AdmissionVerdict verdict = AdmissionVerdict::kQueued;
  int32_t reserved_blocks = 0;  // kAdmitted: the reservation taken
  int32_t retry_after_s = 0;  // kUserLimit / kQueueFull
  std::string message;        // for the client (limits and counts, never prompt text)
};

struct AdmissionStats {
  int32_t queued_interactive = 0;
  int32_t queued_batch = 0;
  int32_t admitted = 0;          // holding a reservation now
  int32_t reserved_blocks = 0;
  int64_t offered_total = 0;
  int64_t admitted_total = 0;
  int64_t rejected_too_large = 0;
  int64_t rejected_user_limit = 0;
  int64_t rejected_queue_full = 0;
  int64_t rejected_timed_out = 0;
  int64_t cancelled_total = 0;   // left the queue because the client went away
  double drain_rate_per_s = 0;   // recent finishes per second (0: not measured yet)
};

class AdmissionController {
 public:
  explicit AdmissionController(const AdmissionConfig& config);

  // Blocks a request can need at most (sched::worst_case_kv_blocks, capped to int32).
  static int32_t worst_case_blocks(int64_t prompt_tokens, int64_t max_tokens, int32_t n,
                                   int32_t block_size_tokens, int32_t num_groups);

  // Cached blocks the ticket would hit now (a query only; the caller's prefix cache).
  using CachedBlocksFn = std::function<int32_t(uint64_t id)>;

  // Admits at once when it can (see the header comment), else queues or refuses.
  AdmissionOffer offer(const AdmissionTicket& ticket, double now, int32_t free_plus_evictable,
                       const CachedBlocksFn& cached_blocks);
  // Takes the next queued ticket that fits (see the header comment); its reservation is
  // need - cached blocks. free_plus_evictable: the pool's blocks not referenced now.
  std::optional<uint64_t> admit_next(double now, int32_t free_plus_evictable,
                                     const CachedBlocksFn& cached_blocks);

  // Queued tickets that waited longer than queue_timeout_s, removed (kTimedOut is counted).
  std::vector<uint64_t> expire(double now);
  // The client went away: a queued ticket leaves the queue, an admitted one is released
  // (without counting as a finish in the drain rate). False when unknown.
  bool cancel(uint64_t id);
  // An admitted request finished: frees its reservation, counts toward the drain rate.
  void release(uint64_t id, double now);

  int32_t retry_after_queue_full(double now) const;
  int32_t retry_after_user_limit() const;

  AdmissionStats stats(double now) const;
  const AdmissionConfig& config() const { return config_; }
  // reserved == sum of admitted reservations; per-user counts == queued + admitted of each
  // user; queue sizes within max_queue.
  bool check_invariants() const;

 private:
  struct Entry {
    AdmissionTicket ticket;
    double enqueued_at = 0;
    double admitted_at = 0;
    int32_t reserved = 0;
    bool admitted = false;
  };
  std::deque<uint64_t>& queue_of(Priority p) {
    return p == Priority::kInteractive ? interactive_ : batch_;
  }
  bool fits(const Entry& e, int32_t need, int32_t free_plus_evictable) const;
  // Admits entry `id` (already in entries_, not queued) if it fits; returns the reservation.
  std::optional<int32_t> try_admit(uint64_t id, double now, int32_t free_plus_evictable,
                                   const CachedBlocksFn& cached_blocks);
  void forget(uint64_t id);
  double drain_rate(double now) const;

  AdmissionConfig config_;
  std::unordered_map<uint64_t, Entry> entries_;  // queued and admitted
  std::unordered_map<std::string, int32_t> per_user_;
  std::deque<uint64_t> interactive_;  // queued, arrival order
  std::deque<uint64_t> batch_;
  int32_t reserved_blocks_ = 0;
  int32_t num_admitted_ = 0;
  std::deque<double> recent_finishes_;  // release times, the last kRateWindow
  double mean_service_s_ = 0;           // EWMA of admitted -> released
  AdmissionStats counters_;
};

}  // namespace hinge::sched
