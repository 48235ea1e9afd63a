// Scheduler: continuous batching over a paged KV cache, vLLM-v1 style. Pure bookkeeping (no
// model): the engine calls schedule(), runs the forward pass on the plain SchedulerOutput,
// samples, then calls update(). Not thread-safe: owned and used by the engine thread only.
//
// One rule for every request: each step it computes num_new tokens of
//   [num_computed_tokens, num_tokens)
// under one token budget per step (max_num_batched_tokens). A long prompt is chunked across
// steps, a prefix hit starts num_computed_tokens at the cached length, decode is num_new == 1,
// and recompute after preemption is a prefill of prompt + output so far.
//
// Policy of schedule():
//   1. Running requests, in (priority, arrival) order, each takes min(remaining, budget)
//      tokens. If the KV cache cannot hold them, the running request with the lowest priority,
//      then the latest arrival (the back of the running list) is preempted by recompute: its
//      blocks are freed, num_computed_tokens = 0, and it re-enters the waiting queue, which is
//      ordered by (priority, arrival), so it is ahead of every later arrival of its priority.
//      This repeats until the allocation fits or the request preempted is the one scheduling.
//   2. Only when nothing was preempted this step: waiting requests in (priority, arrival)
//      order, while the budget, max_num_seqs and the KV cache allow. Each looks up its prefix
//      hit first (unless RequestParams::skip_prefix_cache). The first one that does not fit
//      stops admission (no overtaking).
//   Blocks that will be full after the step are cached as each request is scheduled (vLLM
//   caches at allocation too): requests admitted in one step with one prefix compute it once.
//
// Parallel samples (RequestParams::n > 1, see request.h): the step that computes the last
// prompt token of a request with fork_pending() has ScheduledRequest::num_samples == n; the
// engine samples n tokens from that row and update() forks the KV (kv::KvCacheManager::fork)
// into n - 1 new running requests with the ids RequestParams::sample_ids. Each sample is then an
// independent request (its own max_new_tokens count, finish_request, abort_request, preemption
// and recompute, which normally hits the shared prompt blocks in the prefix cache). The next
// allocation of each sample into a shared partial last block copies it (copy-on-write, in
// SchedulerOutput::block_copies): the first n - 1 writers in running order get a copy, the last
// writes in place. A request preempted before its fork recomputes and forks later.
//   - max_num_seqs counts sequences as they will be after the fork: a request with
//     fork_pending() takes n seq slots from its admission on (so the fork never exceeds it), a
//     forked sample 1. A request with n > max_num_seqs is rejected by add_request.
//   - Order: (priority, arrival, sample index); samples inherit their parent's priority and
//     arrival, so they stay together, the parent first. Preemption takes the highest index.
//   - Ids: sample ids are reserved at add_request and live from the fork. abort_request of the
//     parent id before the fork aborts the whole request (no sample id ever becomes live, and
//     the reservations are released); after the fork each id is aborted on its own.
//
// Invariants (check_invariants()): every running request is live in the KV manager with
// exactly num_computed_tokens + (tokens scheduled and not yet updated) reserved slots;
// waiting/preempted requests hold no blocks; running_ and waiting_ are sorted by (priority,
// arrival, sample index); the running seq count (n for fork_pending(), else 1) is at most
// max_num_seqs; the sample ids reserved are exactly those of live fork_pending() requests and
// none is live; the KV manager's own invariants hold.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "common/status.h"
#include "kv/kv_cache_manager.h"
#include "sched/request.h"
#include "sched/scheduler_output.h"

namespace hinge::sched {

struct SchedulerConfig {
  int32_t max_num_batched_tokens = 2048;  // token budget per step
  int32_t max_num_seqs = 256;             // running requests at most
  int32_t block_size_tokens = 16;
  int32_t num_kv_blocks = 0;              // size of the KV arena in blocks
  int32_t num_kv_groups = 1;              // kv::KvSpec::num_groups()
  std::vector<int32_t> kv_group_windows = {};  // per group: sliding window, 0 = full (empty: all)
  bool enable_prefix_cache = true;
  uint64_t cache_fingerprint = 0;         // kv::KvCacheConfig::fingerprint
  // The context: a sequence holds at most max_model_len tokens (0: no limit here; the caller
  // refuses longer requests). Under ContextPolicy::kShift a sequence that would exceed its
  // window (max_model_len rounded down to whole blocks) keeps its first ceil(max(sink_tokens,
  // keep_tokens) / block) blocks, drops the fewest whole blocks after them and goes on; with
  // RequestParams::turn_starts it drops whole turns instead when one starts within reach.
  ContextPolicy context_policy = ContextPolicy::kError;
  int32_t max_model_len = 0;
  int32_t sink_tokens = 4;

  Status validate() const;
};

struct SchedulerStats {
  int32_t num_running = 0;
  int32_t num_waiting = 0;  // including preempted
  int64_t num_steps = 0;
  int64_t num_preemptions = 0;
  int64_t num_scheduled_tokens = 0;
  int64_t num_finished = 0;
  int64_t num_spec_tokens = 0;        // draft tokens scheduled for verification
  int64_t num_spec_accepted = 0;      // of those, accepted
  int64_t num_context_shifts = 0;     // ContextPolicy::kShift drops
  int64_t num_dropped_tokens = 0;     // tokens they dropped
};

class Scheduler {
 public:
  explicit Scheduler(const SchedulerConfig& config);

  // Queues a request. Errors: id already live or reserved as a sample id, empty prompt,
  // max_new_tokens < 1, n < 1, n > max_num_seqs, sample_ids.size() != n - 1, sample ids not
  // distinct or equal to id or live or reserved, or a request that could never fit in the KV
  // cache even alone: its prompt blocks once plus, per sample, the blocks of its output (and a
  // copy of the partial last prompt block) at max_new_tokens.
  Status add_request(RequestId id, RequestParams params);
  // add_request's checks alone: whether it would accept the request now.
  Status check_request(RequestId id, const RequestParams& params) const;
  // Removes a live request (freeing its blocks) with reason kAborted. False when unknown (a
  // sample id before its fork is unknown: abort the parent id, which aborts the whole request
  // then; after the fork every sample id is a request of its own, the engine aborts each).
  bool abort_request(RequestId id);
  // The caller saw EOS or a stop sequence in the last sampled token: finishes with kStop.
  bool finish_request(RequestId id, FinishReason reason = FinishReason::kStop);

  SchedulerOutput schedule();
  // The same into *out, reusing its capacity (the engine's steady state allocates nothing).
  void schedule(SchedulerOutput* out);
  // Speculative decoding: the draft tokens request id's next decode step verifies (replacing
  // any earlier ones; empty: none). Used only while it runs and decodes (one token to compute)
  // with no fork pending, and trimmed to what the step's token budget, max_new_tokens and the
  // context leave room for; drafts never preempt anything (if the KV cache cannot hold them
  // the step goes without). The step computes the request's last token then the drafts
  // (ScheduledRequest::num_spec_tokens); update() takes the accepted ones. Unknown id: ignored.
  void set_spec_tokens(RequestId id, std::span<const int32_t> draft);

  // `sampled` holds, for each entry of output.scheduled with samples == true, in that order,
  // num_samples tokens: {id, token} for num_samples == 1; for num_samples == n > 1, n entries
  // with ids id, sample_ids[0], ..., sample_ids[n - 2] (n tokens sampled from the one logits
  // row of the request's last prompt position). Entries of requests aborted or finished since
  // schedule() are skipped, their tokens may be omitted.
  // A request with num_spec_tokens == k > 0 has 1..k+1 entries: the drafts accepted, in order
  // (their tokens equal the drafts), then the token sampled after them; its computed tokens
  // advance by that count and the rejected drafts' slots are given back (no KV copied).
  // Advances num_computed_tokens, forks requests with num_samples > 1 (each
  // sample gets its own token), appends tokens, finishes on max tokens (each sample on its own:
  // with max_new_tokens == 1 all n finish here).
  void update(const SchedulerOutput& output, std::span<const SampledToken> sampled);
  // Instead of update(), when the step's forward pass failed: every request of
  // output.scheduled still live finishes with kError (its blocks freed; a fork-pending request
  // releases its sample ids, which never become live), and the step ends, so schedule() may be
  // called again. Nothing of the step is kept: no token computed, none appended, and the
  // blocks schedule() registered in the prefix cache for it are dropped from it
  // (kv::KvCacheManager::uncache_uncomputed). Requests outside the step (waiting, preempted,
  // not scheduled) are untouched. One aborted between schedule() and this call is skipped and
  // keeps the entries it registered (its KV state is gone): the engine never aborts there.
  void abort_step(const SchedulerOutput& output);

  // The memory budget (kv/kv_memory_guard.h), between steps: preempts by recompute the last
  // running requests (lowest priority, latest arrival first) while the blocks requests hold
  // exceed max_used_blocks, keeping at least one running. Returns how many were preempted.
  int32_t preempt_to_fit(int32_t max_used_blocks);

  // Finished requests (with output tokens and finish reason), handed over once.
  std::vector<Request> take_finished();

  const Request* find(RequestId id) const;
  bool has_unfinished() const { return !running_.empty() || !waiting_.empty(); }
  const std::vector<RequestId>& running() const { return running_; }
  const std::vector<RequestId>& waiting() const { return waiting_; }
  const kv::KvCacheManager& kv() const { return kv_; }
  // The prefix cache's clock (TTLs, seconds) and its expiry scan (the entries freed).
  void set_cache_time(double now) { kv_.set_now(now); }
  int32_t expire_cache_entries() { return kv_.expire_entries(); }
  // Owners (tenants) of cached blocks: quota and TTL, purges (blocks freed). Never a running
  // request's blocks.
  void set_cache_owner_policy(int32_t owner, int32_t max_cached_free_blocks, double ttl_s) {
    kv_.set_owner_policy(owner, max_cached_free_blocks, ttl_s);
  }
  int32_t purge_cache_owner(int32_t owner) { return kv_.purge_owner(owner); }
  int32_t retire_cache_owner_epochs(int32_t owner, uint64_t current) {
    return kv_.retire_owner_epochs(owner, current);
  }
  int32_t retire_cache_owner(int32_t owner) { return kv_.retire_owner(owner); }
  // Drops every cached entry (vLLM's reset_prefix_cache); live requests keep their blocks.
  int32_t reset_prefix_cache() { return kv_.reset_prefix_cache(); }
  // KV events (kv/kv_events.h): the cache logs stored / removed / cleared blocks from now on;
  // the engine drains the log after each step and cache operation.
  void enable_kv_events() { kv_.enable_events(); }
  kv::KvEventLog& kv_event_log() { return kv_.event_log(); }
  // The cache for the kv/ components that move blocks' bytes or withhold free blocks
  // (kv/kv_transfer.h, kv/kv_reclaimer.h), bound once when the engine starts.
  kv::KvCacheManager& cache_for_kv_components() { return kv_; }
  const SchedulerConfig& config() const { return config_; }
  // Runtime limits at or below the configured ones (memory pressure sheds load with them): at
  // most max_num_seqs running sequences when admitting, at most max_batched_tokens per step.
  // 0 (or a value above the configured one) means the configured one. Requests already
  // running beyond a lowered max_num_seqs keep running.
  void set_limits(int32_t max_num_seqs, int32_t max_batched_tokens);
  int32_t max_num_seqs_now() const { return limit_seqs_; }
  int32_t max_batched_tokens_now() const { return limit_tokens_; }
  SchedulerStats stats() const;
  Status check_invariants() const;

 private:
  Request& get(RequestId id);
  bool before(RequestId a, RequestId b) const;  // (priority, arrival, sample index) order
  void insert_sorted(std::vector<RequestId>* queue, RequestId id);
  void preempt(RequestId id);
  // ContextPolicy::kShift: drops whole blocks after r's sinks until r fits its window (with its
  // KV when it holds blocks, else only its tokens). False when it already fits.
  bool shift_context(Request& r);
  // Tokens a shifting sequence may hold: max_model_len rounded down to whole blocks.
  int32_t window_tokens() const {
    return config_.max_model_len / config_.block_size_tokens * config_.block_size_tokens;
  }
  bool shifts() const { return config_.context_policy == ContextPolicy::kShift; }
  void finish(RequestId id, FinishReason reason);
  // Creates sample k (1..n-1) of running request `parent` (which has just computed its prompt),
  // sharing its KV, with its first sampled token.
  void fork_sample(Request& parent, int32_t k, int32_t token);
  void add_scheduled(const Request& r, int32_t num_new, SchedulerOutput* out,
                     int32_t num_spec = 0) const;
  // Draft tokens r's step may verify with `budget` tokens left (0 unless it decodes with drafts).
  int32_t spec_room(const Request& r, int32_t budget) const;
  // update() of a request that verified drafts: consumes its entries of `sampled` from *next.
  void update_spec(Request& r, const SchedulerOutput& output, const ScheduledRequest& s,
                   std::span<const SampledToken> sampled, size_t* next);
  // Seq slots a running request counts against max_num_seqs.
  static int32_t num_seqs(const Request& r) { return r.fork_pending() ? r.n() : 1; }

  SchedulerConfig config_;
  int32_t limit_seqs_ = 0;    // set_limits (the config's by default)
  int32_t limit_tokens_ = 0;
  kv::KvCacheManager kv_;
  std::unordered_map<RequestId, Request> requests_;  // live (not finished) requests
  std::vector<RequestId> running_;                   // sorted by (priority, arrival, index)
  std::vector<RequestId> waiting_;                   // sorted by (priority, arrival, index)
  std::unordered_set<RequestId> reserved_ids_;       // sample ids of fork_pending() requests
  int32_t num_running_seqs_ = 0;                     // sum of num_seqs() over running_
  std::vector<RequestId> finished_ids_;              // since the previous schedule()
  std::vector<Request> finished_;                    // not yet taken
  bool awaiting_update_ = false;  // schedule() called, update() / abort_step() not yet
  uint64_t next_arrival_seq_ = 0;
  int64_t num_steps_ = 0;
  int64_t num_preemptions_ = 0;
  int64_t num_scheduled_tokens_ = 0;
  int64_t num_finished_ = 0;
  int64_t num_context_shifts_ = 0;
  int64_t num_dropped_tokens_ = 0;
  int64_t num_spec_tokens_ = 0;
  int64_t num_spec_accepted_ = 0;
};

}  // namespace hinge::sched
