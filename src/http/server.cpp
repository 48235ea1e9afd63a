// http::Server: resolving and listening, the accept loop with its connection limit, eviction,
// overflow and descriptor-exhaustion paths, and the I/O threads. Connections: http/session.cpp.
#include "http/server.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include <fmt/format.h>

#include "http/session.h"
#include "http/tls.h"

namespace hinge::http {

namespace net = boost::asio;
using tcp = net::ip::tcp;

namespace {

int64_t open_descriptors() {
  int64_t n = 0;
  if (DIR* d = ::opendir("/proc/self/fd")) {
    while (const dirent* e = ::readdir(d))
      if (e->d_name[0] != '.') ++n;
    ::closedir(d);
  }
  return n;
}

// Raises the soft descriptor limit to the hard one (as Go and nginx do) and returns it.
int64_t descriptor_limit() {
  rlimit rl{};
  if (::getrlimit(RLIMIT_NOFILE, &rl) != 0) return 1024;
  const rlim_t want = std::min<rlim_t>(rl.rlim_max, 1u << 20);
  if (rl.rlim_cur < want) {
    rlimit raised = rl;
    raised.rlim_cur = want;
    if (::setrlimit(RLIMIT_NOFILE, &raised) == 0) rl = raised;
  }
  return rl.rlim_cur == RLIM_INFINITY ? (1 << 20) : static_cast<int64_t>(rl.rlim_cur);
}

// A 503 written straight to a socket the server cannot serve (best effort, non-blocking).
void refuse(int fd) {
  static constexpr std::string_view kBody =
      R"({"error":{"message":"too many connections; retry shortly","type":"server_overloaded","param":null,"code":"too_many_connections"}})";
  const std::string r = fmt::format(
      "HTTP/1.1 503 Service Unavailable\r\nServer: hinge\r\nContent-Type: application/json\r\n"
      "Content-Length: {}\r\nRetry-After: 1\r\nConnection: close\r\n\r\n{}",
      kBody.size(), kBody);
  char drop[4096];
  for (int i = 0; i < 16 && ::recv(fd, drop, sizeof drop, MSG_DONTWAIT) > 0; ++i) {
  }
  (void)::send(fd, r.data(), r.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  ::shutdown(fd, SHUT_WR);
  ::close(fd);
}

}  // namespace

void Server::Impl::do_accept() {
  acceptor->async_accept(net::make_strand(ioc), [this](boost::system::error_code ec, tcp::socket socket) {
    if (ec) {
      if (ec == net::error::operation_aborted || !acceptor->is_open()) return;
      const int e = ec.value();
      if (ec.category() == boost::system::system_category() &&
          (e == EMFILE || e == ENFILE || e == ENOBUFS || e == ENOMEM))
        return on_descriptors_exhausted();
      do_accept();  // ECONNABORTED and the like: the next one
      return;
    }
    admit(std::move(socket));
    do_accept();
  });
}

// Out of descriptors: close an idle keep-alive connection and accept again; with none idle,
// answer one waiting connection 503 from the spare descriptor and pause the accept loop for
// 100 ms (the kernel keeps the rest in the backlog) instead of spinning on EMFILE.
void Server::Impl::on_descriptors_exhausted() {
  backoffs.fetch_add(1);
  if (evict_idle()) {  // an idle keep-alive connection gives its descriptor back
    backoff->expires_after(std::chrono::milliseconds(5));
    backoff->async_wait([this](boost::system::error_code ec) {
      if (!ec && acceptor->is_open()) do_accept();
    });
    return;
  }
  if (spare_fd >= 0) {
    ::close(spare_fd);
    spare_fd = -1;
    const int fd = ::accept4(acceptor->native_handle(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd >= 0) {
      refused.fetch_add(1);
      refuse(fd);
    }
    spare_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  }
  backoff->expires_after(std::chrono::milliseconds(100));
  backoff->async_wait([this](boost::system::error_code ec) {
    if (!ec && acceptor->is_open()) do_accept();
  });
}

bool Server::Impl::evict_idle() {
  std::lock_guard lock(sessions_mu);
  for (auto& w : sessions)
    if (auto s = w.lock(); s && s->try_evict()) {
      evicted.fetch_add(1);
      return true;
    }
  return false;
}

void Server::Impl::admit(tcp::socket socket) {
  if (stopping.load()) return;
  boost::system::error_code ignored;
  socket.set_option(tcp::no_delay(true), ignored);
  bool overflow_session = false;
  if (connections.load() >= max_connections && !evict_idle()) {
    if (overflow.load() >= max_overflow) {
      refused.fetch_add(1);
      return refuse(socket.release(ignored));
    }
    overflow_session = true;
  }
  auto s = std::make_shared<Session>(std::move(socket), *this, overflow_session);
  {
    std::lock_guard lock(sessions_mu);
    std::erase_if(sessions, [](const std::weak_ptr<Session>& w) { return w.expired(); });
    sessions.push_back(s);
  }
  s->run();
}

StatusOr<std::unique_ptr<Server>> Server::start(const ServerConfig& config, HttpHandler handler) {
  auto impl = std::make_unique<Impl>();
  impl->config = config;
  if (config.tls_cert_file.empty() != config.tls_key_file.empty())
    return Status::Error("TLS needs both --tls-cert and --tls-key (PEM files)");
  if (!config.tls_cert_file.empty()) {
    auto tls = make_tls_context(config.tls_cert_file, config.tls_key_file);
    if (!tls.ok()) return tls.status();
    impl->tls.emplace(std::move(tls).value());
  }
  impl->handler = std::move(handler);
  auto cors = CorsPolicy::parse(config.cors_origins);
  if (!cors.ok()) return cors.status();
  impl->cors = std::move(cors).value();

  // The connection limit: what the descriptor limit leaves after the descriptors open now,
  // the overflow slots and a margin (model files, the engine, logs).
  const int64_t limit = descriptor_limit();
  impl->max_overflow = std::clamp<int64_t>(limit / 32, 2, 64);
  const int64_t reserve = open_descriptors() + impl->max_overflow + 16;
  impl->max_connections = config.max_connections > 0 ? config.max_connections : limit - reserve;
  if (impl->max_connections < 1)
    return Status::Errorf("the open-files limit ({}) leaves no room for connections (about {} "
                          "are needed besides them); raise it with `ulimit -n`", limit, reserve);

  boost::system::error_code ec;
  tcp::endpoint ep;
  const auto address = net::ip::make_address(config.host, ec);
  if (!ec) {
    ep = tcp::endpoint(address, config.port);
  } else {
    tcp::resolver resolver(impl->ioc);
    const auto results = resolver.resolve(config.host, std::to_string(config.port),
                                          tcp::resolver::passive | tcp::resolver::numeric_service, ec);
    if (ec || results.empty())
      return Status::Errorf("--host {}: not an IP address and not a host name that resolves ({})",
                            config.host, ec ? ec.message() : "no addresses");
    ep = results.begin()->endpoint();  // the first address, as getaddrinfo orders them
  }
  impl->accept_strand.emplace(net::make_strand(impl->ioc));
  impl->acceptor.emplace(*impl->accept_strand);
  impl->acceptor->open(ep.protocol(), ec);
  if (!ec) impl->acceptor->set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) impl->acceptor->bind(ep, ec);
  if (!ec) impl->acceptor->listen(net::socket_base::max_listen_connections, ec);
  if (ec)
    return Status::Errorf("cannot listen on {}:{}: {}", url_host(ep.address().to_string()),
                          config.port, ec.message());
  impl->port = impl->acceptor->local_endpoint().port();
  impl->url = fmt::format("{}://{}:{}", impl->tls ? "https" : "http",
                          url_host(ep.address().to_string()), impl->port);
  impl->spare_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  impl->backoff.emplace(*impl->accept_strand);
  impl->work.emplace(impl->ioc.get_executor());
  net::dispatch(*impl->accept_strand, [p = impl.get()] { p->do_accept(); });
  const int n = std::max(1, config.io_threads);
  for (int i = 0; i < n; ++i) impl->threads.emplace_back([p = impl.get()] { p->ioc.run(); });
  return std::unique_ptr<Server>(new Server(std::move(impl)));
}

Server::Server(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Server::~Server() {
  stop();
  if (impl_->spare_fd >= 0) ::close(impl_->spare_fd);
}

uint16_t Server::port() const { return impl_->port; }
std::string Server::url() const { return impl_->url; }
int64_t Server::open_connections() const { return impl_->connections.load(); }
int64_t Server::pending_answers() const { return impl_->exchanges.load(); }

ServerStats Server::stats() const {
  const Impl& i = *impl_;
  ServerStats s;
  s.connections = i.connections.load();
  s.max_connections = i.max_connections;
  s.output_bytes_queued = i.output_queued.load();
  s.connections_refused = i.refused.load();
  s.connections_evicted = i.evicted.load();
  s.accept_backoffs = i.backoffs.load();
  s.timeouts_idle = i.timeouts_idle.load();
  s.timeouts_header = i.timeouts_header.load();
  s.timeouts_body = i.timeouts_body.load();
  s.clients_too_slow = i.too_slow.load();
  return s;
}

void Server::begin_drain() { impl_->draining.store(true); }

void Server::stop_accepting() {
  net::post(*impl_->accept_strand, [p = impl_.get()] {
    boost::system::error_code ignored;
    if (p->acceptor && p->acceptor->is_open()) p->acceptor->close(ignored);
    if (p->backoff) p->backoff->cancel();
  });
}

void Server::stop() {
  if (impl_->threads.empty()) return;
  impl_->stopping.store(true);
  stop_accepting();
  {
    std::lock_guard lock(impl_->sessions_mu);
    for (auto& w : impl_->sessions)
      if (auto s = w.lock()) s->close_from_server();
    impl_->sessions.clear();
  }
  impl_->work.reset();
  // Connections are closed above; give the strands a moment to run their last handlers.
  for (int i = 0; i < 200 && impl_->connections.load() > 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  impl_->ioc.stop();
  for (auto& t : impl_->threads) t.join();
  impl_->threads.clear();
}

}  // namespace hinge::http
