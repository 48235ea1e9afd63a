#include <algorithm>
#include <chrono>
#include <cstdio>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "route/router_impl.h"

namespace hinge::route {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

namespace {

std::string error_json(const std::string& message, const char* type, int code) {
  nlohmann::json j;
  j["error"] = {{"message", message}, {"type", type}, {"param", nullptr}, {"code", code}};
  return j.dump();
}

http::HttpResponse error_response(int status, const std::string& message) {
  http::HttpResponse r;
  r.status = status;
  r.body = error_json(message, status >= 500 ? "server_error" : "invalid_request_error", status);
  if (status == 503) r.headers.emplace_back("retry-after", "1");
  return r;
}

bool is_generation(const std::string& path) {
  return path == "/v1/completions" || path == "/v1/chat/completions";
}

bool is_fan_out(const http::HttpRequest& r) {
  return r.method == "POST" && (r.path == "/reset_prefix_cache" || r.path.rfind("/admin/", 0) == 0);
}

}  // namespace

Router::Router(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Router::~Router() { stop(); }

StatusOr<std::unique_ptr<Router>> Router::start(const RouteConfig& config) {
  if (config.backends.empty()) return Status::Error("give at least one --backend http://HOST:PORT");
  if (config.policy != "prefix" && config.policy != "round-robin" && config.policy != "least-load")
    return Status::Errorf("--policy '{}': prefix, round-robin or least-load", config.policy);
  auto impl = std::make_unique<Impl>();
  impl->config = config;
  for (const std::string& url : config.backends) {
    HINGE_ASSIGN_OR_RETURN(BackendAddress a, BackendAddress::parse(url));
    for (const auto& b : impl->backends)
      if (b->addr.url == a.url) return Status::Errorf("--backend {} is given twice", url);
    impl->backends.push_back(std::make_unique<Backend>());
    impl->backends.back()->addr = std::move(a);
  }
  http::ServerConfig sc;
  sc.host = config.host;
  sc.port = config.port;
  sc.io_threads = 2;
  sc.write_stall_timeout_s = 60;
  Impl* raw = impl.get();
  HINGE_ASSIGN_OR_RETURN(impl->server,
                         http::Server::start(sc, [raw](http::HttpRequest r, http::ExchangePtr ex) {
                           raw->handle(std::move(r), std::move(ex));
                         }));
  for (int32_t i = 0; i < std::max<int32_t>(config.workers, 1); ++i)
    impl->workers.emplace_back([raw] { raw->work(); });
  impl->poller = std::thread([raw] { raw->poll_loop(); });
  impl->subscriber = std::thread([raw] { raw->subscribe_loop(); });
  return std::unique_ptr<Router>(new Router(std::move(impl)));
}

uint16_t Router::port() const { return impl_->server->port(); }
std::string Router::url() const { return impl_->server->url(); }

void Router::stop() {
  Impl& m = *impl_;
  {
    std::lock_guard lock(m.mu);
    if (m.stopping) return;
    m.stopping = true;
  }
  m.stop_flag = true;
  m.server->stop_accepting();
  m.cv.notify_all();
  for (std::thread& t : m.workers) t.join();
  m.server->stop();
  m.poller.join();
  m.subscriber.join();
}

void Router::Impl::handle(http::HttpRequest request, http::ExchangePtr ex) {
  {
    std::lock_guard lock(mu);
    if (!stopping && jobs.size() < 4096) {
      jobs.push_back({std::move(request), std::move(ex)});
      cv.notify_one();
      return;
    }
  }
  ex->respond(error_response(503, "the router is overloaded or stopping; retry"));
}

void Router::Impl::work() {
  for (;;) {
    Job job;
    {
      std::unique_lock lock(mu);
      cv.wait(lock, [&] { return stopping || !jobs.empty(); });
      if (jobs.empty()) return;
      job = std::move(jobs.front());
      jobs.pop_front();
    }
    serve(job);
  }
}

void Router::Impl::serve(Job& job) {
  const http::HttpRequest& r = job.request;
  if (r.method == "GET" && r.path == "/health") {
    int healthy = 0;
    for (const auto& b : backends) {
      std::lock_guard lock(b->mu);
      healthy += b->healthy ? 1 : 0;
    }
    http::HttpResponse resp;
    resp.status = healthy > 0 ? 200 : 503;
    resp.body = fmt::format(R"({{"status":"{}","backends":{},"healthy":{}}})",
                            healthy > 0 ? "ok" : "no healthy replica", backends.size(), healthy);
    return job.exchange->respond(std::move(resp));
  }
  if (r.method == "GET" && r.path == "/metrics") {
    http::HttpResponse resp;
    resp.content_type = "text/plain; version=0.0.4";
    resp.body = metrics_text();
    return job.exchange->respond(std::move(resp));
  }
  if (r.method == "GET" && r.path == "/route/stats") {
    http::HttpResponse resp;
    resp.body = stats_json();
    return job.exchange->respond(std::move(resp));
  }
  ++requests;
  if (r.method == "POST" && is_generation(r.path)) return generate(job);
  if (is_fan_out(r)) return fan_out(job);
  forward_any(job);
}

http::HttpHeaders Router::Impl::backend_headers(const http::HttpRequest& r) const {
  http::HttpHeaders h;
  for (const auto& [k, v] : r.headers) {
    if (k == "host" || k == "connection" || k == "content-length" || k == "transfer-encoding" ||
        k == "keep-alive" || k == "expect" || k == "te" || k == "upgrade")
      continue;
    h.emplace_back(k, v);
  }
  return h;
}

http::HttpHeaders Router::Impl::own_headers() const {
  http::HttpHeaders h{{"content-type", "application/json"}};
  if (!config.backend_api_key.empty())
    h.emplace_back("authorization", "Bearer " + config.backend_api_key);
  return h;
}

std::vector<Backend*> Router::Impl::rank(const std::vector<uint64_t>& chain) {
  const double now = now_s();
  struct Cand {
    Backend* b;
    double load, kv, prefix;
    int32_t inflight;
  };
  std::vector<Cand> up;
  std::vector<Backend*> rest;
  for (const auto& bp : backends) {
    Backend* b = bp.get();
    std::lock_guard lock(b->mu);
    if (!b->healthy || now < b->down_until) {
      rest.push_back(b);
      continue;
    }
    const int32_t inflight = b->inflight.load();
    double prefix = 0;
    if (config.policy == "prefix" && !chain.empty() && b->events_live)
      prefix = static_cast<double>(b->prefix.matched_blocks(chain, now)) /
               static_cast<double>(chain.size());
    up.push_back({b, b->waiting + inflight, b->kv_usage, prefix, inflight});
  }
  std::vector<Backend*> order;
  if (config.policy == "round-robin") {
    const size_t start = up.empty() ? 0 : rr.fetch_add(1) % up.size();
    for (size_t i = 0; i < up.size(); ++i) order.push_back(up[(start + i) % up.size()].b);
  } else {
    double lo = 1e300, hi = -1e300;
    for (const Cand& c : up) {
      lo = std::min(lo, c.load);
      hi = std::max(hi, c.load);
    }
    std::vector<std::pair<double, size_t>> scored;
    const size_t tie = up.empty() ? 0 : rr.fetch_add(1) % up.size();
    for (size_t i = 0; i < up.size(); ++i) {
      const Cand& c = up[i];
      const double queue = hi > lo ? 1.0 - (c.load - lo) / (hi - lo) : 1.0;
      double s = config.queue_weight * queue;
      if (config.policy == "prefix") s += config.prefix_weight * c.prefix + config.kv_weight * (1.0 - c.kv);
      // Ties: fewer in flight, then a rotating start (no replica is everyone's default).
      s -= 1e-6 * c.inflight + 1e-9 * static_cast<double>((i + up.size() - tie) % up.size());
      scored.emplace_back(s, i);
    }
    std::sort(scored.begin(), scored.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
    for (const auto& [s, i] : scored) order.push_back(up[i].b);
  }
  order.insert(order.end(), rest.begin(), rest.end());
  return order;
}

void Router::Impl::generate(Job& job) {
  const http::HttpRequest& r = job.request;
  std::vector<uint64_t> chain;
  if (config.policy == "prefix") {
    // The prompt's token ids, as a replica computes them (its render endpoint).
    for (Backend* b : rank({})) {
      http::HttpHeaders h = backend_headers(r);
      auto got = backend_fetch(b->addr, "POST", r.path + "/render", h, r.body, 30);
      if (!got.ok()) {
        std::lock_guard lock(b->mu);
        b->down_until = now_s() + 1;
        ++b->failures;
        continue;
      }
      if (got->first >= 400 && got->first < 500) {  // the client's mistake: the same everywhere
        http::HttpResponse resp;
        resp.status = got->first;
        resp.body = std::move(got->second);
        return job.exchange->respond(std::move(resp));
      }
      if (got->first != 200) continue;
      const auto j = nlohmann::json::parse(got->second, nullptr, false);
      if (j.is_object() && j.contains("token_ids") && j["token_ids"].is_array()) {
        std::vector<int32_t> ids;
        ids.reserve(j["token_ids"].size());
        for (const auto& t : j["token_ids"])
          if (t.is_number_integer()) ids.push_back(t.get<int32_t>());
        int32_t bs = 16;
        {
          std::lock_guard lock(b->mu);
          bs = b->block_size;
        }
        content_chain(ids, bs, &chain);
      }
      break;
    }
  }
  prompt_blocks += static_cast<int64_t>(chain.size());
  if (!forward(job, rank(chain), chain)) {
    ++no_backend;
    job.exchange->respond(error_response(503, "no replica is reachable; retry"));
  }
}

bool Router::Impl::forward(Job& job, const std::vector<Backend*>& order,
                           const std::vector<uint64_t>& chain) {
  const http::HttpRequest& r = job.request;
  const http::HttpHeaders headers = backend_headers(r);
  // The client leaving aborts the replica's request (and stops the retries).
  struct Client {
    std::mutex mu;
    std::shared_ptr<BackendCall> call;  // guarded by mu
    bool gone = false;                  // guarded by mu
  };
  auto client = std::make_shared<Client>();
  job.exchange->on_close([client](http::CloseReason) {
    std::lock_guard lock(client->mu);
    client->gone = true;
    if (client->call) client->call->abort();
  });
  std::shared_ptr<BackendCall> call;
  bool first = true;
  for (Backend* b : order) {
    call = std::make_shared<BackendCall>();
    {
      std::lock_guard lock(client->mu);
      if (client->gone) return true;
      client->call = call;
    }
    if (!first) ++retries;
    first = false;
    {
      std::lock_guard lock(b->mu);
      if (!chain.empty()) {
        b->matched_blocks += b->prefix.matched_blocks(chain, now_s());
        b->prefix.note_routed(chain, now_s(), config.routed_ttl_s);
      }
      ++b->routed;
    }
    ++b->inflight;
    struct Done {
      Backend* b;
      ~Done() { --b->inflight; }
    } done{b};
    Status st = call->send(b->addr, r.method, r.target, headers, r.body, config.connect_timeout_s);
    BackendHead head;
    if (st.ok()) st = call->read_head(&head, config.answer_timeout_s);
    if (!st.ok()) {
      {
        std::lock_guard lock(client->mu);
        if (client->gone) return true;
      }
      std::lock_guard lock(b->mu);
      ++b->failures;
      b->down_until = now_s() + 1;
      b->healthy = false;
      if (!config.quiet)
        std::fprintf(stderr, "hinge route: %s failed before answering (%s); trying another\n",
                     b->addr.url.c_str(), st.message().c_str());
      continue;
    }
    const bool sse = head.content_type.rfind("text/event-stream", 0) == 0;
    std::string piece;
    if (sse) {
      job.exchange->start_stream(head.status, head.content_type, head.headers);
      for (;;) {
        piece.clear();
        auto more = call->read_some(&piece, config.answer_timeout_s);
        if (!more.ok()) {
          ++stream_errors;
          {
            std::lock_guard lock(b->mu);
            ++b->failures;
          }
          job.exchange->write("data: " +
                              error_json("the replica serving this stream failed: " +
                                             more.status().message(),
                                         "server_error", 502) +
                              "\n\n");
          break;
        }
        if (!piece.empty()) job.exchange->write(std::move(piece));
        if (!*more) break;
      }
      job.exchange->end_stream();
      return true;
    }
    std::string body;
    for (;;) {
      auto more = call->read_some(&body, config.answer_timeout_s);
      if (!more.ok()) {
        ++stream_errors;
        {
          std::lock_guard lock(b->mu);
          ++b->failures;
        }
        job.exchange->respond(error_response(502, "the replica failed mid-answer: " + more.status().message()));
        return true;
      }
      if (body.size() > (size_t{256} << 20)) {
        job.exchange->respond(error_response(502, "the replica's answer is too large"));
        return true;
      }
      if (!*more) break;
    }
    http::HttpResponse resp;
    resp.status = head.status;
    resp.content_type = head.content_type.empty() ? "application/json" : head.content_type;
    resp.headers = std::move(head.headers);
    resp.body = std::move(body);
    job.exchange->respond(std::move(resp));
    return true;
  }
  return false;
}

void Router::Impl::forward_any(Job& job) {
  if (!forward(job, rank({}), {})) {
    ++no_backend;
    job.exchange->respond(error_response(503, "no replica is reachable; retry"));
  }
}

void Router::Impl::fan_out(Job& job) {
  const http::HttpRequest& r = job.request;
  const http::HttpHeaders headers = backend_headers(r);
  nlohmann::json replicas = nlohmann::json::array();
  int worst = 200;
  for (const auto& b : backends) {
    auto got = backend_fetch(b->addr, r.method, r.target, headers, r.body, 30);
    nlohmann::json one;
    one["backend"] = b->addr.url;
    if (!got.ok()) {
      one["status"] = 502;
      one["error"] = got.status().message();
      worst = std::max(worst, 502);
    } else {
      one["status"] = got->first;
      auto body = nlohmann::json::parse(got->second, nullptr, false);
      one["body"] = body.is_discarded() ? nlohmann::json(got->second) : body;
      if (got->first >= 300) worst = std::max(worst, got->first);
    }
    replicas.push_back(std::move(one));
  }
  http::HttpResponse resp;
  resp.status = worst;
  resp.body = nlohmann::json{{"replicas", replicas}}.dump();
  job.exchange->respond(std::move(resp));
}

std::string Router::Impl::metrics_text() const {
  std::string o;
  auto counter = [&](const char* name, const char* help, int64_t v) {
    o += fmt::format("# HELP hinge_route:{0} {1}\n# TYPE hinge_route:{0} counter\nhinge_route:{0} {2}\n",
                     name, help, v);
  };
  counter("requests_total", "Requests forwarded (generation, reads, fan-out).", requests.load());
  counter("retries_total", "Requests sent to another replica after one failed before answering.",
          retries.load());
  counter("stream_errors_total", "Answers cut by a replica failing mid-answer.",
          stream_errors.load());
  counter("no_backend_total", "Requests no replica could take (503).", no_backend.load());
  counter("prompt_blocks_total", "Full KV blocks of the routed prompts.", prompt_blocks.load());
  auto family = [&](const char* name, const char* type, const char* help, auto value) {
    o += fmt::format("# HELP hinge_route:{0} {1}\n# TYPE hinge_route:{0} {2}\n", name, help, type);
    for (const auto& b : backends) {
      std::lock_guard lock(b->mu);
      o += fmt::format("hinge_route:{}{{backend=\"{}\"}} {}\n", name, b->addr.url, value(*b));
    }
  };
  family("backend_up", "gauge", "1 when the replica answers its /metrics.",
         [](const Backend& b) { return b.healthy ? 1 : 0; });
  family("backend_in_flight", "gauge", "Requests the router has on the replica now.",
         [](const Backend& b) { return b.inflight.load(); });
  family("backend_routed_total", "counter", "Requests sent to the replica.",
         [](const Backend& b) { return b.routed; });
  family("backend_matched_blocks_total", "counter",
         "Prompt blocks the replica held (by its KV events) when a request went to it.",
         [](const Backend& b) { return b.matched_blocks; });
  family("backend_failures_total", "counter", "Connections refused, or answers cut, by the replica.",
         [](const Backend& b) { return b.failures; });
  family("backend_index_blocks", "gauge", "Blocks the router knows the replica caches.",
         [](const Backend& b) { return b.prefix.blocks(); });
  family("backend_events_live", "gauge", "1 while the replica's KV events are followed.",
         [](const Backend& b) { return b.events_live ? 1 : 0; });
  family("backend_event_batches_total", "counter", "KV event batches applied.",
         [](const Backend& b) { return b.events; });
  family("backend_event_gaps_total", "counter", "Missed event batches (asked from replay).",
         [](const Backend& b) { return b.gaps; });
  family("backend_event_orphans_total", "counter",
         "Stored events dropped: their parent block was unknown.",
         [](const Backend& b) { return b.prefix.orphans(); });
  return o;
}

std::string Router::Impl::stats_json() const {
  nlohmann::json j;
  j["policy"] = config.policy;
  j["requests"] = requests.load();
  j["retries"] = retries.load();
  j["stream_errors"] = stream_errors.load();
  j["backends"] = nlohmann::json::array();
  for (const auto& b : backends) {
    std::lock_guard lock(b->mu);
    j["backends"].push_back({{"url", b->addr.url},
                             {"healthy", b->healthy},
                             {"in_flight", b->inflight.load()},
                             {"waiting", b->waiting},
                             {"kv_cache_usage_perc", b->kv_usage},
                             {"routed", b->routed},
                             {"matched_blocks", b->matched_blocks},
                             {"failures", b->failures},
                             {"events", {{"endpoint", b->events_endpoint},
                                         {"replay", b->replay_endpoint},
                                         {"live", b->events_live},
                                         {"batches", b->events},
                                         {"gaps", b->gaps},
                                         {"replays", b->replays},
                                         {"bad_batches", b->bad_batches},
                                         {"orphans", b->prefix.orphans()},
                                         {"index_blocks", b->prefix.blocks()}}}});
  }
  return j.dump();
}

}  // namespace hinge::route
