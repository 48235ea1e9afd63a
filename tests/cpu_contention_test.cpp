// CPU contention: /proc/stat and cpu.max parsing, the thread advisor's decisions, the pool's
// active set (every job runs on exactly the threads it was published for, across changes), and
// the engine-side adapter driven by readings written under a root.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "common/thread_pool.h"
#include "pressure/thread_adapter.h"
#include "pressure/cpu_contention.h"
#include "test_util.h"

namespace hinge {
namespace {

using pressure::CpuSample;
using pressure::CpuTicks;
using pressure::ThreadAdvisor;

void write(const std::string& path, const std::string& text) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream(path, std::ios::binary) << text;
}

// A /proc/stat with two cores; core c has busy ticks busy[c] (all in "user") and idle[c].
std::string stat_text(const std::vector<int64_t>& busy, const std::vector<int64_t>& idle) {
  int64_t tb = 0, ti = 0;
  for (size_t c = 0; c < busy.size(); ++c) tb += busy[c], ti += idle[c];
  std::string s = "cpu  " + std::to_string(tb) + " 0 0 " + std::to_string(ti) + " 0 0 0 0 0 0\n";
  for (size_t c = 0; c < busy.size(); ++c)
    s += "cpu" + std::to_string(c) + " " + std::to_string(busy[c]) + " 0 0 " +
         std::to_string(idle[c]) + " 0 0 0 0 0 0\n";
  return s + "intr 12345 0 0 1\nctxt 99\n";
}

TEST(CpuContention, ParsesProcStatForTheAllowedCores) {
  const std::string text =
      "cpu  100 1 20 900 5 2 3 4 0 0\n"
      "cpu0 10 1 2 300 1 1 1 1 0 0\n"
      "cpu1 20 0 3 300 2 0 1 2 0 0\n"
      "cpu2 70 0 15 300 2 1 1 1 0 0\n"
      "intr 1 2 3\n";
  const std::vector<int> both{0, 2};
  const auto t = pressure::parse_proc_stat(text, both);
  ASSERT_TRUE(t);
  EXPECT_EQ(t->cores, 2);
  EXPECT_EQ(t->busy, (10 + 1 + 2 + 1 + 1 + 1) + (70 + 15 + 1 + 1 + 1));  // steal counts as busy
  EXPECT_EQ(t->total, t->busy + 301 + 302);
  // Old kernels' shorter lines still parse; garbage does not.
  const std::vector<int> zero{0};
  EXPECT_TRUE(pressure::parse_proc_stat("cpu  1 2 3 4\ncpu0 1 2 3 4\n", zero));
  EXPECT_FALSE(pressure::parse_proc_stat("cpu0 1 2\n", zero));
  EXPECT_FALSE(pressure::parse_proc_stat("cpu0 1 x 3 4 5\n", zero));
  EXPECT_FALSE(pressure::parse_proc_stat("cpux 1 2 3 4\n", zero));
  EXPECT_FALSE(pressure::parse_proc_stat("", zero));
  const std::vector<int> absent{7};
  EXPECT_FALSE(pressure::parse_proc_stat(text, absent));
}

TEST(CpuContention, ParsesCpuMax) {
  const auto none = pressure::parse_cpu_max("max 100000\n");
  ASSERT_TRUE(none);
  EXPECT_FALSE(*none);
  const auto q = pressure::parse_cpu_max("150000 100000\n");
  ASSERT_TRUE(q && *q);
  EXPECT_DOUBLE_EQ(**q, 1.5);
  EXPECT_FALSE(pressure::parse_cpu_max("150000"));
  EXPECT_FALSE(pressure::parse_cpu_max("-5 100000"));
  EXPECT_FALSE(pressure::parse_cpu_max("5 0"));
  EXPECT_FALSE(pressure::parse_cpu_max("lots 100000"));
}

TEST(CpuContention, ParsesCgroupV1CfsQuota) {
  const auto none = pressure::parse_cfs_quota("-1\n", "100000\n");
  ASSERT_TRUE(none);
  EXPECT_FALSE(*none);
  const auto q = pressure::parse_cfs_quota("50000\n", "100000\n");
  ASSERT_TRUE(q && *q);
  EXPECT_DOUBLE_EQ(**q, 0.5);
  EXPECT_FALSE(pressure::parse_cfs_quota("0", "100000"));
  EXPECT_FALSE(pressure::parse_cfs_quota("5", "0"));
  EXPECT_FALSE(pressure::parse_cfs_quota("x", "100000"));
  EXPECT_FALSE(pressure::parse_cfs_quota("", "100000"));
  const char* self = "9:name=systemd:/\n4:memory:/a\n2:cpu,cpuacct:/hinge-test\n0::/\n";
  EXPECT_EQ(pressure::parse_cgroup_v1_path(self, "cpu"), "/hinge-test");
  EXPECT_EQ(pressure::parse_cgroup_v1_path(self, "cpuacct"), "/hinge-test");
  EXPECT_FALSE(pressure::parse_cgroup_v1_path(self, "cpuset"));
  EXPECT_FALSE(pressure::parse_cgroup_v1_path("2:cpu:/../x\n", "cpu"));
  // A v1 hierarchy under a root: the quota is found through /proc/self/cgroup.
  const std::string root = hinge::testing::temp_dir() + "/cfs-root";
  std::filesystem::create_directories(root + "/proc/self");
  std::filesystem::create_directories(root + "/sys/fs/cgroup/cpu,cpuacct/hinge-test");
  auto put = [](const std::string& path, const char* text) {
    std::FILE* f = std::fopen(path.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs(text, f);
    std::fclose(f);
  };
  put(root + "/proc/self/cgroup", self);
  put(root + "/sys/fs/cgroup/cpu,cpuacct/hinge-test/cpu.cfs_quota_us", "100000\n");
  put(root + "/sys/fs/cgroup/cpu,cpuacct/hinge-test/cpu.cfs_period_us", "100000\n");
  const auto got = pressure::cgroup_cpu_quota(root);
  ASSERT_TRUE(got);
  EXPECT_DOUBLE_EQ(*got, 1.0);
}

CpuSample sample_at(double t, int64_t busy_ticks, double self_cpu) {
  CpuSample s;
  s.wall_seconds = t;
  s.ticks.busy = busy_ticks;
  s.ticks.total = static_cast<int64_t>(t * 200);
  s.ticks.cores = 2;
  s.self_cpu_seconds = self_cpu;
  return s;
}

TEST(CpuContention, AdvisorFollowsTheFreeCores) {
  ThreadAdvisor a({.max_threads = 2, .cores_available = 2, .ticks_per_second = 100});
  EXPECT_EQ(a.update(sample_at(0, 0, 0)).threads, 2);  // baseline
  // We use 2 cores, nobody else: stay at 2.
  auto adv = a.update(sample_at(1, 200, 2.0));
  EXPECT_EQ(adv.threads, 2);
  EXPECT_NEAR(adv.others_cores, 0, 1e-9);
  EXPECT_FALSE(adv.contended);
  // Another program takes a core (we get 1 of the 2): drop to 1 at once.
  adv = a.update(sample_at(2, 400, 3.0));
  EXPECT_NEAR(adv.others_cores, 1.0, 1e-9);
  EXPECT_TRUE(adv.contended);
  EXPECT_TRUE(adv.changed);
  EXPECT_EQ(adv.threads, 1);
  // It keeps running: still 1.
  adv = a.update(sample_at(3, 600, 4.0));
  EXPECT_EQ(adv.threads, 1);
  EXPECT_FALSE(adv.changed);
  // It stops: one free reading is not enough to raise, two are.
  adv = a.update(sample_at(4, 700, 5.0));
  EXPECT_NEAR(adv.others_cores, 0, 1e-9);
  EXPECT_EQ(adv.threads, 1);
  adv = a.update(sample_at(5, 800, 6.0));
  EXPECT_EQ(adv.threads, 2);
  EXPECT_TRUE(adv.changed);
  // A little background load (0.2 cores) keeps both threads.
  adv = a.update(sample_at(6, 1020, 8.0));
  EXPECT_NEAR(adv.others_cores, 0.2, 1e-9);
  EXPECT_EQ(adv.threads, 2);
  // A clock that went backwards or counters that shrank are ignored, not trusted.
  adv = a.update(sample_at(5.5, 10, 8.0));
  EXPECT_EQ(adv.threads, 2);
  EXPECT_FALSE(adv.changed);
}

TEST(CpuContention, AdvisorNeverGoesBelowOneOrAboveTheAsk) {
  ThreadAdvisor a({.max_threads = 3, .cores_available = 2, .ticks_per_second = 100});
  a.update(sample_at(0, 0, 0));
  auto adv = a.update(sample_at(1, 200, 0));  // others take both cores
  EXPECT_EQ(adv.threads, 1);
  for (int i = 0; i < 4; ++i) adv = a.update(sample_at(2 + i, 200, 0));  // all idle
  EXPECT_EQ(adv.threads, 2);  // the cores there are, not the 3 asked for
}

TEST(ThreadPool, ActiveSetChangesBetweenRuns) {
  ThreadPool pool(4);
  EXPECT_EQ(pool.capacity(), 4);
  std::vector<std::atomic<int>> calls(4);
  const int pattern[] = {4, 1, 2, 4, 3, 1, 1, 4, 2, 2, 3};
  int64_t expected[4] = {};
  for (int round = 0; round < 300; ++round) {
    const int n = pattern[round % (sizeof pattern / sizeof pattern[0])];
    pool.set_active_threads(n);
    pool.set_spin_limit(round % 2 ? ThreadPool::kContendedSpinLimit : 1);
    ASSERT_EQ(pool.size(), n);
    std::atomic<int> ran{0};
    pool.run([&](int tid, int nt) {
      EXPECT_EQ(nt, n);
      EXPECT_LT(tid, nt);
      calls[static_cast<size_t>(tid)]++;
      ran++;
    });
    ASSERT_EQ(ran.load(), n) << "round " << round;
    for (int t = 0; t < n; ++t) ++expected[t];
    std::vector<std::atomic<int>> hits(97);
    pool.parallel_for(97, 1, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)]++;
    });
    for (auto& h : hits) ASSERT_EQ(h.load(), 1);
  }
  for (int t = 0; t < 4; ++t) EXPECT_EQ(calls[static_cast<size_t>(t)].load(), expected[t]);
  pool.set_active_threads(0);  // clamped
  EXPECT_EQ(pool.size(), 1);
  pool.set_active_threads(99);
  EXPECT_EQ(pool.size(), 4);
}

TEST(ThreadAdapter, ShrinksThePoolWhileOthersTakeCoresAndGrowsBack) {
  const std::string root = testing::temp_dir();
  const std::vector<int> cpus = pressure::allowed_cpus();
  const size_t n = static_cast<size_t>(cpus.back()) + 1;
  // Ticks per second as the kernel reports them (USER_HZ).
  const int64_t hz = 100;
  ThreadPool pool(2);
  ThreadAdapter adapter(true, 2, root);
  ASSERT_TRUE(adapter.enabled());
  auto at = [&](double t, double others_per_core, double self) {
    // Each allowed core busy for `others_per_core` of the time since 0 (plus our own share).
    std::vector<int64_t> busy(n, 0), idle(n, 0);
    const double self_per_core = self / static_cast<double>(cpus.size());
    for (int c : cpus) {
      busy[static_cast<size_t>(c)] =
          static_cast<int64_t>((others_per_core * t + self_per_core) * static_cast<double>(hz));
      idle[static_cast<size_t>(c)] = static_cast<int64_t>(t * hz) - busy[static_cast<size_t>(c)];
    }
    write(root + "/proc/stat", stat_text(busy, idle));
    adapter.sample(pool, t, self);
  };
  if (cpus.size() < 2 || ::sysconf(_SC_CLK_TCK) != hz) GTEST_SKIP() << "needs 2 cores, USER_HZ 100";
  at(0, 0, 0);
  EXPECT_EQ(pool.size(), 2);
  // Others use ~0.9 of each core from here: 1.8 cores, so one thread.
  at(1, 0.9, 0.2);
  EXPECT_EQ(pool.size(), 1);
  EXPECT_EQ(pool.spin_limit(), ThreadPool::kContendedSpinLimit);
  EXPECT_NEAR(adapter.stats(pool).cpu_others_cores, 1.8, 0.05);
  EXPECT_EQ(adapter.stats(pool).thread_changes, 1);
  // Then nothing else runs (busy ticks stop growing beyond ours): back to 2 after two readings.
  at(2, 0.45, 1.2);
  at(3, 0.3, 2.2);
  EXPECT_EQ(pool.size(), 2);
  EXPECT_EQ(pool.spin_limit(), ThreadPool::kDefaultSpinLimit);
  EXPECT_EQ(adapter.stats(pool).thread_changes, 2);
  // A missing file changes nothing.
  std::filesystem::remove(root + "/proc/stat");
  adapter.sample(pool, 4, 3.2);
  EXPECT_EQ(pool.size(), 2);
  // Disabled (or a single thread): never touches the pool.
  ThreadAdapter off(false, 2, root);
  EXPECT_FALSE(off.enabled());
  EXPECT_FALSE(ThreadAdapter(true, 1, root).enabled());
}

}  // namespace
}  // namespace hinge
