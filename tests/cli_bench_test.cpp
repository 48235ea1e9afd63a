// `hinge bench`: runs the built binary on stories260K and checks the JSON report (keys,
// consistency between fields, prefix caching on and off) and the one-line errors of bad flags.
#include <gtest/gtest.h>

#include <filesystem>

#include <fstream>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "test_util.h"

namespace hinge {
namespace {

using testing::hinge_binary;
using testing::run_command;
using testing::shared_path;

std::string bench_cmd(const std::string& flags) {
  return hinge_binary() + " bench -m " + shared_path("models/stories260K.gguf") + " " + flags;
}

// Runs bench with --json; stdout must be exactly one JSON object on one line.
nlohmann::json bench_json(const std::string& flags) {
  auto r = run_command(bench_cmd(flags + " --json 2>/dev/null"));
  EXPECT_EQ(r.exit_code, 0) << flags;
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << r.out;
  auto j = nlohmann::json::parse(r.out, nullptr, /*allow_exceptions=*/false);
  EXPECT_TRUE(j.is_object()) << r.out;
  return j.is_object() ? j : nlohmann::json::object();
}

TEST(CliBench, JsonHasRequiredKeysAndConsistentValues) {
  const auto j = bench_json("--requests 4 --prompt-tokens 20 --gen-tokens 8 -t 1");
  for (const char* key :
       {"requests", "output_tokens_per_s", "prefill_tokens_per_s", "ttft_ms_p50", "ttft_ms_p99",
        "itl_ms_p50", "itl_ms_p99", "prefix_hit_rate", "kv_bytes_peak", "kv_waste_fraction",
        "preemptions", "contiguous_reservation_bytes", "contiguous_waste_fraction", "wall_s",
        "kv_dtype"})
    ASSERT_TRUE(j.contains(key)) << key << " in " << j.dump();
  EXPECT_EQ(j["requests"].get<int>(), 4);
  EXPECT_EQ(j["output_tokens"].get<int>(), 4 * 8);  // ignore_eos: exactly G tokens each
  EXPECT_GT(j["output_tokens_per_s"].get<double>(), 0.0);
  EXPECT_GT(j["prefill_tokens_per_s"].get<double>(), 0.0);
  EXPECT_GE(j["preemptions"].get<int64_t>(), 0);
  const double waste = j["kv_waste_fraction"].get<double>();
  EXPECT_GE(waste, 0.0);
  EXPECT_LT(waste, 1.0);
  EXPECT_GT(j["ttft_ms_p50"].get<double>(), 0.0);
  EXPECT_LE(j["ttft_ms_p50"].get<double>(), j["ttft_ms_p99"].get<double>());
  EXPECT_LE(j["itl_ms_p50"].get<double>(), j["itl_ms_p99"].get<double>());
  // All prompts are computed (no shared prefix, so nothing to hit beyond chance).
  EXPECT_GE(j["prompt_tokens_computed"].get<int64_t>(), 4 * 20);
  // Peak KV is whole blocks of the arena, at least what the 4 sequences needed.
  const int64_t per_token = j["kv_bytes_per_token"].get<int64_t>();
  EXPECT_GT(per_token, 0);
  EXPECT_GE(j["kv_bytes_peak"].get<int64_t>(), 4 * (1 + 20 + 8 - 1) * per_token);
  EXPECT_LE(j["kv_bytes_peak"].get<int64_t>(), j["kv_bytes_total"].get<int64_t>());
  // Contiguous reservation of prompt (BOS + 20) + 8 generated tokens per request.
  EXPECT_EQ(j["contiguous_reservation_bytes"].get<int64_t>(), 4 * (1 + 20 + 8) * per_token);
  EXPECT_GT(j["contiguous_max_len_waste_fraction"].get<double>(),
            j["contiguous_waste_fraction"].get<double>());
}

// A sliding-window model: the report lists its KV groups (tiny-gemma3: 5 local layers of window
// 16 and 1 global, one group each) and what the local groups handed back behind their windows.
TEST(CliBench, ReportsKvGroupsAndWhatWindowsReleased) {
  const std::string model = testing::temp_dir() + "/bench-tiny-gemma3.gguf";
  ASSERT_EQ(run_command(hinge_binary() + " synth --preset tiny-gemma3 -o " + model +
                        " 2>/dev/null").exit_code, 0);
  auto r = run_command(hinge_binary() + " bench -m " + model +
                       " --requests 2 --prompt-tokens 300 --gen-tokens 4 -t 1 --json 2>/dev/null");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << r.out;
  ASSERT_TRUE(j.contains("kv_groups")) << r.out;
  int local_layers = 0, full_layers = 0;
  for (const auto& g : j["kv_groups"]) {
    EXPECT_GT(g["bytes_per_token"].get<int64_t>(), 0);
    (g["window"].get<int>() > 0 ? local_layers : full_layers) += g["layers"].get<int>();
  }
  EXPECT_GT(local_layers, 0);
  EXPECT_GT(full_layers, 0);
  // 301-token prompts against a 16-token window: most of each local group's blocks go back.
  EXPECT_GT(j["kv_window_released_blocks"].get<int64_t>(), 2 * 10);
  EXPECT_EQ(j["kv_window_released_bytes"].get<int64_t>() % j["kv_window_released_blocks"].get<int64_t>(), 0);
}

// --temp / --top-k / --top-p / --min-p sample every request (with its own seed); the work is
// the same: exactly G tokens each (ignore_eos).
TEST(CliBench, SamplingFlagsSampleTheSameWork) {
  for (const char* flags : {"--temp 1", "--temp 0.8 --top-k 40 --top-p 0.9 --min-p 0.05"}) {
    const auto j = bench_json(std::string("--requests 3 --prompt-tokens 8 --gen-tokens 6 -t 1 ") + flags);
    EXPECT_EQ(j.value("output_tokens", 0), 3 * 6) << flags;
  }
}

TEST(CliBench, SharedPrefixIsHitOnlyWithPrefixCache) {
  // A small step budget chunks the first prefill, so later requests are admitted after the
  // shared blocks were computed and cached (requests admitted in the same step cannot hit).
  const std::string flags =
      "--requests 4 --prompt-tokens 20 --gen-tokens 8 --shared-prefix 64 --max-batched-tokens 32 "
      "-t 1";
  const auto on = bench_json(flags);
  const auto off = bench_json(flags + " --no-prefix-cache");
  ASSERT_TRUE(on.contains("prefix_hit_rate") && off.contains("prefix_hit_rate"));
  EXPECT_GT(on["prefix_hit_rate"].get<double>(), 0.0);
  EXPECT_LE(on["prefix_hit_rate"].get<double>(), 1.0);
  EXPECT_EQ(off["prefix_hit_rate"].get<double>(), 0.0);
  EXPECT_LT(on["prompt_tokens_computed"].get<int64_t>(),
            off["prompt_tokens_computed"].get<int64_t>());
  EXPECT_EQ(on["output_tokens"].get<int>(), off["output_tokens"].get<int>());
}

TEST(CliBench, DtypeDashSpellingAndTable) {
  const auto j = bench_json(
      "--requests 2 --prompt-tokens 8 --gen-tokens 4 --kv-dtype-v int8 "
      "--kv-dtype-k fp8-e4m3 -t 1");
  EXPECT_EQ(j.value("kv_dtype", std::string()), "fp8_e4m3/int8");
  auto r = run_command(bench_cmd("--requests 2 --prompt-tokens 8 --gen-tokens 4 -t 1 2>/dev/null"));
  ASSERT_EQ(r.exit_code, 0);
  for (const char* s : {"tok/s", "ms", "TTFT", "prefix hit rate", "KV waste", "preemptions"})
    EXPECT_NE(r.out.find(s), std::string::npos) << s << " in\n" << r.out;
  auto help = run_command(hinge_binary() + " bench --help");
  EXPECT_NE(help.out.find("mean over steps"), std::string::npos) << help.out;
}

TEST(CliBench, BadFlagsGiveOneLineErrorNamingTheFlag) {
  const std::pair<const char*, const char*> cases[] = {
      {"--kv-dtype nope", "--kv-dtype"},
      {"--kv-dtype-k fp9", "--kv-dtype-k"},
      {"--kv-memory 12XB", "--kv-memory"},
      {"--requests 0", "--requests"},
      {"--gen-tokens 0", "--gen-tokens"},
      {"--block-size 0", "--block-size"},
      {"--max-num-seqs -3", "--max-num-seqs"},
      {"--prompt-tokens 0", "--prompt-tokens"},
      {"--ctx-size 32 --prompt-tokens 40", "--prompt-tokens"},
      {"--temp -1", "--temp"},
      {"--top-k -2", "--top-k"},
      {"--top-p 0", "--top-p"},
      {"--min-p 1.5", "--min-p"},
  };
  for (const auto& [flags, flag] : cases) {
    auto r = run_command(bench_cmd(std::string(flags) + " 2>&1 >/dev/null"));
    EXPECT_NE(r.exit_code, 0) << flags;
    EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << r.out;
    EXPECT_EQ(r.out.rfind("hinge: ", 0), 0u) << r.out;
    EXPECT_NE(r.out.find(flag), std::string::npos) << r.out;
  }
}

}  // namespace
}  // namespace hinge

namespace hinge {
namespace {

TEST(CliBench, LayoutsCalibratesAndCachesWithoutAModel) {
  testing::ScopedCacheDir env("bench-layouts");
  auto r = testing::run_command(testing::hinge_binary() + " bench --layouts --json");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << r.out;
  // q8_0, q4_0, q4_K, q5_K, q6_K, f16, bf16
  ASSERT_EQ(j["weight_layouts"].size(), 7u) << r.out;
  EXPECT_EQ(j["weight_layouts"][0]["type"], "q8_0");
  const std::string path = j["layout_cache"].get<std::string>();
  EXPECT_EQ(path.rfind(env.dir() + "/layouts-", 0), 0u) << path;
  // Where a type was timed, the file holds its choice for the next process.
  bool timed = false;
  for (const auto& e : j["weight_layouts"]) timed = timed || !e["timings"].empty();
  EXPECT_EQ(std::filesystem::exists(path), timed);
  auto text = testing::run_command(testing::hinge_binary() + " bench --layouts 2>&1");
  EXPECT_EQ(text.exit_code, 0);
  EXPECT_NE(text.out.find("weight layouts"), std::string::npos) << text.out;
  auto both = testing::run_command(testing::hinge_binary() + " bench --layouts -m x.gguf 2>&1");
  EXPECT_EQ(both.exit_code, 1);
  EXPECT_NE(both.out.find("give one or the other"), std::string::npos) << both.out;
}

TEST(CliBench, MembwMeasuresABandwidthWithoutAModel) {
  auto r = testing::run_command(testing::hinge_binary() +
                                " bench --membw --membw-size 64MiB --membw-reps 2 -t 1 --json");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << r.out;
  EXPECT_GT(j["membw_gb_per_s"].get<double>(), 0.1);  // any real machine streams > 100 MB/s
  EXPECT_GE(j["membw_gb_per_s_best"].get<double>(), j["membw_gb_per_s"].get<double>());
  EXPECT_EQ(j["buffer_bytes"].get<int64_t>(), 64 << 20);
  auto bad = testing::run_command(testing::hinge_binary() + " bench --membw --membw-size 1MiB 2>&1");
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.out.find("at least 64 MiB"), std::string::npos) << bad.out;
  auto none = testing::run_command(testing::hinge_binary() + " bench 2>&1");
  EXPECT_EQ(none.exit_code, 1);
  EXPECT_NE(none.out.find("-m MODEL is required"), std::string::npos) << none.out;
}

}  // namespace
}  // namespace hinge

namespace hinge {
namespace {

// `hinge bench --sweep` on a tiny grid: one cell per (dtype, context, batch), decode measured in
// every cell, the KV bytes a step streams grow with batch x context, the chart is written, and
// a context past the model's is refused with the way out.
TEST(CliBenchSweep, GridCellsBytesAndChart) {
  using testing::hinge_binary;
  using testing::run_command;
  const std::string svg = testing::temp_dir() + "/sweep.svg";
  auto r = run_command(hinge_binary() + " bench -m " + testing::shared_path("models/stories260K.gguf") +
                       " --sweep --sweep-batches 1 4 --sweep-contexts 64 256 --sweep-dtypes f16 int8"
                       " --gen-tokens 6 -t 1 --json --svg " + svg + " 2>/dev/null");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j.size(), 8u);
  for (const auto& c : j) EXPECT_GT(c["decode_tokens_per_s"].get<double>(), 0) << c.dump();
  // f16, batch 4, context 256 streams 4 x (256 + 3) tokens of KV (640 bytes each in f16).
  const auto& big = j[3];
  EXPECT_EQ(big["batch"], 4);
  EXPECT_EQ(big["context"], 256);
  EXPECT_DOUBLE_EQ(big["kv_bytes_per_step"].get<double>(), 4 * 259.0 * 640);
  EXPECT_LT(j[0]["kv_bytes_per_step"].get<double>(), big["kv_bytes_per_step"].get<double>());
  const std::string chart = testing::read_file(svg);
  EXPECT_EQ(chart.rfind("<svg", 0), 0u);
  EXPECT_NE(chart.find("batch 4, int8 KV"), std::string::npos);
  auto e = run_command(hinge_binary() + " bench -m " + testing::shared_path("models/stories260K.gguf") +
                       " --sweep --sweep-contexts 4096 2>&1");
  EXPECT_NE(e.exit_code, 0);
  EXPECT_NE(e.out.find("hinge synth --context N"), std::string::npos) << e.out;

  // The simulator predicts the same grid and sets the measurement beside it.
  const std::string measured = testing::temp_dir() + "/bench-sweep.json";
  {
    std::ofstream f(measured);
    f << r.out;
  }
  const std::string sim_svg = testing::temp_dir() + "/simulate-sweep.svg";
  const std::string sim = hinge_binary() + " simulate --model " +
                          testing::shared_path("models/stories260K.gguf") +
                          " --gpu cpu --bandwidth-gbps 10 --peak-gflops 50 --sweep --sweep-batches 1 4"
                          " --sweep-contexts 64 256 --sweep-dtypes f16 int8 --gen-tokens 6";
  auto p = run_command(sim + " --compare " + measured + " --json --svg " + sim_svg + " 2>/dev/null");
  ASSERT_EQ(p.exit_code, 0) << p.out;
  const auto pj = nlohmann::json::parse(p.out);
  ASSERT_EQ(pj.size(), 8u);
  for (size_t i = 0; i < pj.size(); ++i) {
    EXPECT_EQ(pj[i]["batch"], j[i]["batch"]);
    EXPECT_EQ(pj[i]["context"], j[i]["context"]);
    EXPECT_GT(pj[i]["decode_tokens_per_s"].get<double>(), 0);
    EXPECT_DOUBLE_EQ(pj[i]["measured_decode_tokens_per_s"].get<double>(),
                     j[i]["decode_tokens_per_s"].get<double>());
    EXPECT_NEAR(pj[i]["ratio"].get<double>(),
                pj[i]["decode_tokens_per_s"].get<double>() / j[i]["decode_tokens_per_s"].get<double>(), 1e-9);
  }
  // The simulator's KV bytes per step are the KV the same cells read: batch x (context + the
  // tokens so far), in the model's f16 bytes per token.
  EXPECT_NEAR(pj[3]["kv_bytes_per_step"].get<double>(), big["kv_bytes_per_step"].get<double>(),
              0.02 * big["kv_bytes_per_step"].get<double>());
  const std::string sim_chart = testing::read_file(sim_svg);
  size_t points = 0;
  for (size_t at = sim_chart.find("<circle"); at != std::string::npos; at = sim_chart.find("<circle", at + 1))
    ++points;
  EXPECT_EQ(points, 8u + 1);  // each measured cell and the legend's
  auto table = run_command(sim + " --compare " + measured + " 2>/dev/null");
  ASSERT_EQ(table.exit_code, 0);
  EXPECT_NE(table.out.find("simulated / measured"), std::string::npos) << table.out;
  auto bad = run_command(sim + " --compare " + sim_svg + " 2>&1");
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.out.find("not the output of hinge bench --sweep --json"), std::string::npos) << bad.out;
}

// `hinge simulate --workload chat`: conversations whose turns hit the prefix cache.
TEST(CliSimulate, ChatWorkloadReusesTheConversation) {
  using testing::hinge_binary;
  using testing::run_command;
  const std::string base = hinge_binary() + " simulate --model llama-3.1-8b --gpu h100-80gb --json";
  auto r = run_command(base + " --workload chat --requests 4 --turns 3 --prompt-tokens 50"
                              " --gen-tokens 20 --shared-prefix 100 --think-s 1");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["workload"], "chat");
  EXPECT_EQ(j["requests"], 12);
  EXPECT_EQ(j["output_tokens"], 12 * 20);
  EXPECT_GT(j["prefix_hit_rate"].get<double>(), 0.5);
  EXPECT_GT(j["seconds"].get<double>(), 2.0);  // two thinking pauses per conversation
  EXPECT_EQ(j["abandoned"], 0);
  auto e = run_command(base + " --workload chats 2>&1");
  EXPECT_NE(e.exit_code, 0);
  EXPECT_NE(e.out.find("expected bench, chat, rag or burst"), std::string::npos) << e.out;
}

}  // namespace
}  // namespace hinge
