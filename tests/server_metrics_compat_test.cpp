// --metrics-compat vllm (server/metrics_compat.h): the hinge: series autoscalers and routers read
// are repeated under vLLM's names, with the same labels, help, type and values; histograms keep
// their _bucket / _sum / _count; kv_cache_usage_perc is also vLLM's older gpu_cache_usage_perc;
// nothing else is copied.
#include <gtest/gtest.h>

#include <string>

#include "server/metrics_compat.h"

namespace hinge::server {
namespace {

TEST(ServerMetricsCompat, VllmNamesRepeatTheHingeSeries) {
  const std::string text =
      "# HELP hinge:num_requests_waiting Requests waiting.\n"
      "# TYPE hinge:num_requests_waiting gauge\n"
      "hinge:num_requests_waiting{model_name=\"m\"} 3\n"
      "# TYPE hinge:kv_cache_usage_perc gauge\n"
      "hinge:kv_cache_usage_perc{model_name=\"m\"} 0.25\n"
      "# TYPE hinge:time_to_first_token_seconds histogram\n"
      "hinge:time_to_first_token_seconds_bucket{model_name=\"m\",le=\"0.1\"} 2\n"
      "hinge:time_to_first_token_seconds_sum{model_name=\"m\"} 0.15\n"
      "hinge:time_to_first_token_seconds_count{model_name=\"m\"} 2\n"
      "hinge:kv_evictions_total{model_name=\"m\"} 7\n"
      "hinge:memory_budget_bytes{model_name=\"m\"} 100\n"
      "# a comment\n";
  const std::string out = vllm_compat_metrics(text);
  EXPECT_NE(out.find("# HELP vllm:num_requests_waiting Requests waiting.\n"), std::string::npos) << out;
  EXPECT_NE(out.find("# TYPE vllm:num_requests_waiting gauge\n"), std::string::npos);
  EXPECT_NE(out.find("vllm:num_requests_waiting{model_name=\"m\"} 3\n"), std::string::npos);
  EXPECT_NE(out.find("vllm:kv_cache_usage_perc{model_name=\"m\"} 0.25\n"), std::string::npos);
  EXPECT_NE(out.find("vllm:gpu_cache_usage_perc{model_name=\"m\"} 0.25\n"), std::string::npos);
  EXPECT_NE(out.find("vllm:time_to_first_token_seconds_bucket{model_name=\"m\",le=\"0.1\"} 2\n"), std::string::npos);
  EXPECT_NE(out.find("vllm:time_to_first_token_seconds_sum{model_name=\"m\"} 0.15\n"), std::string::npos);
  EXPECT_NE(out.find("vllm:time_to_first_token_seconds_count{model_name=\"m\"} 2\n"), std::string::npos);
  EXPECT_NE(out.find("vllm:kv_block_evictions_total{model_name=\"m\"} 7\n"), std::string::npos);
  EXPECT_EQ(out.find("memory_budget"), std::string::npos);  // not a vLLM metric
  EXPECT_EQ(out.find("hinge:"), std::string::npos);
  EXPECT_EQ(out.find("comment"), std::string::npos);
  EXPECT_TRUE(vllm_compat_metrics("").empty());
}

}  // namespace
}  // namespace hinge::server
