#include "server/metrics_compat.h"

#include <array>
#include <utility>

namespace hinge::server {

namespace {

// hinge name -> vLLM names (the same meaning; docs/serving.md lists them).
constexpr std::array<std::pair<std::string_view, std::string_view>, 19> kNames{{
    {"num_requests_running", "num_requests_running"},
    {"num_requests_waiting", "num_requests_waiting"},
    {"kv_cache_usage_perc", "kv_cache_usage_perc"},
    {"kv_cache_usage_perc", "gpu_cache_usage_perc"},
    {"prefix_cache_queries_total", "prefix_cache_queries_total"},
    {"prefix_cache_hits_total", "prefix_cache_hits_total"},
    {"num_preemptions_total", "num_preemptions_total"},
    {"prompt_tokens_total", "prompt_tokens_total"},
    {"generation_tokens_total", "generation_tokens_total"},
    {"request_success_total", "request_success_total"},
    {"time_to_first_token_seconds", "time_to_first_token_seconds"},
    {"inter_token_latency_seconds", "inter_token_latency_seconds"},
    {"inter_token_latency_seconds", "time_per_output_token_seconds"},
    {"e2e_request_latency_seconds", "e2e_request_latency_seconds"},
    {"request_queue_time_seconds", "request_queue_time_seconds"},
    {"kv_evictions_total", "kv_block_evictions_total"},
    {"spec_verifications_total", "spec_decode_num_drafts_total"},
    {"spec_draft_tokens_total", "spec_decode_num_draft_tokens_total"},
    {"spec_accepted_tokens_total", "spec_decode_num_accepted_tokens_total"},
}};

// The metric a line belongs to: "hinge:NAME" after "# HELP " / "# TYPE " or at the start, up to
// '{', ' ', or a histogram's _bucket/_sum/_count suffix (kept in *suffix).
bool family_of(std::string_view line, std::string_view* prefix, std::string_view* family,
               std::string_view* rest) {
  size_t at = 0;
  if (line.starts_with("# HELP ") || line.starts_with("# TYPE ")) at = 7;
  else if (line.starts_with("#")) return false;
  if (line.substr(at, 6) != "hinge:") return false;
  const size_t begin = at + 6;
  size_t end = line.find_first_of("{ ", begin);
  if (end == std::string_view::npos) end = line.size();
  *prefix = line.substr(0, at);
  *family = line.substr(begin, end - begin);
  *rest = line.substr(end);
  return true;
}

}  // namespace

std::string vllm_compat_metrics(std::string_view text) {
  std::string out;
  for (const auto& [hinge_name, vllm_name] : kNames) {
    size_t pos = 0;
    while (pos < text.size()) {
      size_t nl = text.find('\n', pos);
      if (nl == std::string_view::npos) nl = text.size();
      const std::string_view line = text.substr(pos, nl - pos);
      pos = nl + 1;
      std::string_view prefix, family, rest;
      if (!family_of(line, &prefix, &family, &rest)) continue;
      std::string_view suffix;
      if (family != hinge_name) {
        bool matched = false;
        for (std::string_view s : {"_bucket", "_sum", "_count"})
          if (family.size() == hinge_name.size() + s.size() && family.starts_with(hinge_name) &&
              family.ends_with(s) && prefix.empty()) {
            suffix = s;
            matched = true;
          }
        if (!matched) continue;
      }
      out.append(prefix).append("vllm:").append(vllm_name).append(suffix).append(rest);
      out.push_back('\n');
    }
  }
  return out;
}

}  // namespace hinge::server
