#include "pressure/pressure_watch.h"

#include <chrono>
#include <utility>

namespace hinge::pressure {

namespace {

PressureThresholds only(PressureThresholds t, bool memory) {
  t.memory_signals = t.memory_signals && memory;
  t.thermal_signals = t.thermal_signals && !memory;
  return t;
}

}  // namespace

PressureWatch::PressureWatch(PressureWatchConfig config, OnChange on_change)
    : config_(std::move(config)),
      on_change_(std::move(on_change)),
      tracker_(only(config_.thresholds, true)),
      thermal_tracker_(only(config_.thresholds, false)) {
  thread_ = std::thread([this] { loop(); });
}

PressureWatch::~PressureWatch() { stop(); }

void PressureWatch::stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

PressureSnapshot PressureWatch::snapshot() const {
  std::lock_guard lock(mu_);
  return snap_;
}

void PressureWatch::loop() {
  const auto t0 = std::chrono::steady_clock::now();
  PressureLevel last = PressureLevel::kNormal, last_thermal = PressureLevel::kNormal;
  for (;;) {
    PressureSignals s = read_pressure_signals(config_.root);
    const double now = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const PressureVerdict v = tracker_.update(s, now);
    const PressureVerdict t = thermal_tracker_.update(s, now);
    const bool changed = v.level != last || t.level != last_thermal;
    last = v.level;
    last_thermal = t.level;
    std::string reasons = v.reasons;
    if (!t.reasons.empty()) reasons += (reasons.empty() ? "" : "; ") + t.reasons;
    {
      std::lock_guard lock(mu_);
      snap_.signals = std::move(s);
      snap_.level = v.level;
      snap_.thermal = t.level;
      snap_.reasons = reasons;
      ++snap_.readings;
      if (changed) ++snap_.transitions;
    }
    if (changed && on_change_) on_change_(v.level, t.level, reasons);
    std::unique_lock lock(mu_);
    if (cv_.wait_for(lock, std::chrono::duration<double>(config_.interval_s),
                     [&] { return stopping_; }))
      return;
  }
}

}  // namespace hinge::pressure
