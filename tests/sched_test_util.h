// Helpers shared by the scheduler tests: a one-line description of a step, token/block id
// ranges, configs, and the invariants check macro.
#pragma once

#include <gtest/gtest.h>

#include <fmt/format.h>

#include <initializer_list>
#include <span>
#include <string>
#include <vector>

#include "sched/scheduler.h"

namespace hinge::sched::test {

// "1:0+8* 2:10+1 3:0+100*3 pre 3 fin 4": id:first_position+num_new_tokens, '*' when it samples,
// followed by num_samples when a parallel-sampling request forks at this step.
inline std::string describe(const SchedulerOutput& out) {
  std::string s;
  auto sep = [&] {
    if (!s.empty()) s += ' ';
  };
  for (const ScheduledRequest& r : out.scheduled) {
    sep();
    s += fmt::format("{}:{}+{}{}", r.id.value, r.first_position, r.num_new_tokens,
                     r.samples ? "*" : "");
    if (r.num_samples > 1) s += fmt::format("{}", r.num_samples);
  }
  if (!out.preempted.empty()) {
    sep();
    s += "pre";
    for (RequestId id : out.preempted) s += fmt::format(" {}", id.value);
  }
  if (!out.finished.empty()) {
    sep();
    s += "fin";
    for (RequestId id : out.finished) s += fmt::format(" {}", id.value);
  }
  return s;
}

inline std::vector<int32_t> iota_tokens(int32_t first, int32_t n) {
  std::vector<int32_t> t;
  for (int32_t i = 0; i < n; ++i) t.push_back(first + i);
  return t;
}

inline std::vector<kv::BlockId> block_ids(std::initializer_list<int32_t> v) {
  std::vector<kv::BlockId> out;
  for (int32_t x : v) out.push_back(kv::BlockId(x));
  return out;
}

inline std::vector<kv::BlockId> block_range(int32_t first, int32_t n) {
  std::vector<kv::BlockId> out;
  for (int32_t i = 0; i < n; ++i) out.push_back(kv::BlockId(first + i));
  return out;
}

inline std::vector<int32_t> vec(std::span<const int32_t> s) { return {s.begin(), s.end()}; }
inline std::vector<int64_t> vec(std::span<const int64_t> s) { return {s.begin(), s.end()}; }
inline std::vector<kv::BlockId> vec(std::span<const kv::BlockId> s) { return {s.begin(), s.end()}; }
// A step's block table (raw physical ids, SchedulerOutput::block_table) as typed ids.
inline std::vector<kv::BlockId> blocks_of(std::span<const int32_t> s) {
  std::vector<kv::BlockId> out;
  for (int32_t b : s) out.push_back(kv::BlockId(b));
  return out;
}
inline std::vector<RequestId> vec(std::span<const RequestId> s) { return {s.begin(), s.end()}; }

inline SchedulerConfig config(int32_t budget, int32_t max_seqs, int32_t bs, int32_t blocks,
                              bool prefix_cache = true) {
  return SchedulerConfig{.max_num_batched_tokens = budget,
                         .max_num_seqs = max_seqs,
                         .block_size_tokens = bs,
                         .num_kv_blocks = blocks,
                         .enable_prefix_cache = prefix_cache};
}

#define EXPECT_SCHED_INVARIANTS(s)          \
  do {                                      \
    Status _st = (s).check_invariants();    \
    ASSERT_TRUE(_st.ok()) << _st.message(); \
  } while (0)

}  // namespace hinge::sched::test
