// StepProfile: where a forward step's time goes, phase by phase (`hinge run --profile`).
//
// The transformer adds the wall time of each phase of every step while profiles are attached,
// decode steps (a batch in which each sequence computes one token) to one and the others
// (prefill, or prefill chunks batched with decodes) to another: the matmuls (time, the weight
// bytes they read and their multiply-adds, so each shows its GB/s against the machine's
// bandwidth in decode and its GOP/s against the compute peak in prefill), attention, and the
// element-wise work between them. Timing costs one clock read per phase (tens of nanoseconds);
// without a profile, one branch.
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

  // prefill: the profile of prefill (and mixed) steps, whose matmuls are rated in GOP/s.
  explicit StepProfile(bool prefill = false) : prefill_(prefill) {}
  bool prefill() const { return prefill_; }

  // Opens a step of `tokens` tokens: phases are timed from here on.
  void begin_step(int64_t tokens) {
    steps_ += 1;
    tokens_ += tokens;
    last_ = Clock::now();
  }
  // Adds the time since the previous lap (or begin_step) to `p`, with the weight bytes its
  // matmuls read and their multiply-adds.
  void lap(Phase p, int64_t weight_bytes = 0, int64_t macs = 0) {
    const Clock::time_point now = Clock::now();
    ns_[p] += std::chrono::duration_cast<std::chrono::nanoseconds>(now - last_).count();
    bytes_[p] += weight_bytes;
    macs_[p] += macs;
    last_ = now;
  }

  int64_t steps() const { return steps_; }
  int64_t tokens() const { return tokens_; }
  int64_t ns(Phase p) const { return ns_[p]; }
  int64_t bytes(Phase p) const { return bytes_[p]; }
  int64_t macs(Phase p) const { return macs_[p]; }
  int64_t total_ns() const;

  // A table: per phase microseconds per step and share of the step; for the matmuls GB/s in
  // decode (with their share of `membw_bytes_per_s` when > 0), GOP/s in prefill (with their
  // share of `peak_ops_per_s` when > 0).
  std::string format(double membw_bytes_per_s, double peak_ops_per_s = 0) const;
  nlohmann::json to_json() const;

  // Both tables, prefill then decode (what `hinge run` and `hinge bench` print).
  static std::string format_both(const StepProfile& prefill, const StepProfile& decode,
                                 double membw_bytes_per_s, double peak_ops_per_s) {
    return prefill.format(0.0, peak_ops_per_s) + decode.format(membw_bytes_per_s, peak_ops_per_s);
  }

 private:
  std::array<int64_t, kPhases> ns_{};
  std::array<int64_t, kPhases> bytes_{};
  std::array<int64_t, kPhases> macs_{};
  bool prefill_ = false;
  int64_t steps_ = 0, tokens_ = 0;
  Clock::time_point last_{};
};

}  // namespace hinge
