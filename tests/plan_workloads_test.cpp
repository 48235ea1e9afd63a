// `hinge simulate --workload chat / rag / burst` (plan/workloads.h) and follow-up requests in the
// simulator: a conversation's turns are sent after the previous answer ends and hit the prefix
// cache for the conversation so far; a RAG workload reuses its documents' KV; bursts arrive
// together; a refused request's follow-ups are never sent; bad specs are errors naming the flag.
// And the sweep chart (plan/sweep_chart.h): lines for one set, points for the other.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "plan/simulator.h"
#include "plan/sweep_chart.h"
#include "plan/workloads.h"

namespace hinge::plan {
namespace {

sched::SchedulerConfig config(int32_t blocks) {
  sched::SchedulerConfig sc;
  sc.max_num_batched_tokens = 256;
  sc.max_num_seqs = 16;
  sc.block_size_tokens = 16;
  sc.num_kv_blocks = blocks;
  sc.max_model_len = 8192;
  return sc;
}

const CostModel kCost{.weight_bytes = 1e6, .kv_bytes_per_token = 1e3,
                      .prefill_flops_per_token = 1e6, .bandwidth_bytes_per_s = 1e9,
                      .peak_flops = 1e10, .step_overhead_s = 1e-3};

TEST(PlanWorkloads, ChatTurnsExtendTheConversationAndFollowTheAnswer) {
  WorkloadSpec w{.name = "chat", .seed = 7, .system_tokens = 40, .message_tokens = 20,
                 .output_tokens = 10, .requests = 3, .turns = 4, .think_s = 5};
  auto reqs = generate_workload(w);
  ASSERT_TRUE(reqs.ok()) << reqs.status().message();
  ASSERT_EQ(reqs->size(), 12u);
  for (size_t i = 0; i < reqs->size(); ++i) {
    const SimRequest& r = (*reqs)[i];
    if (i % 4 == 0) {
      EXPECT_EQ(r.after, -1);
      EXPECT_EQ(r.prompt.size(), 1u + 40 + 20);  // BOS, the system prompt, the first message
      continue;
    }
    // Turn k: the conversation so far, its answer (the sampled token) and a new message.
    const SimRequest& prev = (*reqs)[i - 1];
    EXPECT_EQ(r.after, static_cast<int64_t>(i) - 1);
    EXPECT_DOUBLE_EQ(r.arrival_s, 5.0);
    ASSERT_EQ(r.prompt.size(), prev.prompt.size() + 10 + 20);
    EXPECT_TRUE(std::equal(prev.prompt.begin(), prev.prompt.end(), r.prompt.begin()));
    EXPECT_TRUE(std::all_of(r.prompt.begin() + static_cast<std::ptrdiff_t>(prev.prompt.size()),
                            r.prompt.begin() + static_cast<std::ptrdiff_t>(prev.prompt.size()) + 10,
                            [](int32_t t) { return t == kSimSampledToken; }));
  }
  // The system prompt is the same in every conversation; the messages are not.
  EXPECT_TRUE(std::equal((*reqs)[0].prompt.begin(), (*reqs)[0].prompt.begin() + 41, (*reqs)[4].prompt.begin()));
  EXPECT_NE((*reqs)[0].prompt, (*reqs)[4].prompt);

  auto r = simulate(config(256), kCost, *reqs, true);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->output_tokens, 12 * 10);
  // Four turns each 5 s after the last answer: over 15 s of thinking, and the clock jumped.
  EXPECT_GT(r->seconds, 15.0);
  EXPECT_LT(r->seconds, 16.0);
  // Every later turn finds the conversation so far cached: most prompt tokens are hits.
  EXPECT_GT(r->prefix_hit_rate, 0.6);
  EXPECT_LT(r->computed_prompt_tokens, r->prompt_tokens / 2);
  // TTFT counts from the turn's own arrival, not the conversation's start.
  EXPECT_LT(r->ttft_p99_s, 1.0);
}

TEST(PlanWorkloads, RagReusesPopularDocuments) {
  WorkloadSpec w{.name = "rag", .seed = 3, .system_tokens = 16, .message_tokens = 16,
                 .output_tokens = 8, .rate = 20, .requests = 40, .documents = 4,
                 .document_tokens = 256, .zipf = 1.0};
  auto reqs = generate_workload(w);
  ASSERT_TRUE(reqs.ok()) << reqs.status().message();
  ASSERT_EQ(reqs->size(), 40u);
  std::map<std::vector<int32_t>, int> docs;  // by the document's tokens
  for (const SimRequest& r : *reqs) {
    ASSERT_EQ(r.prompt.size(), 1u + 16 + 256 + 16);
    ++docs[std::vector<int32_t>(r.prompt.begin() + 17, r.prompt.begin() + 17 + 256)];
  }
  EXPECT_LE(docs.size(), 4u);
  int most = 0;
  for (const auto& [d, n] : docs) most = std::max(most, n);
  EXPECT_GT(most, 40 / 4);  // Zipf: one document is asked more than a uniform share
  EXPECT_DOUBLE_EQ((*reqs)[39].arrival_s, 39 / 20.0);
  auto r = simulate(config(512), kCost, *reqs, false);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_GT(r->prefix_hit_rate, 0.7);  // 4 documents, 40 requests
  w.zipf = 0;
  w.documents = 1000;  // (nearly) every document new: hits are the system prompt's
  auto cold = simulate(config(2048), kCost, *generate_workload(w), false);
  ASSERT_TRUE(cold.ok());
  EXPECT_LT(cold->prefix_hit_rate, 0.15);
}

TEST(PlanWorkloads, BurstsArriveTogetherAnIntervalApart) {
  WorkloadSpec w{.name = "burst", .message_tokens = 300, .output_tokens = 4, .requests = 5,
                 .bursts = 3, .interval_s = 7.5};
  auto reqs = generate_workload(w);
  ASSERT_TRUE(reqs.ok());
  ASSERT_EQ(reqs->size(), 15u);
  for (size_t i = 0; i < 15; ++i) EXPECT_DOUBLE_EQ((*reqs)[i].arrival_s, 7.5 * static_cast<double>(i / 5));
  w.mixed_lengths = true;
  auto mixed = generate_workload(w);
  ASSERT_TRUE(mixed.ok());
  for (const SimRequest& r : *mixed) {
    EXPECT_GE(r.prompt.size(), 2u);
    EXPECT_LE(r.prompt.size(), 301u);
    EXPECT_LE(r.output_tokens, 4);
  }
}

TEST(PlanWorkloads, ARefusedTurnEndsItsConversation) {
  // Conversation 0's first message is too large for admission; its 2 follow-ups are abandoned.
  std::vector<SimRequest> reqs(6);
  for (size_t i = 0; i < 6; ++i) {
    reqs[i].prompt.assign(i < 3 ? 600 : 40, static_cast<int32_t>(10 + i));
    reqs[i].output_tokens = 8;
    reqs[i].after = i % 3 == 0 ? -1 : static_cast<int64_t>(i) - 1;
    reqs[i].arrival_s = i % 3 == 0 ? 0 : 1;
  }
  sched::AdmissionConfig ac;
  ac.num_blocks = 64;
  ac.block_size_tokens = 16;
  ac.max_request_share = 0.5;  // 32 blocks; the first message needs 38
  auto r = simulate(config(64), kCost, reqs, false, ac);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->rejected["too_large"], 1);
  EXPECT_EQ(r->abandoned, 2);
  EXPECT_EQ(r->output_tokens, 3 * 8);
}

TEST(PlanWorkloads, BadSpecsAndLinksAreErrors) {
  auto bad = [](WorkloadSpec w, const std::string& flag) {
    auto r = generate_workload(w);
    ASSERT_FALSE(r.ok()) << flag;
    EXPECT_NE(r.status().message().find(flag), std::string::npos) << r.status().message();
  };
  bad({.name = "poisson"}, "--workload");
  bad({.name = "chat", .requests = 0}, "--requests");
  bad({.name = "chat", .turns = 0}, "--turns");
  bad({.name = "chat", .think_s = -1}, "--think-s");
  bad({.name = "rag", .documents = 0}, "--documents");
  bad({.name = "rag", .zipf = -1}, "--zipf");
  bad({.name = "burst", .bursts = 0}, "--bursts");
  bad({.name = "burst", .interval_s = -2}, "--burst-interval");
  bad({.name = "burst", .message_tokens = 0}, "--prompt-tokens");
  bad({.name = "rag", .rate = -1}, "--rate");
  // A follow-up must name an earlier request.
  std::vector<SimRequest> reqs(2);
  for (SimRequest& r : reqs) r.prompt = {1, 5, 6};
  reqs[0].after = 1;
  auto r = simulate(config(16), kCost, reqs, false);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("earlier"), std::string::npos);
}

TEST(PlanSweepChart, LinesForOneSetPointsForTheOther) {
  std::vector<SweepPoint> sim, bench;
  for (const char* dtype : {"f16", "int8"})
    for (int64_t b : {1, 4})
      for (int64_t c : {128, 1024, 4096}) {
        sim.push_back({.kv_dtype = dtype, .batch = b, .context = c,
                       .tokens_per_s = 100.0 * static_cast<double>(b) / static_cast<double>(c / 128)});
        bench.push_back(sim.back());
        bench.back().tokens_per_s *= 0.9;
      }
  const std::string svg = sweep_svg(sim, bench, "grid <&>", "simulated", "measured");
  auto count = [&](const std::string& what) {
    size_t n = 0;
    for (size_t at = svg.find(what); at != std::string::npos; at = svg.find(what, at + 1)) ++n;
    return n;
  };
  EXPECT_EQ(count("<polyline"), 4u);     // (dtype, batch)
  EXPECT_EQ(count("<circle"), 12u + 1);  // every measured cell, and the legend's
  EXPECT_EQ(count("stroke-dasharray"), 2u);  // the second dtype's lines
  EXPECT_NE(svg.find("grid &lt;&amp;&gt;"), std::string::npos);
  EXPECT_NE(svg.find("measured"), std::string::npos);
  EXPECT_EQ(svg.find("nan"), std::string::npos);
  // Without points: no circles, no points legend.
  const std::string lines_only = sweep_svg(sim, {}, "grid", "", "measured");
  EXPECT_EQ(lines_only.find("<circle"), std::string::npos);
}

}  // namespace
}  // namespace hinge::plan
