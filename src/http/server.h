// http::Server: asynchronous HTTP/1.1 over Boost.Asio (Beast's parser). A few I/O threads serve
// any number of keep-alive connections (no thread per client); each connection (http/session.h)
// runs on its own strand. Every resource one client can take from the others is bounded:
//
// - bytes: headers at most max_header_bytes, chunked trailers at most what the headers left
//   of it (16 KiB at least) (431), a body at most max_body_bytes (413, answered before the
//   body is read when Content-Length says so; the rest of a refused body is read and dropped
//   for up to linger_s so the client, even one that writes everything before reading,
//   receives the answer), all bodies being received at most max_total_body_bytes (503);
// - time: a connection waiting for a request closes after keep_alive_timeout_s; a request's
//   headers must arrive within header_timeout_s of its first byte and its body at a mean rate
//   of min_body_bytes_per_s after a grace of header_timeout_s (408 otherwise, slowloris);
// - output: each connection queues at most max_output_bytes, all together at most
//   max_total_output_bytes (a connection past it with over 64 KiB queued is cut), and a write
//   that makes no progress for write_stall_timeout_s cuts the connection: the client is too
//   slow (CloseReason::kClientTooSlow; the handler aborts its work);
// - connections: at most max_connections (0: derived from RLIMIT_NOFILE, keeping a reserve).
//   Past it a new connection first takes the place of the oldest idle keep-alive connection;
//   when none is idle it is served from the reserve (at most `overflow` of them at a time, 1 s
//   to send its headers): GET /health is answered, anything else gets a 503 with Retry-After
//   as soon as its headers are read. EMFILE/ENFILE back the accept loop off (100 ms) instead of spinning, with a
//   spare descriptor to answer 503 to the connection that hit it.
//
// TLS (ServerConfig::tls_cert_file / tls_key_file, OpenSSL through Boost.Asio SSL): the
// handshake must complete within header_timeout_s; HTTP/1.1, keep-alive, streaming and every
// bound above work the same over it.
//
// Also: `Expect: 100-continue` gets its interim 100; HEAD is passed to the handler and its
// body dropped; CORS headers per --cors-origins (http/rules.h); a client that half-closes
// after its request still gets its answer (an interim 100 then probes whether it is still
// there, so a client that really left still cancels its work).
//
// begin_drain() keeps serving but ends every keep-alive connection after its answer;
// stop_accepting() closes the listening socket; stop() closes every connection and joins the
// I/O threads. Thread-safety: start/stop from one thread; Exchange objects are thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "http/exchange.h"

namespace hinge::http {

struct ServerConfig {
  std::string host = "127.0.0.1";  // an IP address or a host name (resolved at start)
  uint16_t port = 8080;            // 0: any free port (see Server::port())
  int32_t io_threads = 2;
  size_t max_body_bytes = 8u << 20;
  size_t max_header_bytes = 64u << 10;
  double keep_alive_timeout_s = 5;
  double header_timeout_s = 10;
  double min_body_bytes_per_s = 64 << 10;
  double linger_s = 30;              // reading a refused body, at most (2 s without data ends it)
  double write_stall_timeout_s = 30;
  size_t max_output_bytes = 4u << 20;
  size_t max_total_output_bytes = 256u << 20;
  size_t max_total_body_bytes = 256u << 20;  // bodies being received, all connections
  int64_t max_connections = 0;       // 0: from the descriptor limit (see max_connections())
  std::vector<std::string> cors_origins;
  // TLS: both PEM files (the certificate chain, the private key) or neither. With them every
  // connection is HTTPS (TLS 1.2+), url() says https://.
  std::string tls_cert_file;
  std::string tls_key_file;
};

// Counters of the transport (monotonic except the gauges).
struct ServerStats {
  int64_t connections = 0;           // gauge: open now
  int64_t max_connections = 0;       // the limit in force
  int64_t output_bytes_queued = 0;   // gauge: accepted for writing, not yet written
  int64_t connections_refused = 0;   // 503 at the connection limit or on EMFILE
  int64_t connections_evicted = 0;   // idle keep-alive connections closed for a new one
  int64_t accept_backoffs = 0;       // EMFILE / ENFILE pauses
  int64_t timeouts_idle = 0, timeouts_header = 0, timeouts_body = 0;
  int64_t clients_too_slow = 0;
};

class Server {
 public:
  // Resolves the host, binds and listens (errors: bad address, port in use, a descriptor
  // limit too low for the reserve), then starts the I/O threads.
  static StatusOr<std::unique_ptr<Server>> start(const ServerConfig& config, HttpHandler handler);
  ~Server();

  uint16_t port() const;          // the bound port
  std::string url() const;        // http://HOST:PORT, IPv6 in brackets
  int64_t open_connections() const;
  int64_t pending_answers() const;  // requests whose answer is not fully written yet
  ServerStats stats() const;
  void begin_drain();
  void stop_accepting();
  void stop();

  struct Impl;

 private:
  explicit Server(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace hinge::http
