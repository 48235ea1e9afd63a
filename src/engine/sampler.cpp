#include "engine/sampler.h"

#include <algorithm>
#include <cmath>

#include "kernels/ops.h"

namespace hinge {

Status SamplingParams::validate() const {
  if (!std::isfinite(temperature) || temperature < 0.0f || temperature > 100.0f)
    return Status::Errorf("temperature must be in [0, 100], got {}", temperature);
  if (!(top_p > 0.0f && top_p <= 1.0f)) return Status::Errorf("top_p must be in (0, 1], got {}", top_p);
  if (!(min_p >= 0.0f && min_p <= 1.0f)) return Status::Errorf("min_p must be in [0, 1], got {}", min_p);
  if (top_k < 0) return Status::Errorf("top_k must be >= 0 (0 disables it), got {}", top_k);
  if (!(repetition_penalty > 0.0f && repetition_penalty <= 10.0f))
    return Status::Errorf("repetition penalty must be in (0, 10], got {}", repetition_penalty);
  if (!(std::abs(presence_penalty) <= 2.0f))
    return Status::Errorf("presence penalty must be in [-2, 2], got {}", presence_penalty);
  if (!(std::abs(frequency_penalty) <= 2.0f))
    return Status::Errorf("frequency penalty must be in [-2, 2], got {}", frequency_penalty);
  if (penalty_last_n < -1) return Status::Errorf("penalty window must be >= -1, got {}", penalty_last_n);
  for (const auto& s : stop)
    if (s.empty()) return Status::Error("stop strings must not be empty");
  for (size_t i = 0; i < logit_bias.size(); ++i) {
    const LogitBias& b = logit_bias[i];
    if (b.token < 0) return Status::Errorf("logit bias token id must be >= 0, got {}", b.token);
    if (!(std::abs(b.bias) <= 100.0f))
      return Status::Errorf("logit bias must be in [-100, 100], got {}", b.bias);
    for (size_t j = 0; j < i; ++j)
      if (logit_bias[j].token == b.token)
        return Status::Errorf("logit bias token id {} appears twice", b.token);
  }
  return Status::Ok();
}

Sampler::Sampler(const SamplingParams& params, int64_t n_vocab)
    : params_(params), n_vocab_(n_vocab), rng_(params.seed) {}

void Sampler::apply_penalties(float* logits, std::span<const int32_t> history) {
  const auto& p = params_;
  if (p.repetition_penalty == 1.0f && p.presence_penalty == 0.0f && p.frequency_penalty == 0.0f)
    return;
  if (p.penalty_last_n == 0 || history.empty()) return;
  size_t window = history.size();
  if (p.penalty_last_n > 0) window = std::min(window, static_cast<size_t>(p.penalty_last_n));
  auto recent = history.subspan(history.size() - window);
  if (counts_.size() != static_cast<size_t>(n_vocab_)) counts_.assign(static_cast<size_t>(n_vocab_), 0);
  for (int32_t id : recent)
    if (id >= 0 && id < n_vocab_) counts_[static_cast<size_t>(id)]++;
  for (int32_t id : recent) {
    if (id < 0 || id >= n_vocab_) continue;
    int32_t& c = counts_[static_cast<size_t>(id)];
    if (c == 0) continue;  // already applied
    float& l = logits[id];
    // llama.cpp's penalties sampler: divide positive logits, multiply negative ones.
    l = l > 0.0f ? l / p.repetition_penalty : l * p.repetition_penalty;
    l -= static_cast<float>(c) * p.frequency_penalty + (c > 0 ? 1.0f : 0.0f) * p.presence_penalty;
    c = 0;
  }
}

int32_t Sampler::sample(float* logits, std::span<const int32_t> history) {
  apply_penalties(logits, history);
  for (const LogitBias& b : params_.logit_bias)
    if (b.token < n_vocab_) logits[b.token] += b.bias;
  const auto& p = params_;
  if (p.temperature <= 0.0f) return static_cast<int32_t>(kernels::argmax(logits, n_vocab_));

  // No truncation (OpenAI's defaults: temperature only): sample the softmax in id order,
  // O(vocab) with one random draw, instead of sorting the vocabulary for nothing.
  if ((p.top_k <= 0 || p.top_k >= n_vocab_) && p.top_p >= 1.0f && p.min_p <= 0.0f)
    return sample_full(logits);

  candidates_.resize(static_cast<size_t>(n_vocab_));
  for (int64_t i = 0; i < n_vocab_; ++i)
    candidates_[static_cast<size_t>(i)] = {static_cast<int32_t>(i), logits[i] / p.temperature, 0.0f};
  auto by_logit = [](const Candidate& a, const Candidate& b) {
    return a.logit != b.logit ? a.logit > b.logit : a.id < b.id;
  };
  size_t n = candidates_.size();
  if (p.top_k > 0 && static_cast<size_t>(p.top_k) < n) {
    std::partial_sort(candidates_.begin(), candidates_.begin() + p.top_k, candidates_.end(), by_logit);
    n = static_cast<size_t>(p.top_k);
  } else {
    std::sort(candidates_.begin(), candidates_.end(), by_logit);
  }
  // Softmax over the kept candidates (sorted, so [0] is the max).
  const float max_logit = candidates_[0].logit;
  double sum = 0.0;
  for (size_t i = 0; i < n; ++i) {
    candidates_[i].p = std::exp(candidates_[i].logit - max_logit);
    sum += candidates_[i].p;
  }
  for (size_t i = 0; i < n; ++i) candidates_[i].p = static_cast<float>(candidates_[i].p / sum);
  if (p.top_p < 1.0f) {
    double cum = 0.0;
    size_t keep = n;
    for (size_t i = 0; i < n; ++i) {
      cum += candidates_[i].p;
      if (cum >= p.top_p) {
        keep = i + 1;
        break;
      }
    }
    n = keep;
  }
  if (p.min_p > 0.0f) {
    const float threshold = candidates_[0].p * p.min_p;
    size_t keep = 1;
    while (keep < n && candidates_[keep].p >= threshold) ++keep;
    n = keep;
  }
  double total = 0.0;
  for (size_t i = 0; i < n; ++i) total += candidates_[i].p;
  std::uniform_real_distribution<double> uni(0.0, total);
  const double r = uni(rng_);
  double acc = 0.0;
  for (size_t i = 0; i < n; ++i) {
    acc += candidates_[i].p;
    if (r < acc) return candidates_[i].id;
  }
  return candidates_[n - 1].id;
}

int32_t Sampler::sample_full(const float* logits) {
  const auto n = static_cast<size_t>(n_vocab_);
  const float inv_t = 1.0f / params_.temperature;
  const float max_logit = logits[kernels::argmax(logits, n_vocab_)];
  probs_.resize(n);
  double sum = 0.0;
  for (size_t i = 0; i < n; ++i) {
    probs_[i] = std::exp((logits[i] - max_logit) * inv_t);
    sum += probs_[i];
  }
  std::uniform_real_distribution<double> uni(0.0, sum);
  const double r = uni(rng_);
  double acc = 0.0;
  for (size_t i = 0; i < n; ++i) {
    acc += probs_[i];
    if (r < acc) return static_cast<int32_t>(i);
  }
  // Rounding: the last token with any probability.
  for (size_t i = n; i-- > 0;)
    if (probs_[i] > 0.0f) return static_cast<int32_t>(i);
  return 0;
}

}  // namespace hinge
