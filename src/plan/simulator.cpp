#include "plan/simulator.h"

#include <algorithm>
#include <numeric>
#include <queue>
#include <utility>
#include <unordered_map>

#include "common/percentile.h"

namespace hinge::plan {

StatusOr<SimResult> simulate(const sched::SchedulerConfig& config, const CostModel& cost,
                             std::span<const SimRequest> requests, bool keep_trace,
                             const std::optional<sched::AdmissionConfig>& admission) {
  HINGE_RETURN_IF_ERROR(config.validate());
  sched::Scheduler s(config);
  std::optional<sched::AdmissionController> ac;
  if (admission) ac.emplace(*admission);
  // Arrivals, earliest first (ties in the trace's order, as a server's queue takes them); a
  // follow-up joins when its predecessor ends.
  std::vector<std::vector<size_t>> followers(requests.size());
  using Arrival = std::pair<double, size_t>;
  std::priority_queue<Arrival, std::vector<Arrival>, std::greater<>> arrivals;
  for (size_t i = 0; i < requests.size(); ++i) {
    const int64_t after = requests[i].after;
    if (after >= static_cast<int64_t>(i) || after < -1)
      return Status::Errorf("simulate: request {} follows {}, which is not an earlier request", i, after);
    if (after >= 0) followers[static_cast<size_t>(after)].push_back(i);
    else arrivals.emplace(requests[i].arrival_s, i);
  }
  std::vector<size_t> index_of = {0};  // request id -> index (ids count arrivals from 1)
  struct Track {
    double arrival = 0, first = -1, last = -1;
    int64_t tokens = 0;
  };
  std::unordered_map<uint64_t, Track> track;
  std::vector<double> itl;
  SimResult r;
  double now = 0;
  sched::SchedulerOutput out;
  std::vector<sched::SampledToken> sampled;
  std::unordered_map<uint64_t, size_t> queued;  // admission's queue: id -> request index
  auto start = [&](uint64_t id, size_t index) -> Status {
    const SimRequest& q = requests[index];
    sched::RequestParams p;
    p.prompt_token_ids = q.prompt;
    p.max_new_tokens = q.output_tokens;
    p.priority = q.priority;
    HINGE_RETURN_IF_ERROR(s.add_request(kv::RequestId(id), std::move(p)));
    r.prompt_tokens += static_cast<int64_t>(q.prompt.size());
    r.queue_wait_max_s = std::max(r.queue_wait_max_s, now - track[id].arrival);
    return Status::Ok();
  };
  // A request refused or dropped: its conversation ends there.
  auto abandon = [&](size_t index) {
    std::vector<size_t> todo = followers[index];
    while (!todo.empty()) {
      const size_t f = todo.back();
      todo.pop_back();
      ++r.abandoned;
      todo.insert(todo.end(), followers[f].begin(), followers[f].end());
    }
  };
  auto free_blocks = [&] {
    const kv::BlockPoolCounters c = s.kv().pool().counters();
    return c.num_free_blocks;  // ref 0: free or evictable
  };
  auto cached = [&](uint64_t id) {
    const kv::ComputedBlocks hit = s.kv().get_computed_blocks(requests[index_of[id]].prompt, {});
    return static_cast<int32_t>(std::count_if(hit.blocks.begin(), hit.blocks.end(),
                                              [](kv::BlockId b) { return b != kv::kReleasedBlock; }));
  };
  while (!arrivals.empty() || s.has_unfinished() || !queued.empty()) {
    // Nothing to run: the clock jumps to the next arrival.
    if (!s.has_unfinished() && !arrivals.empty() && arrivals.top().first > now)
      now = arrivals.top().first;
    while (!arrivals.empty() && arrivals.top().first <= now) {
      const auto [arrival, index] = arrivals.top();
      arrivals.pop();
      const SimRequest& q = requests[index];
      const uint64_t id = index_of.size();
      index_of.push_back(index);
      track[id].arrival = arrival;
      if (ac) {
        sched::AdmissionTicket t;
        t.id = id;
        t.priority = q.priority;
        t.worst_case_blocks = sched::AdmissionController::worst_case_blocks(
            static_cast<int64_t>(q.prompt.size()), q.output_tokens, 1, config.block_size_tokens,
            config.num_kv_groups);
        const sched::AdmissionOffer o = ac->offer(t, now, free_blocks(), cached);
        if (o.verdict == sched::AdmissionVerdict::kAdmitted) {
          HINGE_RETURN_IF_ERROR(start(id, index));
        } else if (o.verdict == sched::AdmissionVerdict::kQueued) {
          queued[id] = index;
        } else {
          ++r.rejected[sched::admission_verdict_name(o.verdict)];
          track.erase(id);
          abandon(index);
        }
      } else {
        HINGE_RETURN_IF_ERROR(start(id, index));
      }
    }
  if (ac && !queued.empty()) {
      for (uint64_t id : ac->expire(now)) {
        abandon(queued.at(id));
        queued.erase(id);
        track.erase(id);
        ++r.rejected[sched::admission_verdict_name(sched::AdmissionVerdict::kTimedOut)];
      }
      while (auto id = ac->admit_next(now, free_blocks(), cached)) {
        HINGE_RETURN_IF_ERROR(start(*id, queued.at(*id)));
        queued.erase(*id);
      }
    }
    if (!s.has_unfinished()) {
      if (arrivals.empty() && !queued.empty())
        return Status::Error("simulate: requests wait in admission's queue with nothing running");
      continue;
    }
    s.set_cache_time(now);
    s.schedule(&out);
    SimStep st;
    st.start_s = now;
    st.running = s.stats().num_running;
    st.waiting = s.stats().num_waiting;
    double kv_read = 0, attention = 0;
    sampled.clear();
    for (const sched::ScheduledRequest& q : out.scheduled) {
      const sched::Request* req = s.find(q.id);
      const int32_t prompt_end = req ? req->num_kept_prompt_tokens() : 0;
      const int32_t prompt_part =
          std::max(0, std::min(q.end_position(), prompt_end) - q.first_position);
      st.prefill_tokens += prompt_part;
      st.decode_tokens += q.num_new_tokens - prompt_part;
      // Attention reads the context so far; the new tokens' KV is written.
      kv_read += static_cast<double>(q.end_position()) * cost.kv_bytes_per_token;
      attention += static_cast<double>(q.num_new_tokens) *
                   (static_cast<double>(q.first_position) + 0.5 * (q.num_new_tokens + 1));
      if (!q.samples) continue;
      sampled.push_back({q.id, kSimSampledToken});
      for (kv::RequestId sid : out.sample_ids(q)) sampled.push_back({sid, kSimSampledToken});
    }
    r.computed_prompt_tokens += st.prefill_tokens;
    // Every token computed does the matrices' multiply-adds (decode rows too: at a large batch
    // a CPU's decode step is compute-bound before it is bandwidth-bound).
    const double decode_peak = cost.decode_peak_flops > 0 ? cost.decode_peak_flops : cost.peak_flops;
    const double rows = static_cast<double>(st.prefill_tokens + st.decode_tokens);
    const double rate =
        decode_peak + (cost.peak_flops - decode_peak) * std::clamp((rows - 16) / (512 - 16), 0.0, 1.0);
    st.compute_s = rows * cost.prefill_flops_per_token / rate +
                   attention * cost.attention_flops_per_context /
                       (cost.attention_flops_rate > 0 ? cost.attention_flops_rate : cost.peak_flops);
    st.weight_s = out.empty() ? 0 : cost.weight_bytes / cost.bandwidth_bytes_per_s;
    st.kv_s = kv_read / cost.bandwidth_bytes_per_s;
    const double memory_s = st.weight_s + st.kv_s;
    st.seconds = out.empty() ? 0
                             : cost.step_overhead_s + (cost.additive ? st.compute_s + memory_s
                                                                     : std::max(st.compute_s, memory_s));
    if (out.empty() && s.has_unfinished())
      return Status::Error("simulate: live requests but nothing scheduled (the KV cache cannot "
                           "hold one of them)");
    now += st.seconds;
    s.update(out, sampled);
    for (const sched::SampledToken& t : sampled) {
      Track& k = track[t.id.value];
      if (k.first < 0) {
        k.first = now;
      } else {
        itl.push_back(now - k.last);
      }
      k.last = now;
      ++k.tokens;
      st.sampled.push_back(t.id.value);
    }
    r.output_tokens += static_cast<int64_t>(sampled.size());
    const kv::KvCacheStats ks = s.kv().stats();
    st.kv_blocks_used = ks.pool.num_used_blocks;
    r.kv_blocks_peak = std::max(r.kv_blocks_peak, st.kv_blocks_used);
    ++r.steps;
    if (keep_trace) r.trace.push_back(std::move(st));
    for (const sched::Request& f : s.take_finished()) {
      if (ac) ac->release(f.id().value, now);
      for (size_t next : followers[index_of[f.id().value]])
        arrivals.emplace(now + requests[next].arrival_s, next);
    }
  }
  r.seconds = now;
  r.output_tokens_per_s = now > 0 ? static_cast<double>(r.output_tokens) / now : 0;
  std::vector<double> ttft;
  for (const auto& [id, k] : track)
    if (k.first >= 0) ttft.push_back(k.first - k.arrival);
  std::sort(ttft.begin(), ttft.end());
  std::sort(itl.begin(), itl.end());
  r.ttft_p50_s = percentile(ttft, 50);
  r.ttft_p99_s = percentile(ttft, 99);
  r.itl_p50_s = percentile(itl, 50);
  r.itl_p99_s = percentile(itl, 99);
  if (keep_trace) {
    r.ttft_s = std::move(ttft);
    r.itl_s = std::move(itl);
  }
  const kv::KvCacheStats ks = s.kv().stats();
  r.prefix_hit_rate = ks.num_prefix_query_tokens > 0
                          ? static_cast<double>(ks.num_prefix_hit_tokens) /
                                static_cast<double>(ks.num_prefix_query_tokens)
                          : 0;
  r.preemptions = s.stats().num_preemptions;
  return r;
}

}  // namespace hinge::plan
