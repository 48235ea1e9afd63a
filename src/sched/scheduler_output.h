// What one step does (Scheduler::schedule's output) and what the engine hands back after it
// (SampledToken), apart from the scheduler that makes them, as vLLM keeps sched/output.py.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "kv/kv_cache_manager.h"
#include "kv/kv_ids.h"

namespace hinge::sched {

using kv::RequestId;

// One request's share of a step.
//   | computed before | first_position .. first_position + num_new_tokens | rest |
struct ScheduledRequest {
  RequestId id;
  int32_t first_position = 0;        // == num_computed_tokens before this step
  int32_t num_new_tokens = 0;        // tokens to compute this step (>= 1)
  bool samples = false;              // reaches num_tokens: the model samples after it
  // Tokens to sample from the last position's logits when samples == true: 1, or n when this
  // step finishes the prompt of a request with n > 1 parallel samples (it forks in update()).
  // The sampled tokens go, in order, to id, then SchedulerOutput::sample_ids(*this).
  int32_t num_samples = 1;
  // Speculative decoding: the last num_spec_tokens of the num_new_tokens are draft tokens (the
  // request's one real token to compute comes first). The engine samples from each of the
  // 1 + num_spec_tokens rows and hands back the drafts it accepted plus one more token.
  int32_t num_spec_tokens = 0;
  // Where this request's share lies in SchedulerOutput's flat arrays (read it through the
  // accessors there): token ids and slots [token_begin, + num_new_tokens), the block table
  // after this step's allocation, one per KV group: group g's at [block_begin + g * num_blocks,
  // + num_blocks), the ids of samples 1..n-1 [sample_begin, + num_samples - 1).
  int32_t token_begin = 0;
  int32_t block_begin = 0;
  int32_t num_blocks = 0;
  int32_t sample_begin = 0;
  // A shifted request's per-block position offsets (Request::block_offsets, num_blocks of them)
  // at [offset_begin, + num_blocks) of all_block_offsets; -1: none (never shifted).
  int32_t offset_begin = -1;
  int32_t end_position() const { return first_position + num_new_tokens; }
};

// One step. The per-request arrays are concatenated in flat vectors that keep their capacity
// from step to step (schedule(SchedulerOutput*)), so a steady decode step allocates nothing
// and each block table is copied once; a copy of the output is self-contained.
struct SchedulerOutput {
  std::vector<ScheduledRequest> scheduled;  // running order, then newly admitted
  std::vector<kv::BlockCopy> block_copies;  // copy-on-write, to perform before the forward pass
  std::vector<RequestId> preempted;         // preempted this step (their KV is gone)
  std::vector<RequestId> finished;          // finished since the previous schedule()
  int32_t num_scheduled_tokens = 0;
  std::vector<int32_t> all_token_ids;       // every scheduled request's, concatenated
  // The physical KV slot of each of those positions in each KV group, group-major:
  // [group][num_scheduled_tokens].
  std::vector<int64_t> all_slots;
  // Every block table (each request's, one per group), concatenated, as the raw physical ids the
  // attention kernels read (kernels::AttentionSeq::block_table points into it: the tables are
  // copied once per step).
  std::vector<int32_t> all_block_ids;
  std::vector<RequestId> all_sample_ids;
  std::vector<int32_t> all_block_offsets;  // shifted requests' block offsets, concatenated

  bool empty() const { return scheduled.empty(); }
  void clear();
  // Ids at r's positions this step.
  std::span<const int32_t> token_ids(const ScheduledRequest& r) const {
    return std::span<const int32_t>(all_token_ids).subspan(static_cast<size_t>(r.token_begin),
                                                           static_cast<size_t>(r.num_new_tokens));
  }
  // Every scheduled position's physical KV slot in KV group g (the batch's rows, in order).
  std::span<const int64_t> group_slots(int32_t g = 0) const {
    return std::span<const int64_t>(all_slots).subspan(
        static_cast<size_t>(g) * static_cast<size_t>(num_scheduled_tokens),
        static_cast<size_t>(num_scheduled_tokens));
  }
  // Physical KV slot of each of r's positions in group g.
  std::span<const int64_t> slot_mapping(const ScheduledRequest& r, int32_t g = 0) const {
    return group_slots(g).subspan(static_cast<size_t>(r.token_begin),
                                  static_cast<size_t>(r.num_new_tokens));
  }
  // r's whole block table of group g after this step's allocation.
  std::span<const int32_t> block_table(const ScheduledRequest& r, int32_t g = 0) const {
    return std::span<const int32_t>(all_block_ids)
        .subspan(static_cast<size_t>(r.block_begin) +
                     static_cast<size_t>(g) * static_cast<size_t>(r.num_blocks),
                 static_cast<size_t>(r.num_blocks));
  }
  // r's block offsets (one per logical block), empty when r never shifted.
  std::span<const int32_t> block_offsets(const ScheduledRequest& r) const {
    if (r.offset_begin < 0) return {};
    return std::span<const int32_t>(all_block_offsets)
        .subspan(static_cast<size_t>(r.offset_begin), static_cast<size_t>(r.num_blocks));
  }
  // The ids of samples 1..num_samples-1 (RequestParams::sample_ids) when num_samples > 1.
  std::span<const RequestId> sample_ids(const ScheduledRequest& r) const {
    return std::span<const RequestId>(all_sample_ids)
        .subspan(static_cast<size_t>(r.sample_begin), static_cast<size_t>(r.num_samples - 1));
  }
};

// A token sampled for one request (or one parallel sample) whose ScheduledRequest had
// samples == true.
struct SampledToken {
  RequestId id;
  int32_t token = 0;
};

}  // namespace hinge::sched
