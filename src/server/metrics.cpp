#include "server/metrics.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace hinge::server {

namespace {
constexpr size_t kHistoryPoints = 300;

// vLLM's buckets, with finer low ends (small models on a CPU answer in milliseconds).
std::vector<double> ttft_buckets() {
  return {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0,
          2.5,   5.0,   7.5,  10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0};
}
std::vector<double> itl_buckets() {
  return {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3,
          0.4,   0.5,    0.75,  1.0,  2.5,   5.0,  7.5,   10.0, 20.0, 40.0, 80.0};
}
std::vector<double> e2e_buckets() {
  return {0.01, 0.05, 0.1,  0.3,  0.5,  0.8,  1.0,   1.5,   2.0,   2.5,    5.0,   10.0, 15.0,
          20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0};
}
std::string fmt_double(double v) {
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  return fmt::format("{}", v);
}
std::string escape_label(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '\\' || c == '"') o += '\\';
    if (c == '\n') {
      o += "\\n";
      continue;
    }
    o += c;
  }
  return o;
}
}  // namespace

void prometheus_header(std::string* out, std::string_view name, const char* type,
                       const char* help) {
  *out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
}

Histogram::Histogram(std::vector<double> upper_bounds)
    : bounds_(std::move(upper_bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double v) {
  if (!std::isfinite(v)) return;
  const size_t i = static_cast<size_t>(std::lower_bound(bounds_.begin(), bounds_.end(), v) - bounds_.begin());
  ++counts_[i];
  ++count_;
  sum_ += v;
}

void Histogram::render(const std::string& name, const std::string& labels,
                       std::string* out) const {
  int64_t cum = 0;
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    cum += counts_[i];
    const std::string le = i < bounds_.size() ? fmt_double(bounds_[i]) : "+Inf";
    *out += fmt::format("{}_bucket{{{},le=\"{}\"}} {}\n", name, labels, le, cum);
  }
  *out += fmt::format("{}_sum{{{}}} {}\n{}_count{{{}}} {}\n", name, labels, fmt_double(sum_),
                      name, labels, count_);
}

Metrics::Metrics(std::string model_name)
    : labels_(fmt::format("model_name=\"{}\"", escape_label(model_name))),
      ttft_(ttft_buckets()),
      itl_(itl_buckets()),
      e2e_(e2e_buckets()),
      queue_(e2e_buckets()) {}

void Metrics::request_received() {
  std::lock_guard lock(mu_);
  ++received_;
}
void Metrics::request_accepted(double queue_seconds, int64_t prompt_tokens) {
  std::lock_guard lock(mu_);
  ++accepted_;
  prompt_tokens_ += prompt_tokens;
  queue_.observe(queue_seconds);
}
void Metrics::request_rejected(const std::string& reason) {
  std::lock_guard lock(mu_);
  ++rejected_[reason];
}
void Metrics::request_finished(const std::string& finish_reason, double e2e_seconds) {
  std::lock_guard lock(mu_);
  ++finished_[finish_reason];
  e2e_.observe(e2e_seconds);
}
void Metrics::first_token(double ttft_seconds) {
  std::lock_guard lock(mu_);
  ttft_.observe(ttft_seconds);
  iv_ttft_sum_ += ttft_seconds;
  ++iv_ttft_n_;
}
void Metrics::inter_token(double seconds, int64_t tokens) {
  if (tokens <= 0) return;
  std::lock_guard lock(mu_);
  // A delta of k tokens after a gap: k observations of gap / k (tokens of one step arrive
  // together, as vLLM counts them).
  const double per = seconds / static_cast<double>(tokens);
  for (int64_t i = 0; i < tokens; ++i) itl_.observe(per);
  iv_itl_sum_ += seconds;
  iv_itl_n_ += tokens;
}
void Metrics::tokens_generated(int64_t n) {
  std::lock_guard lock(mu_);
  generation_tokens_ += n;
  iv_tokens_ += n;
}
void Metrics::http_response(int status) {
  std::lock_guard lock(mu_);
  ++http_[status];
}
void Metrics::request_aborted(const std::string& reason) {
  std::lock_guard lock(mu_);
  ++aborted_[reason];
}

int64_t Metrics::received() const {
  std::lock_guard lock(mu_);
  return received_;
}
int64_t Metrics::accepted() const {
  std::lock_guard lock(mu_);
  return accepted_;
}
int64_t Metrics::rejected_total() const {
  std::lock_guard lock(mu_);
  int64_t n = 0;
  for (const auto& [k, v] : rejected_) n += v;
  return n;
}

std::string Metrics::render_prometheus(const EngineThreadStats& s) const {
  std::lock_guard lock(mu_);
  std::string o;
  const std::string& L = labels_;
  auto gauge = [&](const char* name, const char* help, double v) {
    const std::string n = std::string("hinge:") + name;
    prometheus_header(&o, n, "gauge", help);
    o += fmt::format("{}{{{}}} {}\n", n, L, fmt_double(v));
  };
  auto counter = [&](const char* name, const char* help, double v) {
    const std::string n = std::string("hinge:") + name;
    prometheus_header(&o, n, "counter", help);
    o += fmt::format("{}{{{}}} {}\n", n, L, fmt_double(v));
  };
  const EngineStats& e = s.engine;
  const int32_t queued =
      s.admission ? s.admission->queued_interactive + s.admission->queued_batch : 0;
  gauge("num_requests_running", "Sequences in the running batch.", e.running);
  gauge("num_requests_waiting", "Requests waiting: admission queue plus the scheduler's queue.",
        queued + e.waiting);
  const double usage = e.kv_blocks_total > 0 ? static_cast<double>(e.kv_blocks_used) / e.kv_blocks_total : 0;
  gauge("kv_cache_usage_perc", "Fraction of KV blocks referenced by requests (1 = full).", usage);
  gauge("kv_blocks_total", "KV blocks in the arena.", e.kv_blocks_total);
  gauge("kv_blocks_free", "KV blocks not referenced by any request (includes cached).",
        e.kv_blocks_total - e.kv_blocks_used - e.kv_blocks_withheld);
  gauge("kv_blocks_cached", "Free KV blocks still holding a reusable prefix.",
        e.kv.pool.num_cached_free_blocks);
  gauge("kv_blocks_shared", "KV blocks referenced by more than one request.",
        e.kv.pool.num_shared_blocks);
  gauge("kv_blocks_reserved", "KV blocks reserved by admission control (worst case).",
        s.admission ? s.admission->reserved_blocks : 0);
  counter("prefix_cache_queries_total", "Prompt tokens looked up in the prefix cache.",
          static_cast<double>(e.kv.num_prefix_query_tokens));
  counter("prefix_cache_hits_total", "Prompt tokens found in the prefix cache.",
          static_cast<double>(e.kv.num_prefix_hit_tokens));
  counter("prefix_cache_public_hits_total",
          "Of the hits, tokens in operator-declared public-prefix blocks (--tenants).",
          static_cast<double>(e.kv.num_prefix_public_hit_tokens));
  counter("kv_quota_evictions_total",
          "Cached KV blocks dropped because their tenant was over its cache_share.",
          static_cast<double>(e.kv.pool.num_quota_evictions));
  counter("kv_expired_total", "Cached KV blocks dropped past their tenant's cache TTL.",
          static_cast<double>(e.kv.pool.num_expired));
  counter("context_shifts_total",
          "Context shifts (--context-policy shift): whole blocks dropped after the sinks.",
          static_cast<double>(e.context_shifts));
  counter("context_dropped_tokens_total", "Tokens context shifts dropped from sequences.",
          static_cast<double>(e.context_dropped_tokens));
  counter("num_preemptions_total", "Preemptions (recompute) under KV pressure.",
          static_cast<double>(e.preemptions));
  counter("kv_evictions_total", "Cached KV blocks evicted for reuse.",
          static_cast<double>(e.kv.pool.num_evictions));
  {
    const PressureStats& p = s.pressure;
    gauge("memory_pressure_level", "Memory pressure level: 0 normal, 1 elevated, 2 critical.",
          static_cast<int>(p.level));
    gauge("thermal_pressure_level",
          "Temperature level (thermal zones' trip points): 0 normal, 1 elevated, 2 critical.",
          static_cast<int>(p.thermal));
    const std::string n = "hinge:memory_pressure_transitions_total";
    prometheus_header(&o, n, "counter", "Entries into each memory-pressure level.");
    for (int l = 0; l < 3; ++l)
      o += fmt::format("{}{{{},level=\"{}\"}} {}\n", n, L,
                       pressure::pressure_level_name(static_cast<pressure::PressureLevel>(l)),
                       p.transitions[l]);
    counter("memory_pressure_rejected_total",
            "Requests answered 503 while critical memory pressure paused admission.",
            static_cast<double>(p.rejected));
    counter("memory_pressure_capped_total",
            "New requests whose max_tokens was lowered under memory pressure.",
            static_cast<double>(p.capped));
    counter("memory_pressure_reclaimed_bytes_total",
            "What RSS fell by when KV cache pages were returned to the OS (madvise) under memory pressure.",
            static_cast<double>(e.kv_bytes_released));
    gauge("kv_blocks_withheld", "KV blocks taken out of use under memory pressure.",
          e.kv_blocks_withheld);
    gauge("kv_blocks_limit", "KV blocks usable now (the total unless under memory pressure).",
          e.kv_blocks_limit);
    gauge("max_num_seqs_now", "Running-sequence limit now (lowered under memory pressure).",
          e.max_num_seqs_now);
    gauge("max_batched_tokens_now", "Step token budget now (lowered under memory pressure).",
          e.max_batched_tokens_now);
    gauge("memory_budget_bytes", "The memory budget held while running (0: none).",
          static_cast<double>(e.memory_budget_bytes));
    gauge("process_resident_bytes", "RSS at the memory budget's last reading (0: no budget).",
          static_cast<double>(e.rss_bytes));
    gauge("process_resident_peak_bytes", "The highest RSS the memory budget's readings saw.",
          static_cast<double>(e.rss_peak_bytes));
    gauge("kv_resident_bytes", "KV arena bytes resident at the memory budget's last reading.",
          static_cast<double>(e.kv_resident_bytes));
    gauge("memory_budget_kv_limit_blocks",
          "KV blocks the memory budget leaves beside the rest of the process (the total: no limit).",
          e.memory_budget_kv_limit_blocks);
    counter("memory_budget_limited_total",
            "Memory budget readings that held the KV cache below its total.",
            static_cast<double>(e.memory_budget_limited));
    counter("memory_budget_overshoots_total",
            "Steps the memory budget's KV limit gave way so that one request could go on.",
            static_cast<double>(e.memory_budget_overshoots));
    counter("kv_trimmed_bytes_total",
            "Bytes of free KV blocks returned to the OS beyond the low watermark.",
            static_cast<double>(e.kv_trimmed_bytes));
    gauge("threads_active", "Compute threads in use now (fewer while other programs take cores).",
          e.threads_active);
    gauge("cpu_others_cores",
          "Cores of this process's CPU set other programs used at the last reading.",
          e.cpu_others_cores);
    counter("thread_changes_total", "Times the compute thread count followed the free cores.",
            static_cast<double>(e.thread_changes));
  }
  counter("spec_verifications_total",
          "Speculative decoding: request-steps that verified draft tokens.",
          static_cast<double>(e.spec_verifications));
  counter("spec_draft_tokens_total", "Speculative decoding: draft tokens verified.",
          static_cast<double>(e.spec_draft_tokens));
  counter("spec_accepted_tokens_total", "Speculative decoding: draft tokens accepted.",
          static_cast<double>(e.spec_accepted_tokens));
  counter("spec_draft_model_tokens_total",
          "Speculative decoding with a draft model: tokens the draft model computed (its "
          "catch-up and its drafts).",
          static_cast<double>(e.spec_draft_model_tokens));
  counter("spec_draft_model_seconds_total",
          "Speculative decoding with a draft model: time spent proposing drafts.",
          e.spec_draft_model_seconds);
  counter("prompt_tokens_total", "Prompt tokens of accepted requests.",
          static_cast<double>(prompt_tokens_));
  counter("generation_tokens_total", "Tokens generated.", static_cast<double>(generation_tokens_));
  counter("requests_received_total", "Generation requests received (valid JSON or not).",
          static_cast<double>(received_));
  counter("requests_accepted_total", "Generation requests admitted into the engine.",
          static_cast<double>(accepted_));
  {
    const std::string n = "hinge:requests_rejected_total";
    prometheus_header(&o, n, "counter", "Generation requests not admitted, by reason.");
    for (const char* r : {"invalid", "too_large", "user_limit", "queue_full", "queue_timeout",
                          "shutting_down", "memory_pressure", "cancelled"})
      if (!rejected_.contains(r)) o += fmt::format("{}{{{},reason=\"{}\"}} 0\n", n, L, r);
    for (const auto& [r, v] : rejected_)
      o += fmt::format("{}{{{},reason=\"{}\"}} {}\n", n, L, escape_label(r), v);
  }
  {
    const std::string n = "hinge:requests_aborted_total";
    prometheus_header(&o, n, "counter", "Requests cancelled because their connection closed, by reason.");
    for (const char* r : {"client_gone", "client_too_slow"})
      if (!aborted_.contains(r)) o += fmt::format("{}{{{},reason=\"{}\"}} 0\n", n, L, r);
    for (const auto& [r, v] : aborted_)
      o += fmt::format("{}{{{},reason=\"{}\"}} {}\n", n, L, escape_label(r), v);
  }
  {
    const std::string n = "hinge:request_success_total";
    prometheus_header(&o, n, "counter", "Requests finished, by finish reason.");
    for (const auto& [r, v] : finished_)
      o += fmt::format("{}{{{},finished_reason=\"{}\"}} {}\n", n, L, escape_label(r), v);
  }
  {
    const std::string n = "hinge:http_responses_total";
    prometheus_header(&o, n, "counter", "HTTP responses by status code.");
    for (const auto& [st, v] : http_) o += fmt::format("{}{{code=\"{}\"}} {}\n", n, st, v);
  }
  auto hist = [&](const char* name, const char* help, const Histogram& h) {
    const std::string n = std::string("hinge:") + name;
    prometheus_header(&o, n, "histogram", help);
    h.render(n, L, &o);
  };
  hist("time_to_first_token_seconds", "Time from request arrival to its first token.", ttft_);
  hist("inter_token_latency_seconds", "Time between tokens of a stream.", itl_);
  hist("e2e_request_latency_seconds", "Time from arrival to the last token.", e2e_);
  hist("request_queue_time_seconds", "Time waiting for admission.", queue_);
  return o;
}

void Metrics::tick(double now_s, const EngineThreadStats& s) {
  std::lock_guard lock(mu_);
  MetricsPoint p;
  p.t = now_s;
  p.ttft_mean_s = iv_ttft_n_ ? iv_ttft_sum_ / static_cast<double>(iv_ttft_n_) : 0;
  p.itl_mean_s = iv_itl_n_ ? iv_itl_sum_ / static_cast<double>(iv_itl_n_) : 0;
  const double dt = now_s - iv_start_;
  p.output_tokens_per_s = dt > 0 ? static_cast<double>(iv_tokens_) / dt : 0;
  p.running = s.engine.running;
  p.waiting = s.engine.waiting +
              (s.admission ? s.admission->queued_interactive + s.admission->queued_batch : 0);
  p.kv_usage = s.engine.kv_blocks_total > 0
                   ? static_cast<double>(s.engine.kv_blocks_used) / s.engine.kv_blocks_total
                   : 0;
  history_.push_back(p);
  if (history_.size() > kHistoryPoints) history_.pop_front();
  iv_ttft_sum_ = iv_itl_sum_ = 0;
  iv_ttft_n_ = iv_itl_n_ = iv_tokens_ = 0;
  iv_start_ = now_s;
}

nlohmann::json Metrics::history_json() const {
  std::lock_guard lock(mu_);
  nlohmann::json a = nlohmann::json::array();
  for (const MetricsPoint& p : history_)
    a.push_back({{"t", p.t}, {"ttft_mean_s", p.ttft_mean_s}, {"itl_mean_s", p.itl_mean_s},
                 {"output_tokens_per_s", p.output_tokens_per_s}, {"running", p.running},
                 {"waiting", p.waiting}, {"kv_usage", p.kv_usage}});
  return a;
}

nlohmann::json Metrics::counters_json() const {
  std::lock_guard lock(mu_);
  nlohmann::json j;
  j["requests_received"] = received_;
  j["requests_accepted"] = accepted_;
  j["requests_rejected"] = rejected_;
  j["requests_finished"] = finished_;
  j["requests_aborted"] = aborted_;
  j["prompt_tokens"] = prompt_tokens_;
  j["generation_tokens"] = generation_tokens_;
  j["ttft_count"] = ttft_.count();
  j["ttft_mean_s"] = ttft_.count() ? ttft_.sum() / static_cast<double>(ttft_.count()) : 0.0;
  j["itl_mean_s"] = itl_.count() ? itl_.sum() / static_cast<double>(itl_.count()) : 0.0;
  return j;
}

std::string render_transport_metrics(const http::ServerStats& s, const std::string& labels) {
  std::string o;
  auto one = [&](const char* name, const char* type, const char* help, int64_t v) {
    const std::string n = std::string("hinge:") + name;
    prometheus_header(&o, n, type, help);
    o += fmt::format("{}{{{}}} {}\n", n, labels, v);
  };
  one("http_connections", "gauge", "Open HTTP connections.", s.connections);
  one("http_connections_max", "gauge", "The connection limit (--max-connections).", s.max_connections);
  one("http_output_bytes_queued", "gauge", "Response bytes queued, not yet written.",
      s.output_bytes_queued);
  one("http_connections_refused_total", "counter",
      "Connections answered 503 at the connection limit or out of descriptors.",
      s.connections_refused);
  one("http_connections_evicted_total", "counter",
      "Idle keep-alive connections closed to make room for a new one.", s.connections_evicted);
  one("http_accept_backoffs_total", "counter", "Accept pauses on EMFILE / ENFILE.",
      s.accept_backoffs);
  one("http_clients_too_slow_total", "counter",
      "Connections cut because the client stopped reading.", s.clients_too_slow);
  const std::string n = "hinge:http_timeouts_total";
  prometheus_header(&o, n, "counter", "Connections closed by a read deadline, by phase.");
  o += fmt::format("{}{{{},phase=\"idle\"}} {}\n", n, labels, s.timeouts_idle);
  o += fmt::format("{}{{{},phase=\"header\"}} {}\n", n, labels, s.timeouts_header);
  o += fmt::format("{}{{{},phase=\"body\"}} {}\n", n, labels, s.timeouts_body);
  return o;
}

}  // namespace hinge::server
