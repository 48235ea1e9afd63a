// StepProfile (`hinge run --profile`): laps add up per phase, the table and JSON name every
// phase with the matmuls' GB/s (decode) or GOP/s (prefill); an engine with profile_steps counts
// each decode step once in one profile and the prompt's step in the other, the weight bytes and
// multiply-adds of every matmul phase, and generates the same tokens as without.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "model/step_profile.h"
#include "model_test_util.h"
#include "test_util.h"

namespace hinge {
namespace {

using testing::load_or_die;
using testing::shared_path;

TEST(StepProfile, LapsAddUpPerPhaseAndFormat) {
  StepProfile p;
  EXPECT_NE(p.format(0).find("no decode step ran"), std::string::npos);
  for (int s = 0; s < 3; ++s) {
    p.begin_step(2);
    p.lap(StepProfile::kQkv, 1000, 4000);
    p.lap(StepProfile::kAttention);
    p.lap(StepProfile::kQkv, 500, 2000);
  }
  EXPECT_EQ(p.steps(), 3);
  EXPECT_EQ(p.tokens(), 6);
  EXPECT_EQ(p.bytes(StepProfile::kQkv), 4500);
  EXPECT_EQ(p.bytes(StepProfile::kAttention), 0);
  EXPECT_EQ(p.macs(StepProfile::kQkv), 18000);
  EXPECT_GE(p.ns(StepProfile::kQkv), 0);
  EXPECT_EQ(p.total_ns(), p.ns(StepProfile::kQkv) + p.ns(StepProfile::kAttention));
  const std::string table = p.format(30e9);
  for (int i = 0; i < StepProfile::kPhases; ++i)
    EXPECT_NE(table.find(StepProfile::phase_name(static_cast<StepProfile::Phase>(i))),
              std::string::npos)
        << table;
  EXPECT_NE(table.find("of read bw"), std::string::npos) << table;
  EXPECT_EQ(p.format(0).find("of read bw"), std::string::npos);
  const nlohmann::json j = p.to_json();
  EXPECT_EQ(j["steps"], 3);
  ASSERT_EQ(j["phases"].size(), static_cast<size_t>(StepProfile::kPhases));
  EXPECT_EQ(j["phases"][StepProfile::kQkv]["phase"], "qkv matmul");
  EXPECT_EQ(j["phases"][StepProfile::kQkv]["weight_bytes_per_step"], 1500);
  EXPECT_TRUE(j["phases"][StepProfile::kQkv].contains("gb_per_s"));
  EXPECT_TRUE(j["phases"][StepProfile::kQkv].contains("gop_per_s"));
  EXPECT_FALSE(j["phases"][StepProfile::kAttention].contains("gb_per_s"));
  EXPECT_EQ(j["kind"], "decode");

  StepProfile pre(/*prefill=*/true);
  EXPECT_NE(pre.format(0).find("no prefill step ran"), std::string::npos);
  pre.begin_step(512);
  pre.lap(StepProfile::kGateUp, 100, 1 << 20);
  const std::string pt = pre.format(0, 1e12);
  EXPECT_NE(pt.find("prefill profile: 1 steps of 512.0 tokens"), std::string::npos) << pt;
  EXPECT_NE(pt.find("GOP/s"), std::string::npos) << pt;
  EXPECT_NE(pt.find("of peak"), std::string::npos) << pt;
  EXPECT_EQ(pre.to_json()["kind"], "prefill");
}

int64_t bytes_of(const kernels::MatrixView& w) {
  return w.rows * static_cast<int64_t>(w.row_bytes);
}

std::vector<int32_t> generate(Engine& engine, const GenerateRequest& req) {
  EXPECT_TRUE(engine.add_request(req).ok());
  std::vector<int32_t> out;
  std::vector<RequestDelta> deltas;
  while (engine.has_unfinished()) {
    EXPECT_TRUE(engine.step(&deltas).ok());
    for (const auto& d : deltas) out.insert(out.end(), d.token_ids.begin(), d.token_ids.end());
  }
  return out;
}

TEST(StepProfile, EngineCountsDecodeStepsAndWeightBytes) {
  auto m = load_or_die(shared_path("models/stories260K.gguf"));
  ASSERT_TRUE(m);
  constexpr int32_t kNew = 9;
  const GenerateRequest req = testing::seeded_request(3, 12, kNew);
  EngineConfig off_cfg = testing::small_f32_engine_config(2);
  auto off = Engine::create(*m, nullptr, off_cfg);
  ASSERT_TRUE(off.ok());
  EXPECT_EQ((*off)->step_profile(), nullptr);
  const std::vector<int32_t> want = generate(**off, req);
  ASSERT_EQ(want.size(), static_cast<size_t>(kNew));

  EngineConfig on_cfg = off_cfg;
  on_cfg.profile_steps = true;
  auto on = Engine::create(*m, nullptr, on_cfg);
  ASSERT_TRUE(on.ok());
  const StepProfile* p = (*on)->step_profile();
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->steps(), 0);  // the KV calibration at start is not a decode step
  EXPECT_EQ(generate(**on, req), want);
  // The prompt's step computes 12 tokens (not profiled) and gives the first new token; each
  // later token is one decode step.
  EXPECT_EQ(p->steps(), kNew - 1);
  EXPECT_EQ(p->tokens(), kNew - 1);
  int64_t qkv = 0, wo = 0, gate_up = 0, down = 0, qkv_elems = 0;
  for (const LayerWeights& w : m->weights.layers) {
    qkv += bytes_of(w.wq) + bytes_of(w.wk) + bytes_of(w.wv);
    qkv_elems += (w.wq.rows + w.wk.rows + w.wv.rows) * w.wq.cols;
    wo += bytes_of(w.wo);
    gate_up += bytes_of(w.w_gate) + bytes_of(w.w_up);
    down += bytes_of(w.w_down);
  }
  EXPECT_EQ(p->macs(StepProfile::kQkv), qkv_elems * p->steps());
  EXPECT_EQ(p->bytes(StepProfile::kQkv), qkv * p->steps());
  EXPECT_EQ(p->bytes(StepProfile::kAttnOut), wo * p->steps());
  EXPECT_EQ(p->bytes(StepProfile::kGateUp), gate_up * p->steps());
  EXPECT_EQ(p->bytes(StepProfile::kDown), down * p->steps());
  EXPECT_EQ(p->bytes(StepProfile::kOutput), bytes_of(m->weights.output) * p->steps());
  EXPECT_GT(p->ns(StepProfile::kAttention), 0);
  EXPECT_GT(p->ns(StepProfile::kQkv), 0);
  EXPECT_GT(p->total_ns(), 0);
  // The prompt's step: 12 rows through every layer matmul, logits of the last row only.
  const StepProfile* pre = (*on)->prefill_profile();
  ASSERT_NE(pre, nullptr);
  EXPECT_TRUE(pre->prefill());
  EXPECT_EQ(pre->steps(), 1);
  EXPECT_EQ(pre->tokens(), 12);
  EXPECT_EQ(pre->macs(StepProfile::kQkv), qkv_elems * 12);
  EXPECT_EQ(pre->macs(StepProfile::kOutput), m->weights.output.rows * m->weights.output.cols);
  EXPECT_EQ(pre->bytes(StepProfile::kDown), down);
  EXPECT_GT(pre->ns(StepProfile::kAttention), 0);
  EXPECT_EQ((*off)->prefill_profile(), nullptr);
}

// `hinge run --profile`: the table on stderr; with --json a "profile" object.
TEST(StepProfile, RunPrintsTheTable) {
  const std::string cmd = testing::hinge_binary() + " run -m " +
                          shared_path("models/stories260K.gguf") + " -p Once -n 6 --temp 0";
  auto table = testing::run_command(cmd + " --profile 2>&1 >/dev/null");
  ASSERT_EQ(table.exit_code, 0) << table.out;
  EXPECT_NE(table.out.find("decode profile: 5 steps"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("attention"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("prefill profile: 1 steps of 2.0 tokens"), std::string::npos)
      << table.out;
  auto json = testing::run_command(cmd + " --profile --json 2>/dev/null");
  ASSERT_EQ(json.exit_code, 0);
  const auto j = nlohmann::json::parse(json.out);
  EXPECT_EQ(j["profile"]["steps"], 5);
  EXPECT_EQ(j["profile"]["phases"].size(), static_cast<size_t>(StepProfile::kPhases));
  EXPECT_EQ(j["prefill_profile"]["kind"], "prefill");
  EXPECT_EQ(j["prefill_profile"]["tokens"], 2);
  auto plain = testing::run_command(cmd + " --json 2>/dev/null");
  EXPECT_FALSE(nlohmann::json::parse(plain.out).contains("profile"));
  EXPECT_FALSE(nlohmann::json::parse(plain.out).contains("prefill_profile"));
  EXPECT_EQ(nlohmann::json::parse(plain.out)["token_ids"], j["token_ids"]);
}

// `hinge bench --profile`: batched decode steps get GOP/s beside GB/s; --json has both profiles.
TEST(StepProfile, BenchPrintsTheTables) {
  const std::string cmd = testing::hinge_binary() + " bench -m " +
                          shared_path("models/stories260K.gguf") +
                          " --requests 4 --prompt-tokens 8 --gen-tokens 5 --profile";
  auto table = testing::run_command(cmd + " 2>/dev/null");
  ASSERT_EQ(table.exit_code, 0) << table.out;
  EXPECT_NE(table.out.find("prefill profile:"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("decode profile:"), std::string::npos) << table.out;
  const size_t decode = table.out.find("decode profile:");
  ASSERT_NE(decode, std::string::npos);
  EXPECT_NE(table.out.find("GOP/s", decode), std::string::npos) << table.out;  // 4 a step
  auto json = testing::run_command(cmd + " --json 2>/dev/null");
  ASSERT_EQ(json.exit_code, 0) << json.out;
  const auto j = nlohmann::json::parse(json.out);
  EXPECT_GT(j["profile"]["steps"].get<int64_t>(), 0);
  EXPECT_GT(j["profile"]["tokens"].get<int64_t>(), j["profile"]["steps"].get<int64_t>());
  EXPECT_EQ(j["prefill_profile"]["kind"], "prefill");
}

}  // namespace
}  // namespace hinge
