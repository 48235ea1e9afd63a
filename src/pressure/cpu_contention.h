// CPU contention: how much of the cores this process may use other programs are using, and how
// many compute threads that leaves. A pool of spinning workers sized for idle cores loses
// badly when one of them shares its core with another program (every barrier waits for the
// descheduled one: 2 threads with one core busy decode 4x slower than idle, where one thread
// alone loses nothing), so the engine runs as many threads as there are free cores.
//
// The reading is accounting, not a guess from timings: over an interval,
//   others = (busy ticks of the allowed cores in <root>/proc/stat) / USER_HZ - this process's
//            CPU time (getrusage)                                          [core-seconds]
// divided by the interval's wall time, in cores. Busy = user + nice + system + irq + softirq +
// steal (a hypervisor's steal takes the core as surely as a neighbour). Free cores = the cores
// the process may use (affinity mask, and cgroup v2 cpu.max quota when set) - others. Our own
// spinning counts as ours, so it does not hide the contention it causes.
//
// Thread-safety: parsers are plain functions; ThreadAdvisor is single-threaded state.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace hinge::pressure {

// Ticks (USER_HZ) summed over a set of cores.
struct CpuTicks {
  int64_t busy = 0;
  int64_t total = 0;  // busy + idle + iowait
  int32_t cores = 0;  // of the requested cores, how many lines were found
};

// Sums the "cpuN ..." lines of a /proc/stat text for the cores in `cpus` (nullopt: not that
// format, or none of the cores is there).
std::optional<CpuTicks> parse_proc_stat(std::string_view text, std::span<const int> cpus);
// cgroup v2 cpu.max ("max 100000" or "QUOTA PERIOD"): the quota in cores, nullopt inside for
// "max" (no limit); the outer nullopt when the text is not that format.
std::optional<std::optional<double>> parse_cpu_max(std::string_view text);
// cgroup v1's cpu.cfs_quota_us and cpu.cfs_period_us texts: the quota in cores, nullopt inside
// for a quota of -1 (no limit); the outer nullopt when either is not that format.
std::optional<std::optional<double>> parse_cfs_quota(std::string_view quota_us,
                                                     std::string_view period_us);
// The path of this process's cgroup v1 hierarchy that has `controller` (a /proc/self/cgroup
// line "N:cpu,cpuacct:/path"), nullopt when none.
std::optional<std::string> parse_cgroup_v1_path(std::string_view text, std::string_view controller);

// The cores this process may run on (sched_getaffinity; 0..hardware_threads-1 if unknown).
std::vector<int> allowed_cpus();
// The CPU quota of this process's cgroup under root, in cores (nullopt: none): cgroup v2's
// cpu.max, else (a v1 or hybrid hierarchy) the cpu controller's cfs_quota_us / cfs_period_us.
std::optional<double> cgroup_cpu_quota(const std::string& root);
// CPU time this process has used (user + system), seconds.
double process_cpu_seconds();

// One reading: when, the allowed cores' ticks, our CPU time.
struct CpuSample {
  double wall_seconds = 0;
  CpuTicks ticks;
  double self_cpu_seconds = 0;
};

// Reads <root>/proc/stat into a caller-owned buffer (no allocation once it has grown to fit
// the cpu lines, which come first) and sums the given cores. False when it cannot be read.
bool read_cpu_ticks(const std::string& root, std::span<const int> cpus, std::string* buffer,
                    CpuTicks* out);

// Decides the thread count from successive samples. Lowers at once when other programs take
// cores; raises only after `raise_after` samples in a row say so (a burst elsewhere should not
// make the pool flap).
class ThreadAdvisor {
 public:
  struct Config {
    int32_t max_threads = 1;     // what the user asked for (-t)
    double cores_available = 1;  // affinity, capped by the cgroup quota
    int64_t ticks_per_second = 100;
    // Free cores are rounded down after adding this: a core half taken still counts as taken,
    // one 70% free counts as free.
    double headroom = 0.35;
    int32_t raise_after = 2;
    // Others above this many cores: "contended" (workers spin less, barriers yield sooner).
    double contended_cores = 0.25;
  };
  struct Advice {
    int32_t threads = 1;
    double others_cores = 0;  // other programs' use of our cores over the last interval
    double free_cores = 0;
    bool contended = false;
    bool changed = false;     // threads differs from the previous advice
  };

  explicit ThreadAdvisor(const Config& config);
  // The first sample only sets the baseline (threads = max_threads).
  Advice update(const CpuSample& sample);
  const Advice& advice() const { return advice_; }

 private:
  Config config_;
  std::optional<CpuSample> last_;
  Advice advice_;
  int32_t raise_votes_ = 0;
};

}  // namespace hinge::pressure
