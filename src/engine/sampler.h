// Turns a logits row into the next token: penalties, logit bias (a sparse add), then greedy or
// temperature -> top-k -> top-p -> min-p -> draw (llama.cpp's default chain order).
//
// No sort of the vocabulary (issue 13): one SIMD pass computes every token's weight
// exp((l - max) / T) (kernels/sampling.h), then
//   - temperature only (OpenAI's defaults): draw in id order over the weights;
//   - top-k: the k-th largest of the per-64-token block maxima the exp pass keeps bounds the
//     k-th weight from below; the few tokens at or above it are sorted (at most 64k);
//   - top-p without top-k, top_p >= 0.5 (min-p or not): rejection (draw_nucleus). Draw from
//     the whole distribution; the token is the sample when the mass ranked before it is below
//     top_p x total (one SIMD pass), else draw again: 1 / top_p passes on average, no cut;
//   - otherwise top-p / min-p without top-k: a histogram of the weights on a log scale (32 bins
//     per octave) finds the bin where top-p's mass or min-p's threshold is reached; only the
//     tokens of that one boundary bin are sorted, the rest is known to be in or out. The kept
//     set is exactly the sorted chain's (ties: lower id first), tested against the reference
//     that sorts (kept_sorted_ref); the rejection path accepts exactly that set too (a token
//     within 1e-5 of the boundary is decided by f64 sums, as the chain is).
// Deterministic for a given seed: one uniform draw per token over the kept weights (in id
// order; with top-k over the k kept, heaviest first; by rejection, one per try over all the
// weights), so seeds map to other tokens than before 2026-12-02 (for top-p, than before that
// day's rejection path). Scratch is kept between calls: after the first token a sampler does not
// allocate. One Sampler is used by one thread at a time; different ones run in parallel.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <random>
#include <span>
#include <vector>

#include "engine/sampling_params.h"
#include "kernels/sampling.h"

namespace hinge {

// The vocabulary-sized buffers of sampling: one per thread that samples (not per request).
struct SamplerScratch {
  // 32 bins per octave over weights down to 2^-32 (~22 nats below the top), the rest in the
  // last bin; kWays interleaved copies so that consecutive tokens in one bin do not wait on
  // each other's increment.
  static constexpr int32_t kBins = kernels::kLogBins;
  static constexpr int32_t kWays = 4;
  struct Candidate {
    int32_t id;
    float logit;
    float w;
  };
  std::vector<float> work;     // logits with penalties / bias, when there are any
  std::vector<float> weights;  // exp((l - max) / T) in id order
  std::vector<double> run_sums;  // their sum per kernels::kExpRun ids
  std::vector<float> block_max;  // their largest per kernels::kExpBlock ids
  std::vector<float> block_sel;  // a copy of block_max that top-k selects in
  std::vector<Candidate> candidates;
  std::vector<uint16_t> log_bins;  // kernels::log_bin of each weight (top-p)
  std::vector<int32_t> ids;  // ids gathered by a threshold (n_vocab + kernels::kGatherSlack)
  std::vector<int32_t> counts;  // occurrences per id in the penalty window (reset after use)
  std::array<double, kBins * kWays> bin_mass{};
  std::array<double, kBins> sub_mass{};  // one level's histogram (bins, then within a bin)
};

class Sampler {
 public:
  Sampler(const SamplingParams& params, int64_t n_vocab);

  // `logits` is left untouched: penalties and bias go to scratch.work when there are any.
  // `history` holds prompt + generated ids so far. Bias entries with a token >= n_vocab are
  // skipped (the engine rejects them earlier).
  // `allowed` (constrained decoding): a bitset of n_vocab bits; the others cannot be drawn.
  int32_t sample(const float* logits, std::span<const int32_t> history, SamplerScratch& scratch,
                 const uint64_t* allowed = nullptr);
  // With a scratch of this sampler's own (allocated on first use).
  int32_t sample(const float* logits, std::span<const int32_t> history);

  // Speculative decoding with a draft model's drafts (engine/spec_decode.h):
  // The distribution sample() draws from, as probabilities (n_vocab of them, 0 outside the
  // kept set; greedy: 1 on the argmax) in probs. Draws nothing.
  void distribution(const float* logits, std::span<const int32_t> history,
                    SamplerScratch& scratch, const uint64_t* allowed, float* probs);
  // One uniform draw in [0, 1) from this sampler's stream.
  double uniform();
  // A draw from non-negative weights w[0, n_vocab) summing to total > 0, with one uniform of
  // this sampler's stream (inverse CDF in id order).
  int32_t draw_weights(const float* w, double total);

  // The logits after penalties and bias (the input itself when there are none). For tests.
  const float* adjusted_for_testing(const float* logits, std::span<const int32_t> history);
  // The ids the truncation keeps (ascending) for these logits, penalties and bias applied:
  // what sample() draws from. For tests.
  std::vector<int32_t> kept_for_testing(const float* logits, std::span<const int32_t> history);
  // The ids draw_nucleus accepts (top-p by rejection), ascending. For tests.
  std::vector<int32_t> nucleus_for_testing(const float* logits, std::span<const int32_t> history);
  // The same set from the reference that sorts the whole vocabulary (the chain as written).
  std::vector<int32_t> kept_sorted_ref(const float* logits, std::span<const int32_t> history);

  const SamplingParams& params() const { return params_; }
  // How many of the history's last tokens sample() reads (the penalties' window): 0 none (no
  // penalties), -1 all of them.
  int64_t history_window() const;

 private:
  static constexpr int32_t kBins = SamplerScratch::kBins;
  // Where the truncation cuts the order (weight descending, id ascending); all: no cut.
  struct Cut {
    bool all = false;
    size_t list = 0;  // > 0: the kept tokens are scratch.candidates[0, list) (top-k)
    kernels::KeptCut cut{0.0f, -1};
    double mass = 0;  // total weight kept
  };

  const float* prepare(const float* logits, std::span<const int32_t> history, SamplerScratch& s,
                       const uint64_t* allowed = nullptr);
  void apply_penalties(float* logits, std::span<const int32_t> history, SamplerScratch& s);
  bool truncates() const;
  // Fills s.weights (and, with_bins and an exact top-p cut to find, s.log_bins); returns their
  // sum.
  double weigh(const float* logits, SamplerScratch& s, bool with_bins);
  // top-p (with min-p or not, without top-k) at top_p >= kMinRejectionTopP: draw_nucleus.
  static constexpr float kMinRejectionTopP = 0.5f;
  static constexpr int32_t kMaxRejections = 8;
  bool top_p_without_top_k() const;
  bool nucleus_by_rejection() const;
  // Whether token t is in the nucleus (top-p, then min-p) of the weights summing to total.
  bool in_nucleus(int32_t t, double total, const SamplerScratch& s) const;
  // A draw of the nucleus by rejection from the whole distribution, or -1 after kMaxRejections.
  int32_t draw_nucleus(double total, SamplerScratch& s);
  Cut find_cut(SamplerScratch& s) const;
  // weigh() and the truncation's cut (all: none), its mass set.
  Cut exact_cut(const float* logits, SamplerScratch& s);
  Cut top_p_cut(SamplerScratch& s) const;
  bool kept(const Cut& c, const SamplerScratch& s, int64_t i) const;
  int32_t draw(const Cut& c, const SamplerScratch& s);

  SamplingParams params_;
  int64_t n_vocab_;
  std::mt19937_64 rng_;
  float max_logit_ = 0;
  int64_t top_ = 0;  // the heaviest token (weigh())
  std::unique_ptr<SamplerScratch> own_;
};

}  // namespace hinge
