// roofline/: the measured compute peaks, the machine profile file (round trip, rejection of
// damaged or foreign files, the off switch), the shares printed against it, the model's work
// per token, and the CLI that writes and reads the profile.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <algorithm>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>

#include "common/thread_pool.h"
#include "kernels/cpu_features.h"
#include "model/model_config.h"
#include "model/model_weights.h"
#include "roofline/compute_peak.h"
#include "roofline/machine_profile.h"
#include "roofline/model_work.h"
#include "test_util.h"

namespace hinge::roofline {
namespace {

// The profile's environment for one test (a fresh cache folder, the profile on).
class ProfileEnv : public testing::ScopedCacheDir {
 public:
  ProfileEnv() : ScopedCacheDir("roofline-cache") {}
};

TEST(RooflinePeaks, FamiliesHaveUniqueNamesAndLookUp) {
  std::set<std::string> names;
  for (const auto& info : all_peak_families()) {
    EXPECT_TRUE(names.insert(info.name).second) << info.name;
    ASSERT_NE(peak_family_by_name(info.name), nullptr);
    EXPECT_EQ(peak_family_by_name(info.name)->family, info.family);
    EXPECT_GT(info.macs_per_op, 0);
  }
  EXPECT_EQ(peak_family_by_name("avx1024"), nullptr);
}

TEST(RooflinePeaks, EveryAvailableFamilyMeasuresAPositiveRate) {
  ThreadPool pool(2);
  const auto available = available_peak_families();
  const auto peaks = measure_compute_peaks(pool, 0.002);
  ASSERT_EQ(peaks.size(), available.size());
  for (size_t i = 0; i < peaks.size(); ++i) {
    EXPECT_EQ(peaks[i].family, available[i]);
    EXPECT_EQ(peaks[i].threads, 2);
    // Positive and finite; no floor (a rate under the suite's load is no test of the unit).
    EXPECT_GT(peaks[i].ops_per_s, 0.0);
    EXPECT_TRUE(std::isfinite(peaks[i].ops_per_s));
  }
#if defined(__x86_64__)
  // The ISA list names what CPUID reported; AVX2 FMA is on every x86 server we run on.
  const std::string isa = kernels::cpu_identity().isa;
  if (isa.find("avx2-fma") != std::string::npos) {
    EXPECT_NE(std::find(available.begin(), available.end(), PeakFamily::kAvx2Fma), available.end());
    // AVX2's int8 idiom: the integer peak of CPUs without VNNI (AMD Zen 3), where quantized
    // prefill's share is of it.
    EXPECT_NE(std::find(available.begin(), available.end(), PeakFamily::kAvx2Int8),
              available.end());
    EXPECT_TRUE(peak_family_info(PeakFamily::kAvx2Int8).integer);
  }
#endif
}

TEST(RooflineCpu, IdentityIsStableAndLabelNamesIt) {
  const auto& id = kernels::cpu_identity();
  EXPECT_FALSE(id.brand.empty());
  const std::string label = kernels::cpu_label();
  EXPECT_NE(label.find(id.brand), std::string::npos) << label;
  EXPECT_NE(label.find("family " + std::to_string(id.family)), std::string::npos) << label;
  EXPECT_EQ(label, kernels::cpu_label());
}

MachineProfile sample_profile(int32_t threads) {
  MachineProfile p;
  p.cpu = kernels::cpu_label();
  p.threads = threads;
  p.membw_bytes_per_s = 20e9;
  p.peaks = {{PeakFamily::kAvx512Vnni, 1.5e12, threads},
             {PeakFamily::kAmxInt8, 10e12, threads},
             {PeakFamily::kAvx512Fma, 400e9, threads}};
  p.measured_unix = 1765000000;
  return p;
}

TEST(RooflineProfile, SavesAndLoadsPerCpuAndThreads) {
  ProfileEnv env;
  EXPECT_FALSE(load_machine_profile(3).has_value());
  ASSERT_TRUE(save_machine_profile(sample_profile(3)).ok());
  const auto p = load_machine_profile(3);
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->cpu, kernels::cpu_label());
  EXPECT_DOUBLE_EQ(p->membw_bytes_per_s, 20e9);
  ASSERT_EQ(p->peaks.size(), 3u);
  // In all_peak_families() order, whatever the order saved.
  EXPECT_EQ(p->peaks[0].family, PeakFamily::kAmxInt8);
  EXPECT_DOUBLE_EQ(p->peaks[0].ops_per_s, 10e12);
  EXPECT_EQ(p->peaks[1].family, PeakFamily::kAvx512Vnni);
  EXPECT_EQ(p->measured_unix, 1765000000);
  EXPECT_FALSE(load_machine_profile(4).has_value());  // another thread count: measured apart
  EXPECT_EQ(machine_profile_path(3).rfind(env.dir(), 0), 0u);
}

TEST(RooflineProfile, RejectsDamagedAndForeignFiles) {
  ProfileEnv env;
  ASSERT_TRUE(save_machine_profile(sample_profile(2)).ok());
  const std::string path = machine_profile_path(2);
  {
    std::ofstream(path, std::ios::trunc) << "{\"cpu\": ";  // cut short
  }
  EXPECT_FALSE(load_machine_profile(2).has_value());
  {
    nlohmann::json j = {{"cpu", "Some Other CPU"}, {"threads", 2}, {"membw_gb_per_s", 10.0}};
    std::ofstream(path, std::ios::trunc) << j.dump();
  }
  EXPECT_FALSE(load_machine_profile(2).has_value());  // copied from another machine
  {
    nlohmann::json j = {{"cpu", kernels::cpu_label()}, {"threads", "two"}};
    std::ofstream(path, std::ios::trunc) << j.dump();
  }
  EXPECT_FALSE(load_machine_profile(2).has_value());
  for (double bad : {-1.0, 0.0, 1e12}) {  // GOP/s: negative, zero, absurd
    nlohmann::json j = {{"version", 2},
                        {"cpu", kernels::cpu_label()},
                        {"threads", 2},
                        {"membw_gb_per_s", 20.0},
                        {"peaks", {{"avx2-fma", bad}}}};
    std::ofstream(path, std::ios::trunc) << j.dump();
    EXPECT_FALSE(load_machine_profile(2).has_value()) << bad;
  }
  // The same file with a sane rate loads; without a version (before the avx2-int8 loop was
  // fixed) or with version 1 it is measured again.
  for (int version : {2, 1, 0}) {
    nlohmann::json j = {{"cpu", kernels::cpu_label()},
                        {"threads", 2},
                        {"membw_gb_per_s", 20.0},
                        {"peaks", {{"avx2-int8", 300.0}}}};
    if (version > 0) j["version"] = version;
    std::ofstream(path, std::ios::trunc) << j.dump();
    EXPECT_EQ(load_machine_profile(2).has_value(), version == 2) << version;
  }
}

TEST(RooflineProfile, OffSwitchReadsAndWritesNothing) {
  ProfileEnv env;
  ASSERT_TRUE(save_machine_profile(sample_profile(2)).ok());
  ::setenv("HINGE_MACHINE_PROFILE", "off", 1);
  EXPECT_FALSE(machine_profile_enabled());
  EXPECT_FALSE(load_machine_profile(2).has_value());
  std::filesystem::remove_all(env.dir());
  EXPECT_TRUE(save_machine_profile(sample_profile(2)).ok());
  EXPECT_FALSE(std::filesystem::exists(env.dir()));
}

TEST(RooflineShares, NameTheLimitAndTheBestUnitOfTheKind) {
  const MachineProfile p = sample_profile(2);
  EXPECT_EQ(bandwidth_share(p, 10e9), "50% of 20.0 GB/s");
  EXPECT_EQ(peak_share(p, 1e12, /*integer=*/true), "10.0% of 10.00 TOP/s amx-int8");
  EXPECT_EQ(peak_share(p, 100e9, /*integer=*/false), "25.0% of 400 GFLOP/s avx512-fma");
  MachineProfile empty;
  EXPECT_EQ(bandwidth_share(empty, 1e9), "");
  EXPECT_EQ(peak_share(empty, 1e9, true), "");
  EXPECT_EQ(p.best_peak(true)->family, PeakFamily::kAmxInt8);
  EXPECT_EQ(p.best_peak(false)->family, PeakFamily::kAvx512Fma);
  // A family the CPU has but the kernels may not use now (HINGE_DISABLE_AMX) is not the limit.
  if (kernels::cpu_identity().isa.find("amx-int8") != std::string::npos) {
    kernels::set_amx_allowed_for_test(false);
    EXPECT_EQ(p.best_peak(true)->family, PeakFamily::kAvx512Vnni);
    EXPECT_EQ(peak_share(p, 150e9, true), "10.0% of 1.50 TOP/s avx512-vnni");
    kernels::set_amx_allowed_for_test(true);
  }
}

TEST(RooflineWork, PrefillFlopsAreLayerMatricesPlusCausalAttention) {
  ModelConfig c;
  c.n_layers = 2;
  c.n_heads = 4;
  c.head_dim = 8;
  c.dim = 32;
  ModelWeights w;
  w.layers.resize(2);
  auto m = [](int64_t rows, int64_t cols, GgmlType t) {
    kernels::MatrixView v;
    v.type = t;
    v.rows = rows;
    v.cols = cols;
    return v;
  };
  for (LayerWeights& l : w.layers) {
    l.wq = m(32, 32, GgmlType::Q8_0);
    l.wk = m(16, 32, GgmlType::Q8_0);
    l.wv = m(16, 32, GgmlType::Q8_0);
    l.wo = m(32, 32, GgmlType::Q8_0);
    l.w_gate = m(64, 32, GgmlType::Q8_0);
    l.w_up = m(64, 32, GgmlType::Q8_0);
    l.w_down = m(32, 64, GgmlType::Q8_0);
  }
  const double layer_macs = 32 * 32 + 16 * 32 + 16 * 32 + 32 * 32 + 3 * 64 * 32;
  // 9 prompt tokens: mean context 5; QK and PV each n_heads * head_dim * ctx per layer.
  const double attn_macs = 2.0 * 4 * 8 * 5;
  EXPECT_DOUBLE_EQ(prefill_flops_per_token(c, w, 9), 2.0 * 2 * (layer_macs + attn_macs));
  EXPECT_TRUE(weights_run_on_integer_units(w));
  for (LayerWeights& l : w.layers) l.wq.type = GgmlType::BF16;
  EXPECT_FALSE(weights_run_on_integer_units(w));
}

TEST(RooflineCli, BenchWritesTheProfileAndRunPrintsShares) {
  ProfileEnv env;
  const std::string envs =
      "env HINGE_MACHINE_PROFILE=on HINGE_CACHE_DIR=" + env.dir() + " ";
  auto m = testing::run_command(envs + testing::hinge_binary() +
                                " bench --membw --compute --membw-size 64MiB --membw-reps 1 -t 1 "
                                "--json 2>/dev/null");
  ASSERT_EQ(m.exit_code, 0) << m.out;
  const auto j = nlohmann::json::parse(m.out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << m.out;
  EXPECT_EQ(j["cpu"].get<std::string>(), kernels::cpu_label());
  EXPECT_EQ(j["peaks_gops"].size(), available_peak_families().size());
  EXPECT_GT(j["membw_gb_per_s"].get<double>(), 0.1);
  const auto saved = load_machine_profile(1);
  ASSERT_TRUE(saved.has_value());
  EXPECT_NEAR(saved->membw_bytes_per_s / 1e9, j["membw_gb_per_s"].get<double>(), 1e-6);

  auto r = testing::run_command(envs + testing::hinge_binary() + " run -m " +
                                testing::shared_path("models/stories260K.gguf") +
                                " --random-prompt 32 -n 8 --ignore-eos --temp 0 -t 1 --json 2>&1");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const size_t brace = r.out.find('{');
  ASSERT_NE(brace, std::string::npos) << r.out;
  const auto rj = nlohmann::json::parse(r.out.substr(brace, r.out.find('\n', brace) - brace),
                                        nullptr, false);
  ASSERT_TRUE(rj.is_object()) << r.out;
  EXPECT_GT(rj["decode_membw_share"].get<double>(), 0.0);
  EXPECT_GT(rj["prefill_gflop_per_s"].get<double>(), 0.0);
  if (!available_peak_families().empty()) {
    EXPECT_GT(rj["prefill_peak_share"].get<double>(), 0.0);
  }
  EXPECT_NE(r.out.find("hinge: on " + kernels::cpu_label() + ": decode"), std::string::npos)
      << r.out;
}

}  // namespace
}  // namespace hinge::roofline
