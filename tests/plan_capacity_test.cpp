// `hinge plan` (plan/capacity.h): the concurrency of Llama-3.1-70B in fp16 on 2 x H100-80GB at
// 8k and 32k, recomputed here from the formula (usable = 2 x 80 GB x 0.9; weights = 70.6e9 x 2;
// paged = floor((usable - weights) / KV of a request); contiguous reserves the model's 131072
// tokens), a workload's length distribution, the decode roofline, and the command's errors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "plan/capacity.h"
#include "test_util.h"

namespace hinge::plan {
namespace {

TEST(PlanCapacity, Llama31_70bOnTwoH100sByTheFormula) {
  const KvShape* m = find_kv_preset("llama-3.1-70b");
  const Accelerator* h100 = find_accelerator("h100-80gb");
  ASSERT_TRUE(m && h100);
  for (int64_t context : {8192, 32768}) {
    PlanInput in;
    in.model = *m;
    in.gpus = 2;
    in.context = context;
    const Plan p = make_plan(in, *h100);
    const double budget = 2 * 80e9 * 0.9 - 70.6e9 * 2;
    EXPECT_DOUBLE_EQ(p.kv_budget_bytes, budget);
    ASSERT_EQ(p.rows.size(), 3u);
    for (const PlanRow& r : p.rows) {
      const double per = 2.0 * 80 * 8 * 128 * *kv_element_bytes(r.dtype) * static_cast<double>(context);
      EXPECT_DOUBLE_EQ(r.kv_per_request_bytes, per);
      EXPECT_EQ(r.paged_requests, static_cast<int64_t>(std::floor(budget / per))) << r.dtype;
      EXPECT_EQ(r.contiguous_requests,
                static_cast<int64_t>(std::floor(budget / (per / static_cast<double>(context) * 131072))));
      if (r.paged_requests > 0) {
        EXPECT_DOUBLE_EQ(r.step_seconds, (70.6e9 * 2 + static_cast<double>(r.paged_requests) * per) /
                                             (2 * 3.35e12));
      }
    }
  }
  // 8k in f16: 2.8 GB of KV budget holds one 2.7 GB request; at 32k none.
  PlanInput in;
  in.model = *m;
  in.gpus = 2;
  in.context = 8192;
  EXPECT_EQ(make_plan(in, *h100).rows[0].paged_requests, 1);
  in.context = 32768;
  EXPECT_EQ(make_plan(in, *h100).rows[0].paged_requests, 0);
  // On 8 GPUs the weights leave room: (576 - 141.2) GB / 10.74 GB = 40.
  in.gpus = 8;
  EXPECT_EQ(make_plan(in, *h100).rows[0].paged_requests, 40);
}

TEST(PlanCapacity, AWorkloadIsPlannedAtItsMeanRequest) {
  const KvShape* m = find_kv_preset("llama-3.1-8b");
  const Accelerator* l4 = find_accelerator("l4-24gb");
  ASSERT_TRUE(m && l4);
  PlanInput in;
  in.model = *m;
  in.lengths = {1000, 3000};
  const Plan p = make_plan(in, *l4);
  EXPECT_EQ(p.mean_tokens, 2000);
  const double per = 2.0 * 32 * 8 * 128 * 2 * 2000;  // linear: the mean request
  EXPECT_DOUBLE_EQ(p.rows[0].kv_per_request_bytes, per);
  EXPECT_EQ(p.rows[0].paged_requests,
            static_cast<int64_t>(std::floor((24e9 * 0.9 - 8.03e9 * 2) / per)));
  EXPECT_EQ(p.max_model_len, 131072);
}

TEST(PlanCapacityCli, TableJsonWorkloadAndErrors) {
  using testing::hinge_binary;
  using testing::run_command;
  auto r = run_command(hinge_binary() + " plan --model llama-3.1-70b --gpu h100-80gb --gpus 2 "
                                        "--context 8192 32768 --json");
  ASSERT_EQ(r.exit_code, 0);
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j.size(), 2u);
  EXPECT_EQ(j[0]["rows"][0]["paged_requests"], 1);
  EXPECT_EQ(j[1]["rows"][0]["paged_requests"], 0);
  EXPECT_EQ(j[1]["rows"][2]["kv_dtype"], "int4");
  EXPECT_EQ(j[1]["rows"][2]["paged_requests"], 1);
  auto t = run_command(hinge_binary() + " plan --model llama-3.1-70b --gpus 8 --context 32768");
  ASSERT_EQ(t.exit_code, 0);
  EXPECT_NE(t.out.find("KV budget 434.8 GB"), std::string::npos) << t.out;
  const std::string w = testing::temp_dir() + "/plan-workload.jsonl";
  std::FILE* f = std::fopen(w.c_str(), "w");
  ASSERT_NE(f, nullptr);
  std::fputs("{\"prompt_tokens\": 900, \"output_tokens\": 100}\n\n"
             "{\"prompt_tokens\": 2900, \"output_tokens\": 100}\n", f);
  std::fclose(f);
  auto wl = run_command(hinge_binary() + " plan --model llama-3.1-8b --gpu l4-24gb --workload " + w +
                        " --json");
  ASSERT_EQ(wl.exit_code, 0);
  EXPECT_EQ(nlohmann::json::parse(wl.out)[0]["mean_tokens"], 2000.0);
  for (const std::string bad : {" plan --model llama-9", " plan --model llama-3.1-8b --gpu tpu",
                                " plan --model llama-3.1-8b --weights f7",
                                " plan --model llama-3.1-8b --workload /nonexistent"}) {
    auto e = run_command(hinge_binary() + bad + " 2>&1");
    EXPECT_NE(e.exit_code, 0) << bad;
    EXPECT_NE(e.out.find("hinge: "), std::string::npos) << bad << ": " << e.out;
  }
  auto weights = run_command(hinge_binary() + " plan --model llama-3.1-405b --context 8192");
  EXPECT_NE(weights.out.find("the weights do not fit"), std::string::npos) << weights.out;
}

}  // namespace
}  // namespace hinge::plan
