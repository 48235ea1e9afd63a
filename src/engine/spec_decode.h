// Speculative decoding, the engine's pieces that need no model (issue 38):
//
//   ngram_draft     prompt lookup (vLLM's "ngram", llama.cpp's lookup decoding): the last n
//                   tokens of a sequence (n from max_n down to min_n) are looked up earlier in
//                   the same sequence, most recent match first; the tokens that followed
//                   there are the draft. No extra model, no extra memory.
//   SpecController  a request's draft length, adapted to what it accepts: a moving average of
//                   the accepted fraction sets k (k_max while drafts are accepted, shrinking
//                   as they are not), and a request whose drafts keep failing stops drafting
//                   for a while, so low acceptance costs (almost) nothing.
//
// Verification (engine_step.cpp): the step computes the request's next token and its k
// drafts; row j's logits are sampled by the request's own sampler with the tokens accepted so
// far as history, and draft j is accepted when the draw equals it. For a deterministic draft
// (prompt lookup) this is exactly speculative sampling's rule — accept with probability
// p(draft), else draw from p without the draft — and it consumes one draw per emitted token in
// the order non-speculative decoding would: for the same seed the output is the same token
// stream, sampled or greedy.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace hinge {

// Appends to *out (cleared first) up to k tokens that followed the most recent earlier
// occurrence of the last n tokens of `tokens`, for the largest n in [min_n, max_n] that has
// one. Only the last kSearchWindow positions are searched. Returns the count (0: no match).
int32_t ngram_draft(std::span<const int32_t> tokens, int32_t min_n, int32_t max_n, int32_t k,
                    std::vector<int32_t>* out);
inline constexpr size_t kNgramSearchWindow = 1 << 16;

class SpecController {
 public:
  // initial: the acceptance assumed before any verification (k = initial x k_max first).
  explicit SpecController(int32_t k_max = 0, double initial = 1.0)
      : k_max_(k_max), ema_(initial) {}
  // Draft tokens to ask for this step (0: not now).
  int32_t next_k();
  // A verification: `drafted` tokens proposed, `accepted` of them accepted.
  void observe(int32_t drafted, int32_t accepted);

  double acceptance() const { return ema_; }
  int32_t k_max() const { return k_max_; }

 private:
  static constexpr double kAlpha = 0.5;         // weight of the newest verification
  static constexpr double kPauseBelow = 0.08;   // moving acceptance that pauses drafting
  static constexpr int32_t kPauseSteps = 16;    // steps paused (doubling while it stays low)
  int32_t k_max_;
  double ema_ = 1.0;
  int32_t pause_ = 0;
  int32_t pause_len_ = kPauseSteps;
  bool probe_ = false;  // the first verification after a pause: one draft
};

}  // namespace hinge
