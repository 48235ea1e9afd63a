// Request: the scheduler's state of one generation request. A plain value owned by the
// Scheduler (engine thread only); everything else refers to it by RequestId.
//
// Tokens are one sequence, prompt then output:
//   | prompt_token_ids ............ | output_token_ids ... |
//   0                  num_prompt_tokens                  num_tokens()
//   |<- num_computed_tokens (KV written) ->| still to compute |
// The scheduler only moves num_computed_tokens towards num_tokens() (no prefill/decode phases).
// When it reaches num_tokens() the model samples one token, appended to the output. After a
// preemption (recompute) num_computed_tokens drops to 0 and prompt + output is computed again.
//
// Parallel samples (n > 1): the request is one sequence until its prompt is computed; the step
// that finishes the prompt samples n tokens from that one logits row and the scheduler forks it
// into n independent requests: sample 0 keeps the request's id, sample k (1..n-1) gets id
// sample_ids[k - 1], the KV of the prompt is shared (copy-on-write of a partial last block).
// Every sample then lives, is preempted and finishes on its own.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "common/status.h"
#include "kv/block_hash.h"
#include "kv/kv_ids.h"
#include "sched/request_types.h"

namespace hinge::sched {

using kv::RequestId;


enum class RequestStatus : uint8_t {
  kWaiting,    // never scheduled yet
  kRunning,    // holds KV blocks, in the running batch
  kPreempted,  // blocks freed, back in the waiting queue, recomputes from token 0
  kFinished,   // blocks freed, removed from the queues
};

const char* request_status_name(RequestStatus s);

// What the caller supplies for a new request.
struct RequestParams {
  std::vector<int32_t> prompt_token_ids;
  int32_t max_new_tokens = 16;
  Priority priority = Priority::kInteractive;
  kv::CacheScope cache_scope{};  // server-derived namespace and owner (kv_ids.h), never client input
  // Parallel samples (fork after prefill, copy-on-write), n >= 1.
  int32_t n = 1;
  // Ids of samples 1..n-1 (size n - 1), chosen by the caller; sample 0 is the request's own
  // id. Distinct, and neither live nor reserved by another request until they finish.
  std::vector<RequestId> sample_ids{};
  // True: admission never adopts a prefix-cache hit (every prompt position is computed, e.g.
  // for prompt logprobs); the request's own full blocks are still cached for others. Forked
  // samples inherit it (a recompute after preemption computes everything again).
  bool skip_prefix_cache = false;
  // The shift context policy keeps these leading tokens (rounded up to whole blocks, at least
  // the sink tokens): a system prompt the server knows.
  int32_t keep_tokens = 0;
  // Where the prompt's chat turns start (token positions, strictly increasing, within the
  // prompt; the end of the last message included): a shift then drops whole turns when a turn
  // boundary is within reach (never half a turn's header), else the fewest whole blocks.
  std::vector<int32_t> turn_starts{};
};

class Request {
 public:
  Request(RequestId id, RequestParams params, uint64_t arrival_seq)
      : id_(id),
        token_ids_(std::move(params.prompt_token_ids)),
        num_prompt_tokens_(static_cast<int32_t>(token_ids_.size())),
        max_new_tokens_(params.max_new_tokens),
        priority_(params.priority),
        arrival_seq_(arrival_seq),
        cache_scope_(params.cache_scope),
        n_(params.n),
        sample_ids_(std::move(params.sample_ids)),
        parent_id_(id),
        skip_prefix_cache_(params.skip_prefix_cache),
        keep_tokens_(std::max(0, params.keep_tokens)),
        turn_starts_(std::move(params.turn_starts)) {
    // Sized once for the whole generation: update() appends without allocating.
    token_ids_.reserve(static_cast<size_t>(max_tokens()));
  }
  // Prompt plus max_new_tokens: the most tokens this request can hold.
  int32_t max_tokens() const { return num_prompt_tokens_ + std::max(0, max_new_tokens_); }

  RequestId id() const { return id_; }
  Priority priority() const { return priority_; }
  uint64_t arrival_seq() const { return arrival_seq_; }
  const kv::CacheScope& cache_scope() const { return cache_scope_; }
  int32_t max_new_tokens() const { return max_new_tokens_; }
  // Parallel samples requested: params.n for a request added by add_request, 1 for a sample
  // created by a fork.
  int32_t n() const { return n_; }
  // Ids of samples 1..n-1 (empty for n == 1 and for forked samples).
  std::span<const RequestId> sample_ids() const { return sample_ids_; }
  // The request this one was forked from (its own id when added by add_request), and its index
  // among the samples (0: the request itself; k: sample_ids()[k - 1] of the parent).
  RequestId parent_id() const { return parent_id_; }
  int32_t sample_index() const { return sample_index_; }
  // n > 1 and the prompt not yet computed: the step that finishes the prompt forks it.
  bool fork_pending() const { return n_ > 1 && !forked_; }
  bool skip_prefix_cache() const { return skip_prefix_cache_; }

  int32_t num_prompt_tokens() const { return num_prompt_tokens_; }
  // Generated so far, the tokens a context shift dropped included.
  int32_t num_output_tokens() const {
    return num_tokens() + num_dropped_tokens_ - num_prompt_tokens_;
  }
  // Tokens in the cache view (what is computed and attended to): prompt then output, less what
  // context shifts dropped.
  int32_t num_tokens() const { return static_cast<int32_t>(token_ids_.size()); }
  // Prompt then output, contiguous (what prefix hashing and recompute see); after a context
  // shift, the tokens that are still in the cache.
  std::span<const int32_t> token_ids() const { return token_ids_; }
  // The prompt tokens still in the cache view, and the output tokens still there.
  int32_t num_kept_prompt_tokens() const { return num_prompt_tokens_ - num_dropped_prompt_tokens_; }
  std::span<const int32_t> prompt_token_ids() const {
    return std::span<const int32_t>(token_ids_).first(static_cast<size_t>(num_kept_prompt_tokens()));
  }
  std::span<const int32_t> output_token_ids() const {
    return std::span<const int32_t>(token_ids_).subspan(static_cast<size_t>(num_kept_prompt_tokens()));
  }
  // The shift context policy: tokens dropped so far, shifts done, and per logical block how
  // many positions further its keys were written than where they now sit (kernels::
  // AttentionSeq::block_rotation); empty until the first shift.
  int32_t num_dropped_tokens() const { return num_dropped_tokens_; }
  int32_t num_shifts() const { return num_shifts_; }
  std::span<const int32_t> block_offsets() const { return block_offsets_; }
  // Leading tokens a shift keeps besides the sinks (a system prompt the server knows).
  int32_t keep_tokens() const { return keep_tokens_; }
  // Turn starts not dropped yet, in current token positions (RequestParams::turn_starts).
  std::span<const int32_t> turn_starts() const { return turn_starts_; }

  // Speculative decoding: the draft tokens proposed for its next decode step
  // (Scheduler::set_spec_tokens), consumed by that step.
  std::span<const int32_t> spec_token_ids() const { return spec_token_ids_; }

  int32_t num_computed_tokens() const { return num_computed_tokens_; }
  // Prompt tokens found in the prefix cache at first admission (usage reporting); -1 before.
  int32_t num_cached_tokens() const { return num_cached_tokens_; }
  int32_t num_preemptions() const { return num_preemptions_; }
  RequestStatus status() const { return status_; }
  FinishReason finish_reason() const { return finish_reason_; }
  bool is_finished() const { return status_ == RequestStatus::kFinished; }

 private:
  friend class Scheduler;  // the only writer of the mutable state below

  RequestId id_;
  std::vector<int32_t> token_ids_;  // [num_tokens], prompt then output
  // Chain hashes of the first full blocks of token_ids_, extended at each admission
  // (kv::KvCacheManager::extend_block_hashes): a request waiting for room, or recomputed after
  // preemption, hashes each block once.
  std::vector<kv::BlockHash> block_hashes_;
  int32_t num_prompt_tokens_;
  int32_t max_new_tokens_;
  Priority priority_;
  uint64_t arrival_seq_;
  kv::CacheScope cache_scope_;
  int32_t n_;
  std::vector<RequestId> sample_ids_;
  RequestId parent_id_;
  bool skip_prefix_cache_;
  int32_t keep_tokens_ = 0;
  std::vector<int32_t> turn_starts_;  // see turn_starts()
  int32_t num_dropped_tokens_ = 0;
  int32_t num_dropped_prompt_tokens_ = 0;
  int32_t num_shifts_ = 0;
  std::vector<int32_t> block_offsets_;  // see block_offsets()
  int32_t sample_index_ = 0;  // tie-break of the (priority, arrival) order within a fork
  bool forked_ = false;

  std::vector<int32_t> spec_token_ids_;  // see spec_token_ids()
  int32_t num_computed_tokens_ = 0;
  int32_t num_inflight_tokens_ = 0;  // (draft tokens included)  // scheduled by the last schedule(), not yet updated
  int32_t num_cached_tokens_ = -1;
  int32_t num_preemptions_ = 0;
  RequestStatus status_ = RequestStatus::kWaiting;
  FinishReason finish_reason_ = FinishReason::kNone;
};

}  // namespace hinge::sched
