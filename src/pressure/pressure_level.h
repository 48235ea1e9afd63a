// PressureLevel: normal / elevated / critical, from the signals of pressure_signals.h, with
// hysteresis so a reading that hovers at a threshold does not flap.
//
// A signal votes for a level when it reaches that level's threshold (defaults below, each
// documented in docs/bounded-memory.md):
//   memory PSI some avg10        >= 10 %  elevated   >= 30 % critical
//   memory PSI full avg10        >=  2 %  elevated   >= 10 % critical
//   cgroup current / limit       >= 85 %  elevated   >= 95 % critical   (limit: high or max)
//   memory.events since the last reading: high grew -> elevated; max or oom grew -> critical
//   a thermal zone               >= its passive trip -> elevated; >= its hot trip, or within
//                                   critical_margin_c of its critical trip -> critical
// The level rises at once to the highest vote. It falls only after every signal has stayed
// below `release` x its threshold (80 %) of the current level for cooldown_s seconds; the event
// counters vote only in the reading where they grew. The reasons of a level name the signal and
// its value (never anything a client sent).
//
// Pure: no clock of its own (update gets `now`, seconds), no I/O. Not thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "pressure/pressure_signals.h"

namespace hinge::pressure {

enum class PressureLevel : uint8_t { kNormal = 0, kElevated = 1, kCritical = 2 };
const char* pressure_level_name(PressureLevel level);  // "normal", "elevated", "critical"
std::optional<PressureLevel> parse_pressure_level(std::string_view name);

struct PressureThresholds {
  double psi_some_elevated = 10, psi_some_critical = 30;  // percent
  double psi_full_elevated = 2, psi_full_critical = 10;
  double cgroup_elevated = 0.85, cgroup_critical = 0.95;  // of the limit
  double critical_margin_c = 5;  // degrees below a critical trip point that count as critical
  double release = 0.8;          // a level is left below release x its thresholds
  double cooldown_s = 10;        // ... held that long
  // Which signals vote: memory (PSI, cgroup) and temperature are tracked apart (two trackers),
  // since they call for different actions (pressure_policy.h).
  bool memory_signals = true;
  bool thermal_signals = true;
};

struct PressureVerdict {
  PressureLevel level = PressureLevel::kNormal;
  std::string reasons;  // "memory PSI some avg10 35.0% >= 30%; ..." (empty when normal)
};

class PressureTracker {
 public:
  explicit PressureTracker(const PressureThresholds& t = {}) : t_(t) {}

  // The level after this reading. A transition is when the result differs from the last.
  PressureVerdict update(const PressureSignals& s, double now);
  PressureLevel level() const { return level_; }
  const PressureThresholds& thresholds() const { return t_; }

 private:
  // The highest level the signals vote for when each threshold is scaled by `scale`.
  PressureVerdict vote(const PressureSignals& s, double scale, bool count_events) const;

  PressureThresholds t_;
  PressureLevel level_ = PressureLevel::kNormal;
  std::string reasons_;
  std::optional<double> below_since_;  // when the signals last fell below the release line
  std::optional<CgroupMemory> last_events_;
  bool events_grew_high_ = false, events_grew_max_ = false;
};

}  // namespace hinge::pressure
