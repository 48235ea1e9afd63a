// StepProfile: where a decode step's time goes, phase by phase (`hinge run --profile`).
//
// The transformer adds the wall time of each phase of every decode step (a batch in which each
// sequence computes one token) while a profile is attached: the matmuls (time and the weight
// bytes they read, so each shows its own GB/s against the machine's bandwidth), attention, and
// the element-wise work between them. Prefill steps are not counted. Timing costs two clock
// reads per phase (tens of nanoseconds); without a profile, one branch.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>

namespace hinge {

class StepProfile {
 public:
  enum Phase : int {
    kEmbed,       // token embedding rows
    kQkv,         // Q / K / V projections (the attention RMSNorm runs inside)
    kQkPrep,      // RoPE, Q / K norms, K shift
    kKvWrite,     // K / V rows into the paged cache
    kAttention,   // paged attention
    kAttnOut,     // output projection
    kResidual,    // post-norms and residual adds
    kGateUp,      // FFN gate / up projections (the FFN RMSNorm runs inside)
    kActivation,  // SwiGLU / GEGLU
    kDown,        // FFN down projection
    kOutput,      // final norm and the vocabulary projection (logits)
    kPhases
  };
  static const char* phase_name(Phase p);
  static bool is_matmul(Phase p) {
    return p == kQkv || p == kAttnOut || p == kGateUp || p == kDown || p == kOutput;
  }

  using Clock = std::chrono::steady_clock;

  // Opens a step of `tokens` tokens: phases are timed from here on.
  void begin_step(int64_t tokens) {
    steps_ += 1;
    tokens_ += tokens;
    last_ = Clock::now();
  }
  // Adds the time since the previous lap (or begin_step) to `p`, and `weight_bytes` read.
  void lap(Phase p, int64_t weight_bytes = 0) {
    const Clock::time_point now = Clock::now();
    ns_[p] += std::chrono::duration_cast<std::chrono::nanoseconds>(now - last_).count();
    bytes_[p] += weight_bytes;
    last_ = now;
  }

  int64_t steps() const { return steps_; }
  int64_t tokens() const { return tokens_; }
  int64_t ns(Phase p) const { return ns_[p]; }
  int64_t bytes(Phase p) const { return bytes_[p]; }
  int64_t total_ns() const;

  // A table: per phase microseconds per step, share of the step, and GB/s for the matmuls
  // (with their share of `membw_bytes_per_s` when > 0).
  std::string format(double membw_bytes_per_s) const;
  nlohmann::json to_json() const;

 private:
  std::array<int64_t, kPhases> ns_{};
  std::array<int64_t, kPhases> bytes_{};
  int64_t steps_ = 0, tokens_ = 0;
  Clock::time_point last_{};
};

}  // namespace hinge
