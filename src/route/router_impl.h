// hinge route's insides, shared by router.cpp (requests: choosing, forwarding, fan-out) and
// router_backends.cpp (learning: /metrics polls, /v1/stats discovery, KV event subscriptions).
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "http/exchange.h"
#include "http/server.h"
#include "route/backend_call.h"
#include "route/prefix_index.h"
#include "route/router.h"

namespace hinge::route {

double now_s();

struct Backend {
  BackendAddress addr;
  std::atomic<int32_t> inflight{0};

  mutable std::mutex mu;
  // Guarded by mu.
  PrefixIndex prefix;
  bool healthy = false;
  double down_until = 0;  // a failed connect: skipped until then
  double waiting = 0;     // num_requests_waiting
  double kv_usage = 0;    // kv_cache_usage_perc
  int32_t block_size = 16;
  std::string events_endpoint, replay_endpoint;  // from /v1/stats (host fixed up)
  std::optional<uint64_t> last_seq;  // the last event batch applied
  bool events_live = false;          // the replay socket answered lately (or events arrive)
  double last_event_at = 0;
  int64_t routed = 0, failures = 0, events = 0, gaps = 0, replays = 0, bad_batches = 0;
  int64_t matched_blocks = 0;  // blocks of routed prompts this replica held
};

struct Job {
  http::HttpRequest request;
  http::ExchangePtr exchange;
};

struct Router::Impl {
  RouteConfig config;
  std::vector<std::unique_ptr<Backend>> backends;
  std::unique_ptr<http::Server> server;

  std::mutex mu;
  std::condition_variable cv;
  std::deque<Job> jobs;  // guarded by mu
  bool stopping = false;  // guarded by mu
  std::vector<std::thread> workers;
  std::thread poller, subscriber;
  std::atomic<bool> stop_flag{false};
  std::atomic<uint64_t> rr{0};

  // Counters.
  std::atomic<int64_t> requests{0}, retries{0}, stream_errors{0}, no_backend{0}, prompt_blocks{0};

  // router.cpp
  void handle(http::HttpRequest request, http::ExchangePtr ex);
  void work();
  void serve(Job& job);
  void generate(Job& job);
  void fan_out(Job& job);
  void forward_any(Job& job);
  // Replicas in the order to try: healthy ones by score (prefix chain given), then the rest.
  std::vector<Backend*> rank(const std::vector<uint64_t>& chain);
  // Forwards to the first of `order` that answers; false when none did (nothing sent to the
  // client yet).
  bool forward(Job& job, const std::vector<Backend*>& order, const std::vector<uint64_t>& chain);
  std::string metrics_text() const;
  std::string stats_json() const;
  http::HttpHeaders backend_headers(const http::HttpRequest& r) const;
  http::HttpHeaders own_headers() const;

  // router_backends.cpp
  void poll_loop();
  void subscribe_loop();
};

}  // namespace hinge::route
