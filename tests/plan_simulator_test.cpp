// `hinge simulate` (plan/simulator.h) runs the real scheduler and KV cache manager: the same
// requests through the simulator and through the engine (stories260K, greedy, EOS ignored, a KV
// arena small enough to preempt, shared prefixes to hit the cache) give the same schedule step
// for step (which requests got a token), the same preemptions and prefix hits; and the roofline
// cost model's step times, TTFT and throughput by hand.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <vector>

#include "model_test_util.h"
#include "plan/sim_chart.h"
#include "plan/simulator.h"

namespace hinge::plan {
namespace {

using testing::seeded_request;

TEST(PlanSimulator, SameScheduleAsTheEngineStepForStep) {
  auto m = testing::load_or_die(testing::shared_path("models/stories260K.gguf"));
  ASSERT_TRUE(m);
  EngineConfig c = testing::small_f32_engine_config(1, 24 * 20480);  // 24 blocks of 16 tokens
  c.max_batched_tokens = 96;
  c.max_num_seqs = 6;
  auto made = Engine::create(*m, nullptr, c);
  ASSERT_TRUE(made.ok()) << made.status().message();
  Engine& e = **made;
  // 10 requests: half share a 40-token prefix; lengths vary; more KV than 24 blocks at once.
  std::vector<GenerateRequest> reqs;
  const GenerateRequest shared = seeded_request(99, 40, 1);
  for (int i = 0; i < 10; ++i) {
    GenerateRequest r = seeded_request(200 + i, 30 + 17 * (i % 4), 20 + 9 * (i % 3));
    if (i % 2 == 0)
      r.prompt_token_ids.insert(r.prompt_token_ids.begin() + 1, shared.prompt_token_ids.begin() + 1,
                                shared.prompt_token_ids.end());
    reqs.push_back(r);
  }
  std::vector<std::vector<uint64_t>> engine_steps;
  for (const GenerateRequest& r : reqs) ASSERT_TRUE(e.add_request(r).ok());
  std::vector<RequestDelta> deltas;
  while (e.has_unfinished()) {
    ASSERT_TRUE(e.step(&deltas).ok());
    std::vector<uint64_t> ids;
    for (const RequestDelta& d : deltas)
      if (!d.token_ids.empty()) ids.push_back(d.id.value);
    std::sort(ids.begin(), ids.end());
    engine_steps.push_back(ids);
  }
  const EngineStats es = e.stats();
  ASSERT_GT(es.preemptions, 0) << "the test needs preemption (" << es.kv_blocks_total << " blocks)";
  ASSERT_GT(es.kv.num_prefix_hit_tokens, 0) << "the test needs prefix hits";

  sched::SchedulerConfig sc;
  sc.max_num_batched_tokens = c.max_batched_tokens;
  sc.max_num_seqs = c.max_num_seqs;
  sc.block_size_tokens = c.block_size;
  sc.num_kv_blocks = es.kv_blocks_total;
  sc.max_model_len = e.max_model_len();
  std::vector<SimRequest> sim;
  for (const GenerateRequest& r : reqs)
    sim.push_back({.arrival_s = 0, .prompt = r.prompt_token_ids, .output_tokens = r.max_new_tokens});
  CostModel cost{.weight_bytes = 1e6, .kv_bytes_per_token = 1e3, .prefill_flops_per_token = 1e6,
                 .bandwidth_bytes_per_s = 1e9, .peak_flops = 1e12};
  auto got = simulate(sc, cost, sim, /*keep_trace=*/true);
  ASSERT_TRUE(got.ok()) << got.status().message();
  std::vector<std::vector<uint64_t>> sim_steps;
  for (const SimStep& st : got->trace) {
    std::vector<uint64_t> ids = st.sampled;
    std::sort(ids.begin(), ids.end());
    sim_steps.push_back(ids);
  }
  EXPECT_EQ(sim_steps, engine_steps);
  EXPECT_EQ(got->preemptions, es.preemptions);
  EXPECT_EQ(got->computed_prompt_tokens, es.prompt_tokens_computed);
  EXPECT_EQ(got->output_tokens, es.output_tokens);
}

TEST(PlanSimulator, TheRooflineCostsEachStep) {
  sched::SchedulerConfig sc;
  sc.max_num_batched_tokens = 64;
  sc.max_num_seqs = 4;
  sc.block_size_tokens = 16;
  sc.num_kv_blocks = 64;
  // One request: a 100-token prompt in 2 chunks (64 + 36, the second samples), 4 tokens.
  std::vector<int32_t> prompt(100);
  for (int i = 0; i < 100; ++i) prompt[static_cast<size_t>(i)] = 3 + i;
  const std::vector<SimRequest> reqs = {{.arrival_s = 2.0, .prompt = prompt, .output_tokens = 4}};
  const CostModel cost{.weight_bytes = 1000, .kv_bytes_per_token = 10,
                       .prefill_flops_per_token = 100, .bandwidth_bytes_per_s = 1000,
                       .peak_flops = 1000, .step_overhead_s = 0.5};
  auto r = simulate(sc, cost, reqs, true);
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r->trace.size(), 5u);  // 2 prefill chunks, then 3 decode steps
  // Chunk 1: 64 tokens: compute 6.4 s vs (1000 + 64 x 10) / 1000 = 1.64 s.
  EXPECT_DOUBLE_EQ(r->trace[0].start_s, 2.0);  // the clock jumped to the arrival
  EXPECT_DOUBLE_EQ(r->trace[0].seconds, 0.5 + 6.4);
  EXPECT_DOUBLE_EQ(r->trace[1].seconds, 0.5 + 3.6);  // 36 tokens
  // Decode: context 101, 102, 103 tokens of KV and the weights: 1 + 1.01 s, ... (one token's
  // compute, 0.1 s, is below it).
  EXPECT_DOUBLE_EQ(r->trace[2].seconds, 0.5 + (1000 + 101 * 10) / 1000.0);
  EXPECT_DOUBLE_EQ(r->trace[2].compute_s, 0.1);
  EXPECT_DOUBLE_EQ(r->ttft_p50_s, 0.5 + 6.4 + 0.5 + 3.6);
  EXPECT_EQ(r->output_tokens, 4);
  EXPECT_DOUBLE_EQ(r->seconds, 2.0 + 6.9 + 4.1 + (0.5 + 2.01) + (0.5 + 2.02) + (0.5 + 2.03));
}

// Through hinge serve's admission control: worst-case reservations keep the cache from
// preempting, a bounded queue refuses the burst's tail, the rest wait and complete.
TEST(PlanSimulator, AdmissionReservesQueuesAndRefuses) {
  sched::SchedulerConfig sc;
  sc.max_num_batched_tokens = 256;
  sc.max_num_seqs = 16;
  sc.block_size_tokens = 16;
  sc.num_kv_blocks = 40;
  std::vector<SimRequest> reqs;
  for (int i = 0; i < 12; ++i) {
    std::vector<int32_t> prompt(100, 7);
    prompt[1] = i;  // distinct prompts
    reqs.push_back({.arrival_s = 0, .prompt = prompt, .output_tokens = 60});
  }
  const CostModel cost{.weight_bytes = 1e6, .kv_bytes_per_token = 1e3,
                       .prefill_flops_per_token = 1e6, .bandwidth_bytes_per_s = 1e9,
                       .peak_flops = 1e11};
  auto plain = simulate(sc, cost, reqs, false);
  ASSERT_TRUE(plain.ok());
  EXPECT_GT(plain->preemptions, 0);  // 12 x 10 blocks in 40: the scheduler preempts
  sched::AdmissionConfig ac;
  ac.num_blocks = 40;
  ac.block_size_tokens = 16;
  ac.max_queue = 5;
  auto gated = simulate(sc, cost, reqs, false, ac);
  ASSERT_TRUE(gated.ok()) << gated.status().message();
  EXPECT_EQ(gated->preemptions, 0);  // reservations: no request outgrows the cache
  // 40 blocks less 5 % headroom hold 3 reservations of 10 blocks; 5 wait; 4 are refused.
  EXPECT_EQ(gated->rejected["queue_full"], 4);
  EXPECT_EQ(gated->output_tokens, 8 * 60);
  EXPECT_GT(gated->queue_wait_max_s, 0);
}

TEST(PlanSimulator, TheChartHasItsPanelsAndNoNaN) {
  sched::SchedulerConfig sc;
  sc.max_num_batched_tokens = 64;
  sc.max_num_seqs = 4;
  sc.block_size_tokens = 16;
  sc.num_kv_blocks = 32;
  std::vector<SimRequest> reqs;
  for (int i = 0; i < 6; ++i) {
    std::vector<int32_t> prompt(40 + 10 * i, 5 + i);
    reqs.push_back({.arrival_s = 0.01 * i, .prompt = prompt, .output_tokens = 30});
  }
  const CostModel cost{.weight_bytes = 1e6, .kv_bytes_per_token = 1e3,
                       .prefill_flops_per_token = 1e6, .bandwidth_bytes_per_s = 1e9,
                       .peak_flops = 1e11, .step_overhead_s = 1e-4};
  auto r = simulate(sc, cost, reqs, true);
  ASSERT_TRUE(r.ok()) << r.status().message();
  const std::string svg = simulation_svg(*r, 32, "a <test> & chart");
  EXPECT_EQ(svg.rfind("<svg xmlns=\"http://www.w3.org/2000/svg\"", 0), 0u);
  EXPECT_NE(svg.find("</svg>\n"), std::string::npos);
  EXPECT_NE(svg.find("a &lt;test&gt; &amp; chart"), std::string::npos);  // escaped
  size_t lines = 0;
  for (size_t at = svg.find("<polyline"); at != std::string::npos; at = svg.find("<polyline", at + 1))
    ++lines;
  EXPECT_EQ(lines, 5u);  // KV blocks, running, waiting, TTFT and inter-token by percentile
  EXPECT_NE(svg.find("latency by percentile"), std::string::npos);
  ASSERT_EQ(r->ttft_s.size(), 6u);  // kept with the trace, sorted
  EXPECT_TRUE(std::is_sorted(r->itl_s.begin(), r->itl_s.end()));
  EXPECT_EQ(r->itl_s.size(), 6u * 29);
  EXPECT_EQ(svg.find("nan"), std::string::npos);
  EXPECT_EQ(svg.find("inf"), std::string::npos);
}

}  // namespace
}  // namespace hinge::plan
