// What the operating system says about memory and heat: PSI (/proc/pressure/{memory,cpu}),
// the process's cgroup v2 memory files and the thermal zones, read as plain files under a root
// directory ("/" in production; a test writes the same tree under a temporary directory and
// passes it as --pressure-root).
//
//   <root>/proc/pressure/memory        some avg10=1.50 avg60=... total=...
//                                      full avg10=0.00 ...
//   <root>/proc/pressure/cpu           some avg10=...
//   <root>/proc/self/cgroup            0::/user.slice/app.scope   (the v2 line)
//   <root>/sys/fs/cgroup/<path>/memory.current | memory.high | memory.max   ("max" = no limit)
//   <root>/sys/fs/cgroup/<path>/memory.events  low N / high N / max N / oom N / oom_kill N
//   <root>/sys/class/thermal/thermal_zone*/temp             millidegrees Celsius
//   <root>/sys/class/thermal/thermal_zone*/trip_point_K_temp, trip_point_K_type
//                                      (passive, active, hot, critical)
//
// Every file is optional: a missing or unreadable one leaves its field empty. Parsers accept
// exactly the kernel's formats and reject anything else (the field stays empty): the files are
// input like any other.
//
// Thread-safety: plain functions; read_pressure_signals touches only the files.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace hinge::pressure {

// One PSI line pair (percent of wall time some / all tasks stalled, over 10 s).
struct Psi {
  double some_avg10 = 0;
  double full_avg10 = 0;  // 0 where the file has no "full" line (cpu on older kernels)
};

struct CgroupMemory {
  int64_t current_bytes = 0;
  std::optional<int64_t> high_bytes;  // nullopt: "max" (no limit)
  std::optional<int64_t> max_bytes;
  // memory.events counters (cumulative since the cgroup was made).
  int64_t events_high = 0;
  int64_t events_max = 0;
  int64_t events_oom = 0;
  // The tighter of high and max, if any.
  std::optional<int64_t> limit_bytes() const;
};

struct ThermalZone {
  std::string name;  // "thermal_zone0"
  double temp_c = 0;
  std::optional<double> passive_c;   // lowest passive (or active) trip point
  std::optional<double> hot_c;       // lowest hot trip point
  std::optional<double> critical_c;  // lowest critical trip point
};

struct PressureSignals {
  std::optional<Psi> memory_psi;
  std::optional<Psi> cpu_psi;
  std::optional<CgroupMemory> cgroup;
  std::vector<ThermalZone> thermal;
  bool any() const { return memory_psi || cpu_psi || cgroup || !thermal.empty(); }
};

// Parsers of the kernel's formats (nullopt when the text is not one).
std::optional<Psi> parse_psi(std::string_view text);
// A memory.high / memory.max value: "max" -> nullopt inside the optional (no limit); a byte
// count -> that; anything else -> parse failure (the outer nullopt).
std::optional<std::optional<int64_t>> parse_cgroup_limit(std::string_view text);
// The v2 entry ("0::/path") of a /proc/self/cgroup file: the path, "/" for the root.
std::optional<std::string> parse_cgroup_v2_path(std::string_view text);
// memory.events: the high / max / oom counters into *m (false: not that format).
bool parse_memory_events(std::string_view text, CgroupMemory* m);

// Reads everything under root (see the header comment).
PressureSignals read_pressure_signals(const std::string& root);

// The process's cgroup v2 memory limit under root (the tighter of memory.high and memory.max),
// nullopt when none is set or the files are not there.
std::optional<int64_t> cgroup_memory_limit(const std::string& root);

// The file's whole text (at most 64 KiB), nullopt when it cannot be read.
std::optional<std::string> read_small_file(const std::string& path);
// The process's cgroup v2 directory under root (from <root>/proc/self/cgroup).
std::optional<std::string> cgroup_dir(const std::string& root);

}  // namespace hinge::pressure
