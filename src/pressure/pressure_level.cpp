#include "pressure/pressure_level.h"

#include <algorithm>

#include <fmt/format.h>

namespace hinge::pressure {

const char* pressure_level_name(PressureLevel level) {
  switch (level) {
    case PressureLevel::kNormal: return "normal";
    case PressureLevel::kElevated: return "elevated";
    case PressureLevel::kCritical: return "critical";
  }
  return "?";
}

std::optional<PressureLevel> parse_pressure_level(std::string_view name) {
  if (name == "normal") return PressureLevel::kNormal;
  if (name == "elevated") return PressureLevel::kElevated;
  if (name == "critical") return PressureLevel::kCritical;
  return std::nullopt;
}

namespace {

struct Votes {
  PressureLevel level = PressureLevel::kNormal;
  std::string reasons;
  void add(PressureLevel l, const std::string& why) {
    level = std::max(level, l);
    if (!reasons.empty()) reasons += "; ";
    reasons += why;
  }
  // value against (elevated, critical) thresholds.
  void check(const char* what, double value, double elevated, double critical, const char* unit) {
    if (value >= critical)
      add(PressureLevel::kCritical, fmt::format("{} {:.1f}{} >= {:.1f}{}", what, value, unit,
                                                critical, unit));
    else if (value >= elevated)
      add(PressureLevel::kElevated, fmt::format("{} {:.1f}{} >= {:.1f}{}", what, value, unit,
                                                elevated, unit));
  }
};

}  // namespace

PressureVerdict PressureTracker::vote(const PressureSignals& s, double scale,
                                      bool count_events) const {
  Votes v;
  if (s.memory_psi && t_.memory_signals) {
    v.check("memory PSI some avg10", s.memory_psi->some_avg10, t_.psi_some_elevated * scale,
            t_.psi_some_critical * scale, "%");
    v.check("memory PSI full avg10", s.memory_psi->full_avg10, t_.psi_full_elevated * scale,
            t_.psi_full_critical * scale, "%");
  }
  if (s.cgroup && t_.memory_signals) {
    if (const auto limit = s.cgroup->limit_bytes(); limit && *limit > 0)
      v.check("cgroup memory.current of its limit",
              100.0 * static_cast<double>(s.cgroup->current_bytes) / static_cast<double>(*limit),
              100.0 * t_.cgroup_elevated * scale, 100.0 * t_.cgroup_critical * scale, "%");
    if (count_events && events_grew_max_)
      v.add(PressureLevel::kCritical, "cgroup memory.events max/oom grew");
    else if (count_events && events_grew_high_)
      v.add(PressureLevel::kElevated, "cgroup memory.events high grew");
  }
  for (const ThermalZone& z : t_.thermal_signals ? s.thermal : std::vector<ThermalZone>{}) {
    // Temperatures scale around 0 C: release at 80 % of a 90 C trip is 72 C.
    const double temp = z.temp_c;
    if ((z.hot_c && temp >= *z.hot_c * scale) ||
        (z.critical_c && temp >= (*z.critical_c - t_.critical_margin_c) * scale))
      v.add(PressureLevel::kCritical, fmt::format("{} at {:.1f} C", z.name, temp));
    else if (z.passive_c && temp >= *z.passive_c * scale)
      v.add(PressureLevel::kElevated,
            fmt::format("{} at {:.1f} C >= passive trip {:.1f} C", z.name, temp, *z.passive_c));
  }
  return {v.level, std::move(v.reasons)};
}

PressureVerdict PressureTracker::update(const PressureSignals& s, double now) {
  events_grew_high_ = events_grew_max_ = false;
  if (s.cgroup) {
    if (last_events_) {
      events_grew_high_ = s.cgroup->events_high > last_events_->events_high;
      events_grew_max_ = s.cgroup->events_max > last_events_->events_max ||
                         s.cgroup->events_oom > last_events_->events_oom;
    }
    last_events_ = s.cgroup;
  }
  PressureVerdict up = vote(s, 1.0, true);
  if (up.level >= level_) {
    // Rising (or holding at the threshold): at once, and the cooldown starts over.
    level_ = up.level;
    reasons_ = std::move(up.reasons);
    below_since_.reset();
    return {level_, reasons_};
  }
  // Below the current level's thresholds: fall once every signal has been below the release
  // line of the current level for cooldown_s (to the highest level still voted at full scale).
  const PressureVerdict hold = vote(s, t_.release, false);
  if (hold.level >= level_) {
    below_since_.reset();
    return {level_, reasons_};
  }
  if (!below_since_) below_since_ = now;
  if (now - *below_since_ >= t_.cooldown_s) {
    level_ = up.level;
    reasons_ = std::move(up.reasons);
    below_since_.reset();
  }
  return {level_, reasons_};
}

}  // namespace hinge::pressure
