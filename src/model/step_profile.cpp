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
  const double per_step = static_cast<double>(tokens_) / static_cast<double>(steps_);
  // Matmuls are rated by what bounds them: the weights' bytes in single-sequence decode, the
  // multiply-adds in prefill; batched decode (2+ tokens a step) gets both.
  const bool bytes_col = !prefill_, ops_col = prefill_ || per_step >= 2.0;
  std::string s =
      fmt::format("{} profile: {} steps of {:.1f} tokens, {:.1f} us per step ({:.1f} tok/s)\n",
                  kind, steps_, per_step, total / 1e3 / static_cast<double>(steps_),
                  total > 0 ? static_cast<double>(tokens_) * 1e9 / total : 0.0);
  s += fmt::format("  {:<16} {:>10} {:>7}", "phase", "us/step", "share");
  if (bytes_col) s += fmt::format(" {:>9}{}", "GB/s", membw_bytes_per_s > 0 ? "  of read bw" : "");
  if (ops_col) s += fmt::format(" {:>9}{}", "GOP/s", peak_ops_per_s > 0 ? "  of peak" : "");
  s += "\n";
  for (int i = 0; i < kPhases; ++i) {
    const auto p = static_cast<Phase>(i);
    const double ns = static_cast<double>(ns_[i]);
    s += fmt::format("  {:<16} {:>10.1f} {:>6.1f}%", phase_name(p),
                     ns / 1e3 / static_cast<double>(steps_), total > 0 ? 100.0 * ns / total : 0.0);
    if (is_matmul(p) && ns > 0) {
      // Bytes or operations (2 per multiply-add) per nanosecond: GB/s, GOP/s.
      const double gbs = static_cast<double>(bytes_[i]) / ns;
      const double gops = static_cast<double>(2 * macs_[i]) / ns;
      if (bytes_col && gbs > 0) {
        s += fmt::format(" {:>9.1f}", gbs);
        if (membw_bytes_per_s > 0)
          s += fmt::format("  {:>10.0f}%", 100.0 * gbs * 1e9 / membw_bytes_per_s);
      }
      if (ops_col && gops > 0) {
        s += fmt::format(" {:>9.1f}", gops);
        if (peak_ops_per_s > 0)
          s += fmt::format("  {:>7.0f}%", 100.0 * gops * 1e9 / peak_ops_per_s);
      }
    }
    s += "\n";
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
