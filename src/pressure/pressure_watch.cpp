#include "pressure/pressure_watch.h"

#include <chrono>
#include <utility>

namespace hinge::pressure {

PressureWatch::PressureWatch(PressureWatchConfig config, OnChange on_change)
    : config_(std::move(config)), on_change_(std::move(on_change)), tracker_(config_.thresholds) {
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
  PressureLevel last = PressureLevel::kNormal;
  for (;;) {
    PressureSignals s = read_pressure_signals(config_.root);
    const double now = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const PressureVerdict v = tracker_.update(s, now);
    const bool changed = v.level != last;
    last = v.level;
    {
      std::lock_guard lock(mu_);
      snap_.signals = std::move(s);
      snap_.level = v.level;
      snap_.reasons = v.reasons;
      ++snap_.readings;
      if (changed) ++snap_.transitions;
    }
    if (changed && on_change_) on_change_(v.level, v.reasons);
    std::unique_lock lock(mu_);
    if (cv_.wait_for(lock, std::chrono::duration<double>(config_.interval_s),
                     [&] { return stopping_; }))
      return;
  }
}

}  // namespace hinge::pressure
