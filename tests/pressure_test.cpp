// Memory pressure: the kernel's file formats (PSI, cgroup v2, thermal zones) read under a root
// a test writes, the levels and their hysteresis, and what each level does (the policy table).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <fmt/format.h>

#include "pressure/pressure_policy.h"
#include "pressure/pressure_level.h"
#include "pressure/pressure_signals.h"
#include "test_util.h"

namespace hinge::pressure {
namespace {

void write(const std::string& path, const std::string& text) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream(path) << text;
}

std::string psi(double some, double full) {
  return fmt::format("some avg10={:.2f} avg60=0.00 avg300=0.00 total=12\nfull avg10={:.2f} "
                     "avg60=0.00 avg300=0.00 total=3\n", some, full);
}

TEST(PressureSignals, ParsesTheKernelFormatsAndRejectsOthers) {
  auto p = parse_psi(psi(12.5, 1.25));
  ASSERT_TRUE(p);
  EXPECT_DOUBLE_EQ(p->some_avg10, 12.5);
  EXPECT_DOUBLE_EQ(p->full_avg10, 1.25);
  EXPECT_TRUE(parse_psi("some avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"));  // cpu, old kernel
  EXPECT_FALSE(parse_psi(""));
  EXPECT_FALSE(parse_psi("some avg10=abc avg60=0.00\n"));
  EXPECT_FALSE(parse_psi("some avg10=150.00 avg60=0\n"));  // a percentage
  EXPECT_FALSE(parse_psi("garbage\nsome avg10=1.00\n"));
  EXPECT_FALSE(parse_psi("some avg10=nan\n"));

  const auto no_limit = parse_cgroup_limit("max\n");
  ASSERT_TRUE(no_limit);
  EXPECT_FALSE(no_limit->has_value());
  const auto mib = parse_cgroup_limit("1048576\n");
  ASSERT_TRUE(mib && mib->has_value());
  EXPECT_EQ(**mib, 1048576);
  EXPECT_FALSE(parse_cgroup_limit("-5"));
  EXPECT_FALSE(parse_cgroup_limit("12 MiB"));
  EXPECT_FALSE(parse_cgroup_limit(""));

  EXPECT_EQ(parse_cgroup_v2_path("12:memory:/x\n0::/user.slice/a.scope\n"), "/user.slice/a.scope");
  EXPECT_EQ(parse_cgroup_v2_path("0::/\n"), "/");
  EXPECT_FALSE(parse_cgroup_v2_path("4:memory:/x\n"));   // v1 only
  EXPECT_FALSE(parse_cgroup_v2_path("0::/../../etc\n"));  // never out of the tree

  CgroupMemory m;
  EXPECT_TRUE(parse_memory_events("low 0\nhigh 7\nmax 2\noom 1\noom_kill 1\n", &m));
  EXPECT_EQ(m.events_high, 7);
  EXPECT_EQ(m.events_max, 2);
  EXPECT_EQ(m.events_oom, 1);
  EXPECT_FALSE(parse_memory_events("high seven\n", &m));
}

TEST(PressureSignals, ReadsEverythingUnderARoot) {
  const std::string root = testing::temp_dir();
  EXPECT_FALSE(read_pressure_signals(root).any());  // nothing there: no signal, no error
  write(root + "/proc/pressure/memory", psi(3, 0.5));
  write(root + "/proc/pressure/cpu", "some avg10=40.00 avg60=1.00 avg300=0.00 total=5\n");
  write(root + "/proc/self/cgroup", "0::/app.slice\n");
  write(root + "/sys/fs/cgroup/app.slice/memory.current", "900\n");
  write(root + "/sys/fs/cgroup/app.slice/memory.high", "max\n");
  write(root + "/sys/fs/cgroup/app.slice/memory.max", "1000\n");
  write(root + "/sys/fs/cgroup/app.slice/memory.events", "low 0\nhigh 0\nmax 3\noom 0\n");
  write(root + "/sys/class/thermal/thermal_zone0/temp", "71500\n");
  write(root + "/sys/class/thermal/thermal_zone0/trip_point_0_type", "passive\n");
  write(root + "/sys/class/thermal/thermal_zone0/trip_point_0_temp", "70000\n");
  write(root + "/sys/class/thermal/thermal_zone0/trip_point_1_type", "critical\n");
  write(root + "/sys/class/thermal/thermal_zone0/trip_point_1_temp", "95000\n");
  write(root + "/sys/class/thermal/cooling_device0/cur_state", "0\n");  // not a zone
  const PressureSignals s = read_pressure_signals(root);
  ASSERT_TRUE(s.memory_psi && s.cpu_psi && s.cgroup);
  EXPECT_DOUBLE_EQ(s.memory_psi->some_avg10, 3);
  EXPECT_DOUBLE_EQ(s.cpu_psi->some_avg10, 40);
  EXPECT_EQ(s.cgroup->current_bytes, 900);
  EXPECT_EQ(s.cgroup->limit_bytes(), 1000);
  EXPECT_EQ(s.cgroup->events_max, 3);
  ASSERT_EQ(s.thermal.size(), 1u);
  EXPECT_DOUBLE_EQ(s.thermal[0].temp_c, 71.5);
  EXPECT_EQ(s.thermal[0].passive_c, 70.0);
  EXPECT_EQ(s.thermal[0].critical_c, 95.0);
  EXPECT_EQ(cgroup_memory_limit(root), 1000);
}

TEST(PressureLevel, RisesAtOnceFallsAfterTheCooldownBelowTheReleaseLine) {
  PressureThresholds t;
  t.cooldown_s = 5;
  PressureTracker tr(t);
  PressureSignals s;
  s.memory_psi = Psi{1, 0};
  EXPECT_EQ(tr.update(s, 0).level, PressureLevel::kNormal);
  s.memory_psi = Psi{12, 0};
  PressureVerdict v = tr.update(s, 1);
  EXPECT_EQ(v.level, PressureLevel::kElevated);
  EXPECT_NE(v.reasons.find("memory PSI some avg10 12.0%"), std::string::npos) << v.reasons;
  s.memory_psi = Psi{35, 0};
  EXPECT_EQ(tr.update(s, 2).level, PressureLevel::kCritical);
  // Below critical (30) but above its release line (24): stays.
  s.memory_psi = Psi{26, 0};
  EXPECT_EQ(tr.update(s, 3).level, PressureLevel::kCritical);
  EXPECT_EQ(tr.update(s, 30).level, PressureLevel::kCritical);
  // Below the release line: falls only after the cooldown, to what is voted then (elevated).
  s.memory_psi = Psi{15, 0};
  EXPECT_EQ(tr.update(s, 31).level, PressureLevel::kCritical);
  EXPECT_EQ(tr.update(s, 35).level, PressureLevel::kCritical);
  EXPECT_EQ(tr.update(s, 36).level, PressureLevel::kElevated);
  // A spike restarts the count.
  s.memory_psi = Psi{0, 0};
  EXPECT_EQ(tr.update(s, 37).level, PressureLevel::kElevated);
  s.memory_psi = Psi{11, 0};
  EXPECT_EQ(tr.update(s, 40).level, PressureLevel::kElevated);
  s.memory_psi = Psi{0, 0};
  EXPECT_EQ(tr.update(s, 41).level, PressureLevel::kElevated);
  EXPECT_EQ(tr.update(s, 45).level, PressureLevel::kElevated);
  const PressureVerdict back = tr.update(s, 46);
  EXPECT_EQ(back.level, PressureLevel::kNormal);
  EXPECT_TRUE(back.reasons.empty());
}

TEST(PressureLevel, CgroupUsageEventsAndThermalVote) {
  PressureThresholds t;
  t.cooldown_s = 0;
  PressureTracker tr(t);
  PressureSignals s;
  s.cgroup = CgroupMemory{};
  s.cgroup->max_bytes = 1000;
  s.cgroup->current_bytes = 500;
  EXPECT_EQ(tr.update(s, 0).level, PressureLevel::kNormal);
  s.cgroup->current_bytes = 900;
  EXPECT_EQ(tr.update(s, 1).level, PressureLevel::kElevated);
  s.cgroup->current_bytes = 960;
  EXPECT_EQ(tr.update(s, 2).level, PressureLevel::kCritical);
  s.cgroup->current_bytes = 100;
  EXPECT_EQ(tr.update(s, 3).level, PressureLevel::kNormal);
  // memory.events: a grown "high" counter is elevated for that reading, "oom" critical.
  s.cgroup->events_high = 1;
  EXPECT_EQ(tr.update(s, 4).level, PressureLevel::kElevated);
  EXPECT_EQ(tr.update(s, 5).level, PressureLevel::kNormal);
  s.cgroup->events_oom = 1;
  EXPECT_EQ(tr.update(s, 6).level, PressureLevel::kCritical);
  EXPECT_EQ(tr.update(s, 7).level, PressureLevel::kNormal);
  ThermalZone z;
  z.name = "thermal_zone3";
  z.temp_c = 80;
  z.passive_c = 75;
  z.critical_c = 100;
  s.thermal = {z};
  PressureVerdict v = tr.update(s, 8);
  EXPECT_EQ(v.level, PressureLevel::kElevated);
  EXPECT_NE(v.reasons.find("thermal_zone3 at 80.0 C"), std::string::npos) << v.reasons;
  s.thermal[0].temp_c = 96;  // within 5 C of critical
  EXPECT_EQ(tr.update(s, 9).level, PressureLevel::kCritical);

  // Memory and temperature tracked apart (PressureWatch's two trackers): each ignores the
  // other's signals.
  PressureThresholds memory_only = t, thermal_only = t;
  memory_only.thermal_signals = false;
  thermal_only.memory_signals = false;
  PressureTracker mem(memory_only), heat(thermal_only);
  s.cgroup->current_bytes = 900;  // elevated memory, critical temperature
  EXPECT_EQ(mem.update(s, 10).level, PressureLevel::kElevated);
  EXPECT_EQ(heat.update(s, 10).level, PressureLevel::kCritical);
}

}  // namespace
}  // namespace hinge::pressure

namespace hinge {
namespace {

using pressure::PressureLevel;

TEST(PressurePolicy, EachLevelShedsInOrderAndNeverTakesWhatRunningRequestsNeed) {
  const PressurePolicyConfig p;  // kv 0.5, steps 0.5, max_tokens 256
  PressureActions a = pressure_actions(PressureLevel::kNormal, p, 64, 512, 1000, 300, 200);
  EXPECT_EQ(a.kv_block_limit, 1000);
  EXPECT_EQ(a.max_num_seqs, 0);
  EXPECT_EQ(a.max_tokens_cap, 0);
  EXPECT_FALSE(a.pause_admission || a.shrink_cache);

  a = pressure_actions(PressureLevel::kElevated, p, 64, 512, 1000, 100, 50);
  EXPECT_EQ(a.kv_block_limit, 500);  // half, above what requests hold + reserved
  EXPECT_EQ(a.max_num_seqs, 32);
  EXPECT_EQ(a.max_batched_tokens, 256);
  EXPECT_EQ(a.max_tokens_cap, 256);
  EXPECT_TRUE(a.shrink_cache);
  EXPECT_FALSE(a.pause_admission);
  a = pressure_actions(PressureLevel::kElevated, p, 64, 512, 1000, 400, 300);
  EXPECT_EQ(a.kv_block_limit, 700);  // used + reserved wins

  a = pressure_actions(PressureLevel::kCritical, p, 1, 1, 1000, 100, 50);
  EXPECT_EQ(a.kv_block_limit, 150);
  EXPECT_EQ(a.max_num_seqs, 1);  // never 0
  EXPECT_EQ(a.max_batched_tokens, 1);
  EXPECT_TRUE(a.pause_admission);
  a = pressure_actions(PressureLevel::kCritical, p, 64, 512, 1000, 800, 900);
  EXPECT_EQ(a.kv_block_limit, 1000);  // clamped to the arena
}

TEST(PressurePolicy, HeatLowersTheWorkPerStepAndKeepsAdmissionCacheAndMaxTokens) {
  const PressurePolicyConfig p;  // thermal fraction 0.5
  PressureActions a = pressure_actions(PressureLevel::kNormal, p, 64, 512, 1000, 300, 200,
                                       PressureLevel::kElevated);
  EXPECT_EQ(a.max_num_seqs, 32);
  EXPECT_EQ(a.max_batched_tokens, 256);
  EXPECT_EQ(a.kv_block_limit, 1000);
  EXPECT_EQ(a.max_tokens_cap, 0);
  EXPECT_FALSE(a.pause_admission || a.shrink_cache);
  a = pressure_actions(PressureLevel::kNormal, p, 64, 512, 1000, 300, 200,
                       PressureLevel::kCritical);
  EXPECT_EQ(a.max_num_seqs, 16);
  EXPECT_EQ(a.max_batched_tokens, 128);
  EXPECT_FALSE(a.pause_admission || a.shrink_cache);
  // With memory pressure too: the memory level's actions, and the lower step limits.
  a = pressure_actions(PressureLevel::kElevated, p, 64, 512, 1000, 100, 50,
                       PressureLevel::kCritical);
  EXPECT_EQ(a.max_batched_tokens, 128);
  EXPECT_EQ(a.kv_block_limit, 500);
  EXPECT_EQ(a.max_tokens_cap, 256);
  EXPECT_TRUE(a.shrink_cache);
}

}  // namespace
}  // namespace hinge
