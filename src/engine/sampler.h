// Turns a logits row into the next token: penalties, logit bias (a sparse add), then greedy or
// temperature -> top-k -> top-p -> min-p -> draw (llama.cpp's default chain order).
// Temperature with no truncation (OpenAI's defaults: top_k off, top_p 1, min_p 0) skips the
// sort: the softmax is drawn in id order, O(vocab) with one random number (same distribution;
// another random stream than the sorted path's, so seeds map to other tokens than before
// 2026-12-01). Deterministic for a given seed. Scratch is kept between calls, so after the
// first token a sampler does not allocate.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <vector>

#include "engine/sampling_params.h"

namespace hinge {

class Sampler {
 public:
  Sampler(const SamplingParams& params, int64_t n_vocab);

  // `logits` is modified in place (penalties, bias). `history` holds prompt + generated ids so
  // far. Bias entries with a token >= n_vocab are skipped (the engine rejects them earlier).
  int32_t sample(float* logits, std::span<const int32_t> history);

  const SamplingParams& params() const { return params_; }

 private:
  void apply_penalties(float* logits, std::span<const int32_t> history);
  int32_t sample_full(const float* logits);  // temperature only: no sort

  SamplingParams params_;
  int64_t n_vocab_;
  std::mt19937_64 rng_;
  struct Candidate {
    int32_t id;
    float logit;
    float p;
  };
  std::vector<Candidate> candidates_;
  std::vector<float> probs_;     // sample_full's softmax, in id order
  std::vector<int32_t> counts_;  // occurrences per id in the penalty window (reset after use)
};

}  // namespace hinge
