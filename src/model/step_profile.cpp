#include "model/step_profile.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

namespace hinge {

const char* StepProfile::phase_name(Phase p) {
  switch (p) {
    case kEmbed:
      return "embedding";
    case kQkv:
      return "qkv matmul";
    case kQkPrep:
      return "rope / qk norm";
    case kKvWrite:
      return "kv write";
    case kAttention:
      return "attention";
    case kAttnOut:
      return "attn out matmul";
    case kResidual:
      return "residual adds";
    case kGateUp:
      return "gate/up matmul";
    case kActivation:
      return "activation";
    case kDown:
      return "down matmul";
    case kOutput:
      return "output matmul";
    case kPhases:
      break;
  }
  return "?";
}

int64_t StepProfile::total_ns() const {
  int64_t t = 0;
  for (int64_t v : ns_) t += v;
  return t;
}

std::string StepProfile::format(double membw_bytes_per_s, double peak_ops_per_s) const {
  const char* kind = prefill_ ? "prefill" : "decode";
  if (steps_ == 0) return fmt::format("{} profile: no {} step ran\n", kind, kind);
  const double total = static_cast<double>(total_ns());
  const double limit = prefill_ ? peak_ops_per_s : membw_bytes_per_s;
  std::string s =
      fmt::format("{} profile: {} steps of {:.1f} tokens, {:.1f} us per step ({:.1f} tok/s)\n",
                  kind, steps_, static_cast<double>(tokens_) / static_cast<double>(steps_),
                  total / 1e3 / static_cast<double>(steps_),
                  total > 0 ? static_cast<double>(tokens_) * 1e9 / total : 0.0);
  s += fmt::format("  {:<16} {:>10} {:>7} {:>9}{}\n", "phase", "us/step", "share",
                   prefill_ ? "GOP/s" : "GB/s",
                   limit > 0 ? (prefill_ ? "  of peak" : "  of read bw") : "");
  for (int i = 0; i < kPhases; ++i) {
    const auto p = static_cast<Phase>(i);
    const double us = static_cast<double>(ns_[i]) / 1e3 / static_cast<double>(steps_);
    std::string rate;
    // GB/s of weights (decode) or GOP/s, 2 per multiply-add (prefill): per nanosecond.
    const double per_ns = ns_[i] > 0 ? static_cast<double>(prefill_ ? 2 * macs_[i] : bytes_[i]) /
                                           static_cast<double>(ns_[i])
                                     : 0.0;
    if (is_matmul(p) && per_ns > 0) {
      rate = fmt::format(" {:>9.1f}", per_ns);
      if (limit > 0) rate += fmt::format("  {:>7.0f}%", 100.0 * per_ns * 1e9 / limit);
    }
    s += fmt::format("  {:<16} {:>10.1f} {:>6.1f}%{}\n", phase_name(p), us,
                     total > 0 ? 100.0 * static_cast<double>(ns_[i]) / total : 0.0, rate);
  }
  return s;
}

nlohmann::json StepProfile::to_json() const {
  nlohmann::json j;
  j["kind"] = prefill_ ? "prefill" : "decode";
  j["steps"] = steps_;
  j["tokens"] = tokens_;
  j["us_per_step"] =
      steps_ > 0 ? static_cast<double>(total_ns()) / 1e3 / static_cast<double>(steps_) : 0.0;
  nlohmann::json phases = nlohmann::json::array();
  for (int i = 0; i < kPhases; ++i) {
    const auto p = static_cast<Phase>(i);
    nlohmann::json e;
    e["phase"] = phase_name(p);
    e["us_per_step"] =
        steps_ > 0 ? static_cast<double>(ns_[i]) / 1e3 / static_cast<double>(steps_) : 0.0;
    if (is_matmul(p)) {
      e["weight_bytes_per_step"] = steps_ > 0 ? bytes_[i] / steps_ : 0;
      e["gb_per_s"] =
          ns_[i] > 0 ? static_cast<double>(bytes_[i]) / static_cast<double>(ns_[i]) : 0.0;
      e["macs_per_step"] = steps_ > 0 ? macs_[i] / steps_ : 0;
      e["gop_per_s"] =
          ns_[i] > 0 ? static_cast<double>(2 * macs_[i]) / static_cast<double>(ns_[i]) : 0.0;
    }
    phases.push_back(std::move(e));
  }
  j["phases"] = std::move(phases);
  return j;
}

}  // namespace hinge
