// `hinge route`: a prefix-aware HTTP router in front of a set of hinge replicas.
//
//   learning   each replica's KV events (found in its /v1/stats, ZeroMQ SUB; a missed sequence
//              number asks the replay socket) feed a PrefixIndex per replica
//              (route/prefix_index.h); /metrics is polled for load (num_requests_waiting,
//              kv_cache_usage_perc) and health
//   choosing   a completion's token ids come from a replica's /v1/*/render; each healthy
//              replica scores prefix_weight * (consecutive cached blocks / prompt blocks)
//              + queue_weight * (1 - its share of the waiting and in-flight requests)
//              + kv_weight * (1 - kv_cache_usage_perc), as llm-d's scorers do; the best wins
//              (ties: fewest in flight). A replica whose events stopped (it served requests
//              this router sent and announced nothing for a while) scores no prefix: with no
//              events anywhere routing is by load alone. --policy round-robin / least-load
//              ignore prefixes (baselines).
//   forwarding the request as received (Authorization included); a streamed (SSE) answer is
//              passed through as it arrives, any other answer whole. A replica that refuses
//              the connection or dies before answering is marked down and the request goes to
//              the next best; one that dies mid-stream ends that stream with an SSE error
//              event (a whole answer: a 502), never a hang. A client that leaves aborts the
//              replica's request.
//   fan-out    POST /reset_prefix_cache and /admin/... go to every replica (a purge is per
//              replica); GET /v1/models and other reads go to one healthy replica.
// Own endpoints: GET /health, GET /metrics (hinge_route:*), GET /route/stats (JSON).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"

namespace hinge::route {

struct RouteConfig {
  std::vector<std::string> backends;  // http://HOST:PORT
  std::string host = "127.0.0.1";
  uint16_t port = 8000;
  std::string policy = "prefix";  // prefix | round-robin | least-load
  double prefix_weight = 2.0;
  double queue_weight = 1.0;
  double kv_weight = 0.5;
  double poll_interval_s = 0.25;
  double connect_timeout_s = 2;
  double answer_timeout_s = 600;  // for the head and between body pieces
  double routed_ttl_s = 10;       // a routed prefix counts as on its replica this long
  double events_stale_s = 5;      // events silent this long after routed requests: stale
  int32_t workers = 64;           // requests forwarded at once (more wait)
  std::string backend_api_key;    // for the router's own calls (/metrics, /v1/stats, render)
  bool quiet = false;
};

class Router {
 public:
  // Checks the backends' URLs, binds the port, starts polling and subscribing.
  static StatusOr<std::unique_ptr<Router>> start(const RouteConfig& config);
  ~Router();

  uint16_t port() const;
  std::string url() const;
  void stop();

  struct Impl;

 private:
  explicit Router(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace hinge::route
