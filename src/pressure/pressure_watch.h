// PressureWatch: a thread that reads the pressure signals every interval_s (pressure_signals.h),
// runs them through two PressureTrackers (hysteresis), one for memory signals and one for
// temperature, and calls on_change on every transition of either (and once with the first
// reading's levels when they are not normal). The server hands
// the level to its engine thread, which applies the actions (pressure/pressure_policy.h).
//
// Thread-safety: snapshot() is safe from any thread; on_change runs on the watch thread and must
// not block for long. stop() (or the destructor) joins the thread.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "pressure/pressure_level.h"
#include "pressure/pressure_signals.h"

namespace hinge::pressure {

struct PressureWatchConfig {
  std::string root = "/";  // --pressure-root
  double interval_s = 1;   // --pressure-interval
  PressureThresholds thresholds;
};

struct PressureSnapshot {
  PressureSignals signals;  // the last reading
  PressureLevel level = PressureLevel::kNormal;    // memory (PSI, cgroup)
  PressureLevel thermal = PressureLevel::kNormal;  // temperature
  std::string reasons;
  int64_t readings = 0;
  int64_t transitions = 0;
};

class PressureWatch {
 public:
  using OnChange =
      std::function<void(PressureLevel memory, PressureLevel thermal, const std::string& reasons)>;
  PressureWatch(PressureWatchConfig config, OnChange on_change);
  ~PressureWatch();
  PressureWatch(const PressureWatch&) = delete;
  PressureWatch& operator=(const PressureWatch&) = delete;

  PressureSnapshot snapshot() const;
  const PressureWatchConfig& config() const { return config_; }
  void stop();

 private:
  void loop();

  const PressureWatchConfig config_;
  OnChange on_change_;
  PressureTracker tracker_;          // memory signals; watch thread only
  PressureTracker thermal_tracker_;  // temperature
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;     // guarded by mu_
  PressureSnapshot snap_;     // guarded by mu_
  std::thread thread_;
};

}  // namespace hinge::pressure
