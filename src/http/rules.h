// Pure HTTP/1.1 request rules the transport applies before a handler sees a request (no I/O,
// unit-tested in tests/http_rules_test.cpp):
// - methods are case-sensitive tokens: a known method in the wrong case is 400, an unknown one
//   501 (RFC 9110 9.1);
// - the only transfer coding accepted is `chunked` (anything else is 501, RFC 9112 6.1: the
//   body could not be framed, so it must not be read as the next request);
// - `Expect: 100-continue` asks for an interim 100 before the body;
// - CORS: --cors-origins ("*" or exact origins) decides the Access-Control-* headers of every
//   response and of preflight (OPTIONS + Access-Control-Request-Method) answers.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "http/exchange.h"

namespace hinge::http {

struct Rejection {
  int status = 400;
  std::string message;
};

// GET, HEAD, POST, PUT, DELETE, PATCH, OPTIONS, TRACE, CONNECT pass (the handler answers 405
// where a route does not take it); "get" is 400; any other token 501.
std::optional<Rejection> check_method(std::string_view method);

// `te`: the Transfer-Encoding field value ("" when absent). "chunked" (any case, optional
// whitespace) passes; everything else ("gzip", "gzip, chunked", "xchunked") is 501.
std::optional<Rejection> check_transfer_encoding(std::string_view te);

// True for an Expect value of "100-continue" (any case).
bool expects_continue(std::string_view expect);

class CorsPolicy {
 public:
  // Each entry is "*" (any origin) or an origin "scheme://host[:port]" (http or https, no
  // path). An empty list allows none (no CORS headers at all).
  static StatusOr<CorsPolicy> parse(const std::vector<std::string>& origins);

  bool enabled() const { return any_ || !origins_.empty(); }
  bool allows(std::string_view origin) const;
  // The headers for a response to a request carrying `origin` (none when not allowed).
  // Preflight answers also get Allow-Methods, Allow-Headers (the requested ones when they are
  // plain header names, else a default list) and Max-Age.
  HttpHeaders headers(std::string_view origin, bool preflight,
                      std::string_view requested_headers) const;

 private:
  bool any_ = false;
  std::vector<std::string> origins_;  // lower case
};

// The host part of a URL for a listening address: IPv6 literals in brackets ("[::1]").
std::string url_host(std::string_view address);

}  // namespace hinge::http
