// --metrics-compat vllm: the metrics that autoscalers (KEDA, HPA adapters) and routers (llm-d's
// inference scheduler, the Gateway API inference extension, Dynamo) read from vLLM, under
// vLLM's names, next to hinge's own. Each is a copy of the hinge: series with the same labels,
// help and type; kv_cache_usage_perc is also exported as vLLM's older gpu_cache_usage_perc.
#pragma once

#include <string>
#include <string_view>

namespace hinge::server {

// The vllm: series of the hinge: ones in `hinge_text` (Prometheus text exposition).
std::string vllm_compat_metrics(std::string_view hinge_text);

}  // namespace hinge::server
