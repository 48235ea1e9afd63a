// The weight-layout cache (kernels/layout_cache.h): entries keyed by type and candidate set,
// files of another CPU or build or damaged ones ignored, choose_weight_layout reading it and
// recalibration rewriting it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/cache_dir.h"
#include "kernels/cpu_features.h"
#include "kernels/kernel_choice.h"
#include "kernels/layout_cache.h"
#include "test_util.h"

namespace hinge::kernels {
namespace {

const std::vector<WeightLayout> kTwo = {WeightLayout::kRowGroups, WeightLayout::kGguf};

LayoutChoice made_up(GgmlType type, WeightLayout layout) {
  LayoutChoice c;
  c.type = type;
  c.layout = layout;
  c.timings = {{WeightLayout::kRowGroups, 10.5, 100.25}, {WeightLayout::kGguf, 12.0, 90.0}};
  return c;
}

void write(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::trunc);
  out << text;
}

TEST(KernelsLayoutCache, RoundTripsAndKeysOnTypeAndCandidates) {
  testing::ScopedCacheDir env("layout-cache");
  const std::string path = layout_cache_path();
  ASSERT_FALSE(path.empty());
  EXPECT_EQ(path.rfind(env.dir() + "/layouts-", 0), 0u) << path;
  EXPECT_FALSE(load_cached_layout(GgmlType::Q8_0, kTwo));  // no file yet
  ASSERT_TRUE(save_cached_layout(made_up(GgmlType::Q8_0, WeightLayout::kGguf), kTwo).ok());
  auto c = load_cached_layout(GgmlType::Q8_0, kTwo);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->layout, WeightLayout::kGguf);
  EXPECT_EQ(c->reason, "calibrated on this CPU, cached");
  ASSERT_EQ(c->timings.size(), 2u);
  EXPECT_EQ(c->timings[0].layout, WeightLayout::kRowGroups);
  EXPECT_DOUBLE_EQ(c->timings[0].decode_us, 10.5);
  EXPECT_DOUBLE_EQ(c->timings[0].prefill_us, 100.25);
  // Another candidate set (a HINGE_DISABLE_* switch) or another type: not this entry.
  EXPECT_FALSE(load_cached_layout(GgmlType::Q8_0, {WeightLayout::kGguf}));
  EXPECT_FALSE(load_cached_layout(GgmlType::Q4_0, kTwo));
  // A second type is added beside the first; saving the first again replaces it.
  ASSERT_TRUE(save_cached_layout(made_up(GgmlType::Q4_0, WeightLayout::kRowGroups), kTwo).ok());
  ASSERT_TRUE(save_cached_layout(made_up(GgmlType::Q8_0, WeightLayout::kRowGroups), kTwo).ok());
  ASSERT_TRUE(load_cached_layout(GgmlType::Q4_0, kTwo));
  EXPECT_EQ(load_cached_layout(GgmlType::Q8_0, kTwo)->layout, WeightLayout::kRowGroups);
  const auto j = nlohmann::json::parse(testing::read_file(path), nullptr, false);
  ASSERT_TRUE(j.is_object());
  EXPECT_EQ(j["choices"].size(), 2u);
  EXPECT_EQ(j["cpu"], cpu_label());
  EXPECT_EQ(j["build"], build_identity());
  EXPECT_FALSE(build_identity().empty());
}

TEST(KernelsLayoutCache, IgnoresForeignDamagedAndSwitchedOffFiles) {
  testing::ScopedCacheDir env("layout-cache-bad");
  const std::string path = layout_cache_path();
  ASSERT_TRUE(save_cached_layout(made_up(GgmlType::Q8_0, WeightLayout::kGguf), kTwo).ok());
  const std::string good = testing::read_file(path);
  auto edited = [&](auto&& edit) {
    nlohmann::json j = nlohmann::json::parse(good);
    edit(j);
    write(path, j.dump());
    return load_cached_layout(GgmlType::Q8_0, kTwo);
  };
  EXPECT_TRUE(edited([](nlohmann::json&) {}));
  EXPECT_FALSE(edited([](nlohmann::json& j) { j["build"] = "another build"; }));
  EXPECT_FALSE(edited([](nlohmann::json& j) { j["cpu"] = "another CPU"; }));
  EXPECT_FALSE(edited([](nlohmann::json& j) { j["version"] = 99; }));
  EXPECT_FALSE(edited([](nlohmann::json& j) { j["choices"][0]["layout"] = "vnni-pairs"; }));
  EXPECT_FALSE(edited([](nlohmann::json& j) { j["choices"][0]["layout"] = 3; }));
  EXPECT_FALSE(edited([](nlohmann::json& j) { j["choices"][0]["timings"][1]["decode_us"] = -1; }));
  EXPECT_FALSE(edited([](nlohmann::json& j) { j["choices"][0]["timings"][0]["layout"] = "x"; }));
  EXPECT_FALSE(edited([](nlohmann::json& j) { j["choices"] = "none"; }));
  write(path, good.substr(0, good.size() / 2));  // cut short
  EXPECT_FALSE(load_cached_layout(GgmlType::Q8_0, kTwo));
  // A damaged file is replaced by the next save.
  ASSERT_TRUE(save_cached_layout(made_up(GgmlType::Q8_0, WeightLayout::kGguf), kTwo).ok());
  EXPECT_TRUE(load_cached_layout(GgmlType::Q8_0, kTwo));
  // HINGE_MACHINE_PROFILE=off: nothing is read or written.
  ::setenv("HINGE_MACHINE_PROFILE", "off", 1);
  EXPECT_FALSE(layout_cache_enabled());
  EXPECT_EQ(layout_cache_path(), "");
  EXPECT_FALSE(load_cached_layout(GgmlType::Q8_0, kTwo));
  std::filesystem::remove(path);
  EXPECT_TRUE(save_cached_layout(made_up(GgmlType::Q8_0, WeightLayout::kGguf), kTwo).ok());
  EXPECT_FALSE(std::filesystem::exists(path));
}

// Where a type is calibrated (two or more layouts run, no AMX), choose_weight_layout takes the
// cached entry over a measurement, writes what it measured, and recalibration rewrites it.
TEST(KernelsLayoutCache, ChooseReadsTheCacheAndRecalibrationRewritesIt) {
  const std::vector<WeightLayout> cands = candidate_layouts(GgmlType::Q8_0);
  if (cands.size() < 2 || cpu_has_amx_int8())
    GTEST_SKIP() << "Q8_0 is not calibrated on this CPU (one layout runs, or AMX decides)";
  testing::ScopedCacheDir env("layout-cache-choose");
  forget_weight_layout_choices();
  // An entry that names the last candidate (whatever a measurement would pick) is taken as is.
  LayoutChoice fake = made_up(GgmlType::Q8_0, cands.back());
  fake.timings.clear();
  ASSERT_TRUE(save_cached_layout(fake, cands).ok());
  LayoutChoice c = choose_weight_layout(GgmlType::Q8_0);
  EXPECT_EQ(c.layout, cands.back());
  EXPECT_EQ(c.reason, "calibrated on this CPU, cached");
  // No entry: measured, and the measurement written for the next process.
  forget_weight_layout_choices();
  std::filesystem::remove(layout_cache_path());
  c = choose_weight_layout(GgmlType::Q8_0);
  EXPECT_EQ(c.reason, "calibrated on this CPU");
  ASSERT_EQ(c.timings.size(), cands.size());
  auto cached = load_cached_layout(GgmlType::Q8_0, cands);
  ASSERT_TRUE(cached);
  EXPECT_EQ(cached->layout, c.layout);
  // Recalibration ignores the entry (set to the last candidate again) and rewrites it.
  ASSERT_TRUE(save_cached_layout(fake, cands).ok());
  const std::vector<LayoutChoice> fresh = recalibrate_weight_layouts();
  ASSERT_EQ(fresh.size(), 7u);  // q8_0, q4_0, q4_K, q5_K, q6_K, f16, bf16
  EXPECT_EQ(fresh[0].type, GgmlType::Q8_0);
  EXPECT_EQ(fresh[0].reason, "calibrated on this CPU");
  EXPECT_EQ(load_cached_layout(GgmlType::Q8_0, cands)->layout, fresh[0].layout);
  EXPECT_EQ(choose_weight_layout(GgmlType::Q8_0).layout, fresh[0].layout);
  forget_weight_layout_choices();  // the next tests choose with their own environment
}

}  // namespace
}  // namespace hinge::kernels
