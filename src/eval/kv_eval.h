// Teacher-forced comparison of a KV storage dtype against f32 KV: the same token sequence goes
// through the model twice (f32 cache, then the dtype under test), and at every position the
// next-token distributions are compared: top-1 agreement and KL(p_f32 || p_dtype).
#pragma once

#include <cstdint>
#include <span>

#include "common/status.h"
#include "common/thread_pool.h"
#include "kv/kv_spec.h"
#include "model/loaded_model.h"

namespace hinge {

struct KvEvalResult {
  int64_t positions = 0;        // next-token predictions compared
  double top1_agreement = 0;    // fraction of positions whose argmax equals f32's
  double mean_kl = 0;           // mean KL(p_f32 || p_dtype) in nats
  double max_kl = 0;
  int64_t bytes_per_token = 0;  // KV bytes per token (all layers, K + V)
};

// `tokens` (>= 2, within the context) are fed in chunks of `chunk` tokens, so later chunks read
// earlier positions back from the quantized cache.
StatusOr<KvEvalResult> evaluate_kv_dtype(const LoadedModel& model, std::span<const int32_t> tokens,
                                         kv::KvDtype k_dtype, kv::KvDtype v_dtype,
                                         ThreadPool& pool, int64_t chunk = 64);

}  // namespace hinge
