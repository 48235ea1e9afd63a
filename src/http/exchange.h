// The transport-neutral face of one HTTP request/response, so handlers (server/api_server.h)
// build and test without sockets. http::Server (http/server.h) implements Exchange over
// Boost.Asio; tests may implement it in memory.
//
// A handler answers exactly once: respond() with a whole response, or start_stream() then any
// number of write() and one end_stream(). Every Exchange method is thread-safe and
// non-blocking (the transport queues the bytes); calls after the connection closed are ignored.
// on_close's callback runs once, on a transport thread, if the connection closes before the
// answer was fully written, with the reason; it must not block.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace hinge::http {

using HttpHeaders = std::vector<std::pair<std::string, std::string>>;

struct HttpRequest {
  std::string method;  // "GET", "HEAD", "POST", "OPTIONS", ... (validated, upper case)
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
  std::string body;     // not sent for HEAD requests (Content-Length still says its size)
};

// Why a connection closed before its answer was complete.
enum class CloseReason : uint8_t {
  kClientGone,      // EOF, reset or a failed write
  kClientTooSlow,   // stopped reading: its output buffer filled or a write stalled
  kServerStopping,  // HttpServer::stop()
};

class Exchange {
 public:
  virtual ~Exchange() = default;
  virtual void respond(HttpResponse response) = 0;
  virtual void start_stream(int status, std::string content_type, HttpHeaders headers = {}) = 0;
  virtual void write(std::string data) = 0;
  virtual void end_stream() = 0;
  virtual void on_close(std::function<void(CloseReason)> callback) = 0;
  // Runs `fn` on the transport's thread for this connection, after everything posted before
  // (one at a time, in order): per-request output work stays off the engine thread.
  virtual void post(std::function<void()> fn) = 0;
};

using ExchangePtr = std::shared_ptr<Exchange>;
using HttpHandler = std::function<void(HttpRequest request, ExchangePtr exchange)>;

}  // namespace hinge::http
