// One HTTP/1.1 exchange of `hinge route` with a replica (Boost.Beast over its own io_context,
// driven on the calling thread): connect and send, read the response head, then the body piece
// by piece as it arrives (streaming passthrough). Every step has a deadline; abort() (any
// thread: the client went away) ends the exchange at once. The error of each step says whether
// anything came back yet: before the head, a request can still go to another replica.
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include "common/status.h"
#include "http/exchange.h"

namespace hinge::route {

struct BackendAddress {
  std::string host;
  uint16_t port = 0;
  std::string url;  // http://HOST:PORT as given
  // http://HOST:PORT (a trailing / tolerated); https is not spoken to replicas.
  static StatusOr<BackendAddress> parse(const std::string& url);
};

struct BackendHead {
  int status = 0;
  std::string content_type;
  http::HttpHeaders headers;  // lower-case names, hop-by-hop ones dropped
};

class BackendCall {
 public:
  BackendCall();
  ~BackendCall();
  BackendCall(const BackendCall&) = delete;
  BackendCall& operator=(const BackendCall&) = delete;

  // Connects (within connect_timeout_s) and writes the request. An error: nothing was sent.
  Status send(const BackendAddress& to, const std::string& method, const std::string& target,
              const http::HttpHeaders& headers, const std::string& body, double connect_timeout_s);
  // Waits up to timeout_s for the response head.
  Status read_head(BackendHead* head, double timeout_s);
  // Appends the next piece of the body to *out: true while more may follow, false at the end.
  // An error: the replica failed mid-body (or went silent for idle_timeout_s).
  StatusOr<bool> read_some(std::string* out, double idle_timeout_s);
  // Any thread: ends the exchange (the pending step returns an error).
  void abort();

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

// A whole small exchange (render, /metrics, /v1/stats): status and body, within timeout_s.
StatusOr<std::pair<int, std::string>> backend_fetch(const BackendAddress& to,
                                                    const std::string& method,
                                                    const std::string& target,
                                                    const http::HttpHeaders& headers,
                                                    const std::string& body, double timeout_s,
                                                    size_t max_body_bytes = 64u << 20);

}  // namespace hinge::route
