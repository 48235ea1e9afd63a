#include "engine/sampler.h"

#include <limits>

#include <algorithm>
#include <bit>
#include <cmath>
#include <functional>

#include "kernels/ops.h"
#include "kernels/sampling.h"

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

namespace {

using Candidate = SamplerScratch::Candidate;

// The chain's order: weight descending, then id ascending.
bool before(const Candidate& a, const Candidate& b) {
  return a.w != b.w ? a.w > b.w : a.id < b.id;
}

bool penalties_on(const SamplingParams& p) {
  return p.repetition_penalty != 1.0f || p.presence_penalty != 0.0f || p.frequency_penalty != 0.0f;
}

}  // namespace

Sampler::Sampler(const SamplingParams& params, int64_t n_vocab)
    : params_(params), n_vocab_(n_vocab), rng_(params.seed) {}

int64_t Sampler::history_window() const {
  if (!penalties_on(params_) || params_.penalty_last_n == 0) return 0;
  return params_.penalty_last_n < 0 ? -1 : params_.penalty_last_n;
}

void Sampler::apply_penalties(float* logits, std::span<const int32_t> history, SamplerScratch& s) {
  const auto& p = params_;
  if (!penalties_on(p) || p.penalty_last_n == 0 || history.empty()) return;
  size_t window = history.size();
  if (p.penalty_last_n > 0) window = std::min(window, static_cast<size_t>(p.penalty_last_n));
  auto recent = history.subspan(history.size() - window);
  if (s.counts.size() != static_cast<size_t>(n_vocab_)) s.counts.assign(static_cast<size_t>(n_vocab_), 0);
  for (int32_t id : recent)
    if (id >= 0 && id < n_vocab_) s.counts[static_cast<size_t>(id)]++;
  for (int32_t id : recent) {
    if (id < 0 || id >= n_vocab_) continue;
    int32_t& c = s.counts[static_cast<size_t>(id)];
    if (c == 0) continue;  // already applied
    float& l = logits[id];
    // llama.cpp's penalties sampler: divide positive logits, multiply negative ones.
    l = l > 0.0f ? l / p.repetition_penalty : l * p.repetition_penalty;
    l -= static_cast<float>(c) * p.frequency_penalty + (c > 0 ? 1.0f : 0.0f) * p.presence_penalty;
    c = 0;
  }
}

const float* Sampler::prepare(const float* logits, std::span<const int32_t> history,
                              SamplerScratch& s, const uint64_t* allowed) {
  const bool penalize = penalties_on(params_) && params_.penalty_last_n != 0 && !history.empty();
  if (!penalize && params_.logit_bias.empty() && allowed == nullptr) return logits;
  s.work.assign(logits, logits + n_vocab_);
  apply_penalties(s.work.data(), history, s);
  for (const LogitBias& b : params_.logit_bias)
    if (b.token < n_vocab_) s.work[static_cast<size_t>(b.token)] += b.bias;
  if (allowed != nullptr) {  // a grammar's mask: whole words of 64 tokens at once
    float* w = s.work.data();
    for (int64_t base = 0; base < n_vocab_; base += 64) {
      const uint64_t bits = allowed[base >> 6];
      if (bits == ~uint64_t{0}) continue;
      const int64_t end = std::min<int64_t>(n_vocab_, base + 64);
      for (int64_t t = base; t < end; ++t)
        if (!((bits >> (t - base)) & 1)) w[t] = -std::numeric_limits<float>::infinity();
    }
  }
  return s.work.data();
}

bool Sampler::truncates() const {
  const auto& p = params_;
  return (p.top_k > 0 && p.top_k < n_vocab_) || p.top_p < 1.0f || p.min_p > 0.0f;
}

bool Sampler::top_p_without_top_k() const {
  return params_.top_p < 1.0f && !(params_.top_k > 0 && params_.top_k < n_vocab_);
}

bool Sampler::nucleus_by_rejection() const {
  return top_p_without_top_k() && params_.top_p >= kMinRejectionTopP;
}

double Sampler::weigh(const float* logits, SamplerScratch& s, bool with_bins) {
  top_ = kernels::argmax(logits, n_vocab_);
  max_logit_ = logits[top_];
  s.weights.resize(static_cast<size_t>(n_vocab_));
  s.run_sums.resize(static_cast<size_t>((n_vocab_ + kernels::kExpRun - 1) / kernels::kExpRun));
  s.block_max.resize(
      static_cast<size_t>((n_vocab_ + kernels::kExpBlock - 1) / kernels::kExpBlock));
  // top-p's exact cut without top-k histograms the weights' log bins, computed in the same pass.
  const bool bins = with_bins && top_p_without_top_k();
  if (bins) s.log_bins.resize(static_cast<size_t>(n_vocab_));
  return kernels::exp_shifted(logits, n_vocab_, max_logit_, 1.0f / params_.temperature,
                              s.weights.data(), s.run_sums.data(), s.block_max.data(),
                              bins ? s.log_bins.data() : nullptr);
}

Sampler::Cut Sampler::find_cut(SamplerScratch& s) const {
  const auto& p = params_;
  const bool use_k = p.top_k > 0 && p.top_k < n_vocab_;
  const bool use_p = p.top_p < 1.0f;
  const bool use_m = p.min_p > 0.0f;
  const float* w = s.weights.data();
  const float* bmax = s.block_max.data();
  const int64_t n = n_vocab_;
  // The top weight is 1 up to the exp kernel's rounding; min-p is relative to it.
  const float w_top = w[top_];
  const float min_w = w_top * p.min_p;
  s.ids.resize(static_cast<size_t>(n + kernels::kGatherSlack));
  Cut c;
  c.cut = {w_top, static_cast<int32_t>(top_)};  // the chain always keeps the top token
  auto& cand = s.candidates;
  cand.clear();
  if (use_k) {
    // The k largest block maxima are k distinct tokens: the k-th of them is at most the k-th
    // weight, so every token of the top k weighs at least that much. With no top-p to
    // normalize over all k, min-p's threshold may cut higher.
    float tau = 0.0f;
    const size_t k = static_cast<size_t>(p.top_k);
    if (k <= s.block_max.size()) {
      s.block_sel.assign(s.block_max.begin(), s.block_max.end());
      std::nth_element(s.block_sel.begin(), s.block_sel.begin() + static_cast<ptrdiff_t>(k - 1),
                       s.block_sel.end(), std::greater<float>());
      tau = s.block_sel[k - 1];
    }
    if (use_m && !use_p) tau = std::max(tau, min_w);
    const int64_t m = kernels::gather_between(w, n, tau, HUGE_VALF, s.ids.data(), bmax);
    for (int64_t j = 0; j < m; ++j) {
      const int32_t id = s.ids[static_cast<size_t>(j)];
      cand.push_back({id, 0.0f, w[id]});
    }
    std::sort(cand.begin(), cand.end(), before);
    size_t keep = std::min(cand.size(), static_cast<size_t>(p.top_k));
    if (use_p) {
      double zk = 0.0;
      for (size_t i = 0; i < keep; ++i) zk += cand[i].w;
      double cum_p = 0.0;
      for (size_t i = 0; i < keep; ++i) {
        cum_p += cand[i].w;
        if (cum_p >= static_cast<double>(p.top_p) * zk) {
          keep = i + 1;
          break;
        }
      }
    }
    if (use_m) {
      const float thr = cand[0].w * p.min_p;
      size_t j = 1;
      while (j < keep && cand[j].w >= thr) ++j;
      keep = j;
    }
    c.cut = {cand[keep - 1].w, cand[keep - 1].id};
    c.list = keep;
    for (size_t i = 0; i < keep; ++i) c.mass += cand[i].w;
    return c;
  }
  if (use_p)
    c = top_p_cut(s);
  else
    c.cut = {-HUGE_VALF, INT32_MAX};  // min-p alone cuts below
  // min-p after top-p: both keep a prefix of the order, so the shorter one stands.
  if (use_m && c.cut.w_cut < min_w) {
    c.cut = {min_w, INT32_MAX};
    c.mass = kernels::kept_sum(w, n, c.cut, bmax);
  }
  return c;
}

// top-p without top-k, as a radix select on the weights' log scale: a histogram of 1/32-octave
// bins over the whole vocabulary finds the bin where top-p's mass is reached; only that bin's
// tokens are gathered, refined by the next 10 and then the last 8 bits of the scale the same
// way, and the few left are sorted. Masses in f64, so deep cuts (top_p 0.999) land where the
// sorted chain's f64 sum puts them.
Sampler::Cut Sampler::top_p_cut(SamplerScratch& s) const {
  constexpr int32_t kWays = SamplerScratch::kWays;
  const float* w = s.weights.data();
  const int64_t n = n_vocab_;
  s.bin_mass.fill(0.0);
  int64_t i = 0;
  const uint16_t* lb = s.log_bins.data();
  for (; i + kWays <= n; i += kWays)
    for (int32_t j = 0; j < kWays; ++j) s.bin_mass[lb[i + j] * kWays + j] += w[i + j];
  for (; i < n; ++i) s.bin_mass[lb[i] * kWays] += w[i];
  auto& mass = s.sub_mass;  // one histogram per level, the ways folded
  double total = 0.0;
  for (int32_t b = 0; b < kBins; ++b) {
    double m = 0.0;
    for (int32_t j = 0; j < kWays; ++j) m += s.bin_mass[static_cast<size_t>(b * kWays + j)];
    mass[static_cast<size_t>(b)] = m;
    total += m;
  }
  const double target = static_cast<double>(params_.top_p) * total;
  // The first bin of a level whose cumulative mass reaches the target; cum: the mass before.
  double cum = 0.0;
  auto crossing = [&](uint32_t last) {
    for (uint32_t b = 0; b < last; ++b) {
      if (cum + mass[b] >= target) return b;
      cum += mass[b];
    }
    return last;
  };
  const int32_t kb = static_cast<int32_t>(crossing(kBins - 1));
  // The bin's weights: d in [kb << 18, (kb + 1) << 18), the last bin everything below.
  const uint32_t d_lo = static_cast<uint32_t>(kb) << 18;
  const float hi = kb == 0 ? HUGE_VALF : std::bit_cast<float>(kernels::kLogOne - d_lo);
  const float lo =
      kb == kBins - 1 ? 0.0f : std::bit_cast<float>(kernels::kLogOne - ((static_cast<uint32_t>(kb) + 1) << 18) + 1);
  int32_t* ids = s.ids.data();
  int64_t m = kernels::gather_between(w, n, lo, hi, ids, s.block_max.data());
  // Refine by the lower bits of d (weights descending as the field ascends), keeping the ids
  // in ascending order; the last bin mixes scales and is only sorted (it holds weights below
  // 2^-32, reached by top_p within ~1e-9 of 1).
  struct Level {
    int shift;
    uint32_t mask;
  };
  constexpr Level kLevels[] = {{8, 1023u}, {0, 255u}};
  for (const Level& lv : kLevels) {
    if (kb == kBins - 1 || m <= 64) break;
    mass.fill(0.0);
    for (int64_t j = 0; j < m; ++j) {
      const float x = w[ids[j]];
      mass[(kernels::log_dist(x) >> lv.shift) & lv.mask] += x;
    }
    const uint32_t sb = crossing(lv.mask);
    int64_t kept = 0;
    for (int64_t j = 0; j < m; ++j)
      if (((kernels::log_dist(w[ids[j]]) >> lv.shift) & lv.mask) == sb) ids[kept++] = ids[j];
    m = kept;
  }
  auto& cand = s.candidates;
  cand.clear();
  for (int64_t j = 0; j < m; ++j) cand.push_back({ids[j], 0.0f, w[ids[j]]});
  std::sort(cand.begin(), cand.end(), before);
  Cut c;
  c.cut = {w[top_], static_cast<int32_t>(top_)};
  for (size_t j = 0; j < cand.size(); ++j) {
    const bool first = j == 0 && cum == 0.0;  // nothing before it: the chain keeps it
    if (!first && cum >= target) break;
    cum += cand[j].w;
    c.cut = {cand[j].w, cand[j].id};
  }
  c.mass = cum;
  return c;
}

bool Sampler::kept(const Cut& c, const SamplerScratch& s, int64_t i) const {
  return c.all || kernels::is_kept(s.weights[static_cast<size_t>(i)], i, c.cut);
}

int32_t Sampler::draw(const Cut& c, const SamplerScratch& s) {
  std::uniform_real_distribution<double> uni(0.0, c.mass);
  const double r = uni(rng_);
  if (c.list > 0) {  // top-k: draw from the few kept, no pass over the vocabulary
    double acc = 0.0;
    for (size_t j = 0; j < c.list; ++j) {
      acc += s.candidates[j].w;
      if (r < acc) return s.candidates[j].id;
    }
    return s.candidates[0].id;
  }
  const float* w = s.weights.data();
  if (!c.all) {
    const int64_t k = kernels::draw_kept(w, n_vocab_, c.cut, r, s.block_max.data());
    return static_cast<int32_t>(k >= 0 ? k : top_);  // rounding past the total: the top token
  }
  // No truncation: skip whole runs by their sums, then walk one run.
  double acc = 0.0;
  int64_t from = 0;
  const int64_t runs = static_cast<int64_t>(s.run_sums.size());
  for (int64_t k = 0; k + 1 < runs && acc + s.run_sums[static_cast<size_t>(k)] <= r; ++k) {
    acc += s.run_sums[static_cast<size_t>(k)];
    from = (k + 1) * kernels::kExpRun;
  }
  for (int64_t i = from; i < n_vocab_; ++i) {
    acc += w[i];
    if (r < acc) return static_cast<int32_t>(i);
  }
  return static_cast<int32_t>(top_);
}

// A draw from the whole distribution is a draw from the nucleus when it lands in it, so the
// accepted draws follow the nucleus' renormalized weights exactly. Token t is in it when the
// mass ranked before it (weight descending, id ascending) is below top_p x total (the sorted
// chain's rule) and, with min-p, it weighs at least min_p x the top. One SIMD pass per try
// (kernels::kept_sum, skipping blocks lighter than t); 1 / top_p tries on average.
bool Sampler::in_nucleus(int32_t t, double total, const SamplerScratch& s) const {
  const float* w = s.weights.data();
  const float wt = w[t];
  if (params_.min_p > 0.0f && wt < w[top_] * params_.min_p) return false;
  const double target = static_cast<double>(params_.top_p) * total;
  const double before = kernels::kept_sum(w, n_vocab_, {wt, t}, s.block_max.data()) - wt;
  if (std::abs(before - target) > 1e-5 * total) return before < target;
  // The SIMD sums are f32 within runs: near the boundary (top_p close to 1) decide in f64, as
  // the sorted chain does, so the kept set is the chain's.
  double total64 = 0.0;
  for (int64_t i = 0; i < n_vocab_; ++i) total64 += w[i];
  return kernels::kept_sum_ref(w, n_vocab_, {wt, t}) - wt <
         static_cast<double>(params_.top_p) * total64;
}

int32_t Sampler::draw_nucleus(double total, SamplerScratch& s) {
  Cut all;
  all.all = true;
  all.mass = total;
  for (int32_t k = 0; k < kMaxRejections; ++k) {
    const int32_t t = draw(all, s);
    if (in_nucleus(t, total, s)) return t;
  }
  return -1;
}

int32_t Sampler::sample(const float* logits, std::span<const int32_t> history,
                        SamplerScratch& s, const uint64_t* allowed) {
  const float* l = prepare(logits, history, s, allowed);
  if (params_.temperature <= 0.0f) return static_cast<int32_t>(kernels::argmax(l, n_vocab_));
  if (nucleus_by_rejection()) {
    const int32_t t = draw_nucleus(weigh(l, s, false), s);
    if (t >= 0) return t;
    // Rejected kMaxRejections times (a heavy min-p): the exact cut, which needs the log bins.
  }
  return draw(exact_cut(l, s), s);
}

Sampler::Cut Sampler::exact_cut(const float* logits, SamplerScratch& s) {
  const double total = weigh(logits, s, true);
  if (truncates()) return find_cut(s);
  Cut c;
  c.all = true;
  c.mass = total;
  return c;
}

int32_t Sampler::sample(const float* logits, std::span<const int32_t> history) {
  if (!own_) own_ = std::make_unique<SamplerScratch>();
  return sample(logits, history, *own_);
}

void Sampler::distribution(const float* logits, std::span<const int32_t> history,
                           SamplerScratch& s, const uint64_t* allowed, float* probs) {
  const float* l = prepare(logits, history, s, allowed);
  std::fill(probs, probs + n_vocab_, 0.0f);
  if (params_.temperature <= 0.0f) {
    probs[kernels::argmax(l, n_vocab_)] = 1.0f;
    return;
  }
  // The exact cut (what draw_nucleus accepts by rejection is the same set, sampler_test).
  const Cut c = exact_cut(l, s);
  double mass = 0.0;
  for (int64_t i = 0; i < n_vocab_; ++i)
    if (kept(c, s, i)) mass += s.weights[static_cast<size_t>(i)];
  if (!(mass > 0.0)) mass = c.mass;
  const double inv = 1.0 / mass;
  for (int64_t i = 0; i < n_vocab_; ++i)
    if (kept(c, s, i))
      probs[i] = static_cast<float>(s.weights[static_cast<size_t>(i)] * inv);
}

double Sampler::uniform() { return std::uniform_real_distribution<double>(0.0, 1.0)(rng_); }

int32_t Sampler::draw_weights(const float* w, double total) {
  const double r = uniform() * total;
  double acc = 0.0;
  int32_t last = -1;
  for (int64_t i = 0; i < n_vocab_; ++i) {
    if (w[i] <= 0.0f) continue;
    acc += w[i];
    last = static_cast<int32_t>(i);
    if (r < acc) return last;
  }
  return last >= 0 ? last : 0;  // rounding past the total: the last token with weight
}

const float* Sampler::adjusted_for_testing(const float* logits,
                                          std::span<const int32_t> history) {
  if (!own_) own_ = std::make_unique<SamplerScratch>();
  return prepare(logits, history, *own_);
}

std::vector<int32_t> Sampler::kept_for_testing(const float* logits,
                                               std::span<const int32_t> history) {
  if (!own_) own_ = std::make_unique<SamplerScratch>();
  SamplerScratch& s = *own_;
  const Cut c = exact_cut(prepare(logits, history, s), s);
  std::vector<int32_t> out;
  for (int64_t i = 0; i < n_vocab_; ++i)
    if (kept(c, s, i)) out.push_back(static_cast<int32_t>(i));
  return out;
}

std::vector<int32_t> Sampler::nucleus_for_testing(const float* logits,
                                                  std::span<const int32_t> history) {
  if (!own_) own_ = std::make_unique<SamplerScratch>();
  SamplerScratch& s = *own_;
  const double total = weigh(prepare(logits, history, s), s, false);
  std::vector<int32_t> out;
  for (int64_t i = 0; i < n_vocab_; ++i)
    if (in_nucleus(static_cast<int32_t>(i), total, s)) out.push_back(static_cast<int32_t>(i));
  return out;
}

std::vector<int32_t> Sampler::kept_sorted_ref(const float* logits,
                                              std::span<const int32_t> history) {
  if (!own_) own_ = std::make_unique<SamplerScratch>();
  SamplerScratch& s = *own_;
  const float* l = prepare(logits, history, s);
  weigh(l, s, true);
  const auto& p = params_;
  std::vector<Candidate> c(static_cast<size_t>(n_vocab_));
  for (int64_t i = 0; i < n_vocab_; ++i)
    c[static_cast<size_t>(i)] = {static_cast<int32_t>(i), 0.0f, s.weights[static_cast<size_t>(i)]};
  std::sort(c.begin(), c.end(), before);
  size_t n = c.size();
  if (p.top_k > 0 && static_cast<size_t>(p.top_k) < n) n = static_cast<size_t>(p.top_k);
  double z = 0.0;
  for (size_t i = 0; i < n; ++i) z += c[i].w;
  if (p.top_p < 1.0f) {
    double cum = 0.0;
    for (size_t i = 0; i < n; ++i) {
      cum += c[i].w;
      if (cum >= static_cast<double>(p.top_p) * z) {
        n = i + 1;
        break;
      }
    }
  }
  if (p.min_p > 0.0f) {
    const float thr = c[0].w * p.min_p;
    size_t keep = 1;
    while (keep < n && c[keep].w >= thr) ++keep;
    n = keep;
  }
  std::vector<int32_t> out;
  for (size_t i = 0; i < n; ++i) out.push_back(c[i].id);
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace hinge
