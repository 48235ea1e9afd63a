#include "eval/kv_eval.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "engine/kv_calibration.h"
#include "model/transformer.h"

namespace hinge {
namespace {

// All-position logits of `tokens` with a KV cache of the given dtypes.
Status all_logits(const LoadedModel& m, std::span<const int32_t> tokens, kv::KvDtype k,
                  kv::KvDtype v, ThreadPool& pool, int64_t chunk, std::vector<float>* out) {
  Transformer model(m.config, m.weights, pool, chunk, m.file_mappings);
  KvCache cache(m.config, static_cast<int64_t>(tokens.size()), k, v);
  // Calibrated as the engine does (kv_calibration.h), not from the text under test.
  HINGE_RETURN_IF_ERROR(calibrate_kv(model, cache.arena(), static_cast<int32_t>(chunk)).status());
  out->assign(tokens.size() * static_cast<size_t>(m.config.n_vocab), 0.0f);
  return model.forward(tokens, cache, out->data(), /*all_logits=*/true);
}

// log-softmax of row into lp.
void log_softmax(const float* row, int64_t n, std::vector<double>* lp) {
  double mx = row[0];
  for (int64_t i = 1; i < n; ++i) mx = std::max<double>(mx, row[i]);
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += std::exp(row[i] - mx);
  const double lse = mx + std::log(sum);
  lp->resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) (*lp)[static_cast<size_t>(i)] = row[i] - lse;
}

}  // namespace

StatusOr<KvEvalResult> evaluate_kv_dtype(const LoadedModel& m, std::span<const int32_t> tokens,
                                         kv::KvDtype k_dtype, kv::KvDtype v_dtype,
                                         ThreadPool& pool, int64_t chunk) {
  if (tokens.size() < 2) return Status::Error("kv eval: needs at least 2 tokens");
  if (static_cast<int64_t>(tokens.size()) > m.config.context_length)
    return Status::Errorf("kv eval: {} tokens exceed the context size {}", tokens.size(),
                         m.config.context_length);
  std::vector<float> ref, got;
  HINGE_RETURN_IF_ERROR(all_logits(m, tokens, kv::KvDtype::kF32, kv::KvDtype::kF32, pool, chunk, &ref));
  HINGE_RETURN_IF_ERROR(all_logits(m, tokens, k_dtype, v_dtype, pool, chunk, &got));
  const int64_t nv = m.config.n_vocab;
  KvEvalResult r;
  r.positions = static_cast<int64_t>(tokens.size()) - 1;  // the last prediction has no target
  int64_t agree = 0;
  double kl_sum = 0;
  std::vector<double> lp, lq;
  for (int64_t t = 0; t < r.positions; ++t) {
    const float* a = &ref[static_cast<size_t>(t * nv)];
    const float* b = &got[static_cast<size_t>(t * nv)];
    if (std::max_element(a, a + nv) - a == std::max_element(b, b + nv) - b) ++agree;
    log_softmax(a, nv, &lp);
    log_softmax(b, nv, &lq);
    double kl = 0;
    for (int64_t i = 0; i < nv; ++i) {
      const double p = std::exp(lp[static_cast<size_t>(i)]);
      kl += p * (lp[static_cast<size_t>(i)] - lq[static_cast<size_t>(i)]);
    }
    kl = std::max(0.0, kl);
    kl_sum += kl;
    r.max_kl = std::max(r.max_kl, kl);
  }
  r.top1_agreement = static_cast<double>(agree) / static_cast<double>(r.positions);
  r.mean_kl = kl_sum / static_cast<double>(r.positions);
  const kv::KvSpec spec = kv_spec_for(m.config, k_dtype, v_dtype);
  r.bytes_per_token = spec.bytes_per_token();
  return r;
}

}  // namespace hinge
