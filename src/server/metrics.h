// Server metrics: Prometheus counters and histograms (names mirror vLLM's, prefixed `hinge:`),
// plus a short per-interval history the dashboard draws. Every method is thread-safe (one
// mutex; observations are a few per token, far below contention).
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/engine_thread.h"
#include "http/server.h"

namespace hinge::server {

class Histogram {
 public:
  explicit Histogram(std::vector<double> upper_bounds);
  void observe(double v);
  // Prometheus text: _bucket{le=...} (cumulative), _sum, _count.
  void render(const std::string& name, const std::string& labels, std::string* out) const;
  int64_t count() const { return count_; }
  double sum() const { return sum_; }

 private:
  std::vector<double> bounds_;
  std::vector<int64_t> counts_;  // per bucket (not cumulative), last = +Inf
  int64_t count_ = 0;
  double sum_ = 0;
};

// One point of the dashboard's history (an interval of history_interval_s).
struct MetricsPoint {
  double t = 0;             // seconds since start
  double ttft_mean_s = 0;   // of requests whose first token came in this interval (0: none)
  double itl_mean_s = 0;
  double output_tokens_per_s = 0;
  int32_t running = 0;
  int32_t waiting = 0;
  double kv_usage = 0;      // used blocks / total
};

class Metrics {
 public:
  explicit Metrics(std::string model_name);

  void request_received();
  void request_accepted(double queue_seconds, int64_t prompt_tokens);
  void request_rejected(const std::string& reason);  // queue_full, user_limit, too_large, ...
  void request_finished(const std::string& finish_reason, double e2e_seconds);
  void first_token(double ttft_seconds);
  void inter_token(double seconds, int64_t tokens);   // one observation per token after the first
  void tokens_generated(int64_t n);
  void http_response(int status);
  // A running or queued request cancelled because its connection closed: "client_gone" or
  // "client_too_slow" (it stopped reading; http/server.h).
  void request_aborted(const std::string& reason);
  const std::string& labels() const { return labels_; }  // model_name="..."

  // Prometheus text exposition (version 0.0.4) of the counters above and the engine's gauges.
  std::string render_prometheus(const EngineThreadStats& s) const;
  // Closes the current interval of the history (call every history interval).
  void tick(double now_s, const EngineThreadStats& s);
  nlohmann::json history_json() const;
  nlohmann::json counters_json() const;

  int64_t received() const;
  int64_t accepted() const;
  int64_t rejected_total() const;

 private:
  mutable std::mutex mu_;
  std::string labels_;  // model_name="..."
  int64_t received_ = 0, accepted_ = 0, generation_tokens_ = 0, prompt_tokens_ = 0;
  std::map<std::string, int64_t> rejected_;   // by reason
  std::map<std::string, int64_t> finished_;   // by finish reason
  std::map<int, int64_t> http_;               // responses by status
  std::map<std::string, int64_t> aborted_;    // by reason
  Histogram ttft_, itl_, e2e_, queue_;
  // Interval accumulators for the history.
  double iv_ttft_sum_ = 0, iv_itl_sum_ = 0;
  int64_t iv_ttft_n_ = 0, iv_itl_n_ = 0, iv_tokens_ = 0;
  double iv_start_ = 0;
  std::deque<MetricsPoint> history_;
};

// Prometheus text of the transport's counters (hinge:http_*), with `labels`.
// A family's "# HELP" and "# TYPE" lines.
void prometheus_header(std::string* out, std::string_view name, const char* type, const char* help);

std::string render_transport_metrics(const http::ServerStats& s, const std::string& labels);

}  // namespace hinge::server
