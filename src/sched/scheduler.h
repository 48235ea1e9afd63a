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
//      hit first. The first one that does not fit stops admission (no overtaking).
//
// Invariants (check_invariants()): every running request is live in the KV manager with
// exactly num_computed_tokens + (tokens scheduled and not yet updated) reserved slots; waiting/preempted requests
// hold no blocks; running_ and waiting_ are sorted by (priority, arrival); the KV manager's
// own invariants hold.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "common/status.h"
#include "kv/kv_cache_manager.h"
#include "sched/request.h"

namespace hinge::sched {

struct SchedulerConfig {
  int32_t max_num_batched_tokens = 2048;  // token budget per step
  int32_t max_num_seqs = 256;             // running requests at most
  int32_t block_size_tokens = 16;
  int32_t num_kv_blocks = 0;              // size of the KV arena in blocks
  bool enable_prefix_cache = true;

  Status validate() const;
};

// One request's share of a step.
//   | computed before | first_position .. first_position + num_new_tokens | rest |
struct ScheduledRequest {
  RequestId id;
  int32_t first_position = 0;        // == num_computed_tokens before this step
  int32_t num_new_tokens = 0;        // tokens to compute this step (>= 1)
  bool samples = false;              // reaches num_tokens: the model samples one token after it
  std::vector<int32_t> token_ids;    // [num_new_tokens], ids at those positions
  std::vector<int64_t> slot_mapping; // [num_new_tokens], physical KV slot of each position
  std::vector<kv::BlockId> block_table;  // whole table after this step's allocation
  int32_t end_position() const { return first_position + num_new_tokens; }
};

struct SchedulerOutput {
  std::vector<ScheduledRequest> scheduled;  // running order, then newly admitted
  std::vector<kv::BlockCopy> block_copies;  // copy-on-write, to perform before the forward pass
  std::vector<RequestId> preempted;         // preempted this step (their KV is gone)
  std::vector<RequestId> finished;          // finished since the previous schedule()
  int32_t num_scheduled_tokens = 0;
  bool empty() const { return scheduled.empty(); }
};

// The token sampled for one request whose ScheduledRequest had samples == true.
struct SampledToken {
  RequestId id;
  int32_t token = 0;
};

struct SchedulerStats {
  int32_t num_running = 0;
  int32_t num_waiting = 0;  // including preempted
  int64_t num_steps = 0;
  int64_t num_preemptions = 0;
  int64_t num_scheduled_tokens = 0;
  int64_t num_finished = 0;
};

class Scheduler {
 public:
  explicit Scheduler(const SchedulerConfig& config);

  // Queues a request. Errors: id already live, empty prompt, max_new_tokens < 1, n != 1, or a
  // request that could never fit in the KV cache even alone.
  Status add_request(RequestId id, RequestParams params);
  // Removes a live request (freeing its blocks) with reason kAborted. False when unknown.
  bool abort_request(RequestId id);
  // The caller saw EOS or a stop sequence in the last sampled token: finishes with kStop.
  bool finish_request(RequestId id, FinishReason reason = FinishReason::kStop);

  SchedulerOutput schedule();
  // `sampled` holds one token per entry of output.scheduled with samples == true, in that order
  // (entries of requests aborted since schedule() are skipped, their tokens may be omitted).
  // Advances num_computed_tokens, caches full blocks, appends tokens, finishes on max tokens.
  void update(const SchedulerOutput& output, std::span<const SampledToken> sampled);

  // Finished requests (with output tokens and finish reason), handed over once.
  std::vector<Request> take_finished();

  const Request* find(RequestId id) const;
  bool has_unfinished() const { return !running_.empty() || !waiting_.empty(); }
  const std::vector<RequestId>& running() const { return running_; }
  const std::vector<RequestId>& waiting() const { return waiting_; }
  const kv::KvCacheManager& kv() const { return kv_; }
  const SchedulerConfig& config() const { return config_; }
  SchedulerStats stats() const;
  Status check_invariants() const;

 private:
  Request& get(RequestId id);
  bool before(RequestId a, RequestId b) const;  // (priority, arrival) order
  void insert_sorted(std::vector<RequestId>* queue, RequestId id);
  void preempt(RequestId id);
  void finish(RequestId id, FinishReason reason);
  ScheduledRequest make_scheduled(const Request& r, int32_t num_new) const;

  SchedulerConfig config_;
  kv::KvCacheManager kv_;
  std::unordered_map<RequestId, Request> requests_;  // live (not finished) requests
  std::vector<RequestId> running_;                   // sorted by (priority, arrival)
  std::vector<RequestId> waiting_;                   // sorted by (priority, arrival)
  std::vector<RequestId> finished_ids_;              // since the previous schedule()
  std::vector<Request> finished_;                    // not yet taken
  bool awaiting_update_ = false;                     // schedule() called, update() not yet
  uint64_t next_arrival_seq_ = 0;
  int64_t num_steps_ = 0;
  int64_t num_preemptions_ = 0;
  int64_t num_scheduled_tokens_ = 0;
  int64_t num_finished_ = 0;
};

}  // namespace hinge::sched
