// The state http::Server shares with its sessions (http/session.h): configuration, limits,
// counters and the session list. Internal to src/http/.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include <utility>  // before Asio: its awaitable.hpp uses std::exchange

#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>

#include "http/rules.h"
#include "http/server.h"

namespace hinge::http {

class Session;

// Member order matters: the io_context is destroyed before everything its pending handlers
// (sessions) may still touch on destruction, and after the objects that use it.
struct Server::Impl {
  ServerConfig config;
  HttpHandler handler;
  CorsPolicy cors;
  int64_t max_connections = 0;
  int64_t max_overflow = 0;  // connections served from the reserve at once

  std::atomic<int64_t> connections{0};  // sessions alive, overflow ones included
  std::atomic<int64_t> overflow{0};
  std::atomic<int64_t> exchanges{0};  // requests handed to the handler, not yet answered
  std::atomic<int64_t> output_queued{0};
  std::atomic<int64_t> body_bytes{0};  // request bodies being received
  std::atomic<int64_t> refused{0}, evicted{0}, backoffs{0};
  std::atomic<int64_t> timeouts_idle{0}, timeouts_header{0}, timeouts_body{0}, too_slow{0};
  std::atomic<bool> stopping{false}, draining{false};

  std::mutex sessions_mu;
  std::vector<std::weak_ptr<Session>> sessions;  // oldest first
  uint16_t port = 0;
  std::string url;
  int spare_fd = -1;  // released on EMFILE to answer the connection that hit it

  std::optional<boost::asio::ssl::context> tls;  // with tls_cert_file / tls_key_file

  boost::asio::io_context ioc;
  std::optional<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> work;
  std::optional<boost::asio::strand<boost::asio::io_context::executor_type>> accept_strand;
  std::optional<boost::asio::ip::tcp::acceptor> acceptor;
  std::optional<boost::asio::steady_timer> backoff;
  std::vector<std::thread> threads;

  void do_accept();
  void admit(boost::asio::ip::tcp::socket socket);
  bool evict_idle();
  void on_descriptors_exhausted();
};

}  // namespace hinge::http
