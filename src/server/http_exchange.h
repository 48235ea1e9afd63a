// The transport-neutral face of one HTTP request/response, so handlers (server/api_server.h)
// build and test without sockets. HttpServer (server/http_server.h) implements Exchange over
// Boost.Beast; tests may implement it in memory.
//
// A handler answers exactly once: respond() with a whole response, or start_stream() then any
// number of write() and one end_stream(). Every Exchange method is thread-safe and
// non-blocking (the transport queues the bytes); calls after the client went away are ignored.
// on_close's callback runs once, on a transport thread, if the client disconnects before the
// answer was fully written; it must not block.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace hinge::server {

using HttpHeaders = std::vector<std::pair<std::string, std::string>>;

struct HttpRequest {
  std::string method;  // "GET", "POST", ...
  std::string target;  // path and query as sent ("/v1/models?x=1")
  std::string path;    // target without the query
  HttpHeaders headers; // names lower-cased
  std::string body;

  // First header named `name` (lower case), or empty.
  std::string header(std::string_view name) const {
    for (const auto& [k, v] : headers)
      if (k == name) return v;
    return {};
  }
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  HttpHeaders headers;  // extra headers (Retry-After, Allow, ...)
  std::string body;
};

class Exchange {
 public:
  virtual ~Exchange() = default;
  virtual void respond(HttpResponse response) = 0;
  virtual void start_stream(int status, std::string content_type, HttpHeaders headers = {}) = 0;
  virtual void write(std::string data) = 0;
  virtual void end_stream() = 0;
  virtual void on_close(std::function<void()> callback) = 0;
  // Runs `fn` on the transport's thread for this connection, after everything posted before
  // (one at a time, in order): per-request output work stays off the engine thread.
  virtual void post(std::function<void()> fn) = 0;
};

using ExchangePtr = std::shared_ptr<Exchange>;
using HttpHandler = std::function<void(HttpRequest request, ExchangePtr exchange)>;

}  // namespace hinge::server
