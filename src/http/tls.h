// TLS for http::Server: the server context from PEM files (OpenSSL through Boost.Asio SSL).
// TLS 1.2 and 1.3 only, OpenSSL's default cipher suites (forward secrecy), no renegotiation,
// no compression. Internal to src/http/.
#pragma once

#include <string>

#include <utility>  // before Asio: its awaitable.hpp uses std::exchange

#include <boost/asio/ssl/context.hpp>

#include "common/status.h"

namespace hinge::http {

// Errors name the file and what is wrong with it (unreadable, not PEM, key not the
// certificate's) in one line.
StatusOr<boost::asio::ssl::context> make_tls_context(const std::string& cert_file,
                                                     const std::string& key_file);

}  // namespace hinge::http
