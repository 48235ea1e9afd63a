// HttpServer: asynchronous HTTP/1.1 over Boost.Beast/Asio. A few I/O threads serve any number
// of keep-alive connections (no thread per client); each connection runs on its own strand.
//
// Per connection: read a request (header and body limits: 431 / 413 with an OpenAI-style
// error, no handler call), hand it to the handler with an Exchange, and while the handler
// works or streams, watch the socket so a client that goes away is noticed at once (the
// Exchange's on_close callback, which the API uses to abort the generation). Responses are
// written as soon as they are given; streams use chunked transfer encoding. Idle keep-alive
// connections close after idle_timeout_s; a write that makes no progress for write_timeout_s
// closes the connection (a client that stopped reading).
//
// stop_accepting() closes the listening socket (for a graceful shutdown); stop() closes every
// connection and joins the I/O threads. Thread-safety: start/stop from one thread; the
// Exchange objects are thread-safe (see http_exchange.h).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/status.h"
#include "server/http_exchange.h"

namespace hinge::server {

struct HttpServerConfig {
  std::string host = "127.0.0.1";
  uint16_t port = 8080;  // 0: any free port (see HttpServer::port())
  int32_t io_threads = 2;
  size_t max_body_bytes = 8u << 20;
  size_t max_header_bytes = 64u << 10;
  double idle_timeout_s = 120;
  double write_timeout_s = 60;
};

class HttpServer {
 public:
  // Binds and listens (errors: bad address, port in use), then starts the I/O threads.
  static StatusOr<std::unique_ptr<HttpServer>> start(const HttpServerConfig& config,
                                                     HttpHandler handler);
  ~HttpServer();

  uint16_t port() const;  // the bound port
  int64_t open_connections() const;
  int64_t pending_answers() const;  // requests whose answer is not fully written yet
  void stop_accepting();
  void stop();

  struct Impl;

 private:
  explicit HttpServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace hinge::server
