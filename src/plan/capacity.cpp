#include "plan/capacity.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <numeric>

namespace hinge::plan {
namespace {

const std::array<Accelerator, 6> kAccelerators = {{
    {"h100-80gb", 80e9, 3.35e12, 989e12, "NVIDIA H100 SXM5 data sheet: 80 GB HBM3, 3.35 TB/s, 989 TFLOP/s dense BF16"},
    {"h200-141gb", 141e9, 4.8e12, 989e12, "NVIDIA H200 SXM data sheet: 141 GB HBM3e, 4.8 TB/s, 989 TFLOP/s dense BF16"},
    {"a100-80gb", 80e9, 2.039e12, 312e12, "NVIDIA A100 SXM4 80GB data sheet: 2,039 GB/s, 312 TFLOP/s dense BF16"},
    {"a100-40gb", 40e9, 1.555e12, 312e12, "NVIDIA A100 SXM4 40GB data sheet: 1,555 GB/s, 312 TFLOP/s dense BF16"},
    {"l4-24gb", 24e9, 300e9, 121e12, "NVIDIA L4 data sheet: 24 GB GDDR6, 300 GB/s, 121 TFLOP/s dense BF16"},
    {"mi300x-192gb", 192e9, 5.3e12, 1307e12, "AMD Instinct MI300X data sheet: 192 GB HBM3, 5.3 TB/s, 1,307 TFLOP/s dense BF16"},
}};

}  // namespace

std::span<const Accelerator> accelerator_presets() { return kAccelerators; }

const Accelerator* find_accelerator(std::string_view name) {
  for (const Accelerator& a : kAccelerators)
    if (a.name == name) return &a;
  return nullptr;
}

Plan make_plan(const PlanInput& in, const Accelerator& acc) {
  Plan p;
  const double gpus = static_cast<double>(std::max(1, in.gpus));
  p.memory_bytes = gpus * acc.memory_bytes;
  p.usable_bytes = p.memory_bytes * (1.0 - in.headroom);
  p.weight_bytes = in.model.params_billion * 1e9 * in.weight_bytes_per_param;
  p.kv_budget_bytes = p.usable_bytes - p.weight_bytes;
  const std::vector<int64_t> lengths =
      in.lengths.empty() ? std::vector<int64_t>{in.context} : in.lengths;
  p.mean_tokens = static_cast<double>(std::accumulate(lengths.begin(), lengths.end(), int64_t{0})) /
                  static_cast<double>(lengths.size());
  p.max_model_len = in.max_model_len > 0
                        ? in.max_model_len
                        : std::max<int64_t>(in.model.max_context,
                                            *std::max_element(lengths.begin(), lengths.end()));
  for (const char* dtype : {"f16", "fp8", "int4"}) {
    PlanRow r;
    r.dtype = dtype;
    const double e = *kv_element_bytes(dtype);
    // The mean request's KV (a window makes it non-linear in the length: mean over requests).
    double sum = 0;
    for (int64_t n : lengths) sum += kv_bytes_per_request(in.model, n, e);
    r.kv_per_request_bytes = sum / static_cast<double>(lengths.size());
    r.kv_per_slot_bytes = kv_bytes_per_request(in.model, p.max_model_len, e);
    if (p.kv_budget_bytes > 0) {
      r.paged_requests = static_cast<int64_t>(std::floor(p.kv_budget_bytes / r.kv_per_request_bytes));
      r.contiguous_requests = static_cast<int64_t>(std::floor(p.kv_budget_bytes / r.kv_per_slot_bytes));
    }
    if (r.paged_requests > 0 && acc.bandwidth_bytes_per_s > 0) {
      // Each step reads the weights once and every request's KV (on average half its length
      // is cached over a request's decode; the mean request's KV is the upper bound used).
      r.step_seconds = (p.weight_bytes + static_cast<double>(r.paged_requests) * r.kv_per_request_bytes) /
                       (gpus * acc.bandwidth_bytes_per_s);
      r.decode_tokens_per_s = static_cast<double>(r.paged_requests) / r.step_seconds;
    }
    p.rows.push_back(r);
  }
  return p;
}

}  // namespace hinge::plan
