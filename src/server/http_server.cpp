// Boost.Beast transport: acceptor, one Session per connection on its own strand, request
// parsing with limits, response bytes formatted here (whole or chunked) and written from a
// per-connection queue, and a watch read that notices a client going away mid-answer.
#include "server/http_server.h"

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <array>
#include <cstdio>
#include <deque>
#include <mutex>
#include <optional>

#include <fmt/format.h>

#include "server/api_error.h"

namespace hinge::server {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;

namespace {

std::string reason_phrase(int status) {
  const auto r = http::obsolete_reason(http::int_to_status(static_cast<unsigned>(status)));
  return r.empty() ? std::string("Unknown") : std::string(r);
}

std::chrono::steady_clock::duration seconds(double s) {
  return std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double>(s));
}

}  // namespace

class Session;

// Member order matters: the io_context is destroyed before everything its pending handlers
// (sessions) may still touch on destruction, and after the objects that use it.
struct HttpServer::Impl {
  HttpServerConfig config;
  HttpHandler handler;
  std::atomic<int64_t> connections{0};
  std::atomic<int64_t> exchanges{0};  // requests handed to the handler, not yet answered
  std::atomic<bool> stopping{false};
  std::mutex sessions_mu;
  std::vector<std::weak_ptr<Session>> sessions;
  uint16_t port = 0;
  net::io_context ioc;
  std::optional<net::executor_work_guard<net::io_context::executor_type>> work;
  std::optional<tcp::acceptor> acceptor;
  std::vector<std::thread> threads;

  void do_accept();
};

// One connection. Every member is touched on the session's strand only.
class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, HttpServer::Impl& impl)
      : stream_(std::move(socket)), impl_(impl) {
    impl_.connections.fetch_add(1);
  }
  ~Session() { impl_.connections.fetch_sub(1); }

  void run() {
    net::dispatch(stream_.get_executor(), [self = shared_from_this()] { self->do_read(); });
  }
  void close_from_server() {
    net::post(stream_.get_executor(), [self = shared_from_this()] { self->client_gone(); });
  }

  // Exchange operations, posted onto the strand; `gen` ties them to one request.
  template <typename F>
  void post(F&& f) {
    net::post(stream_.get_executor(), std::forward<F>(f));
  }
  void do_respond(uint64_t gen, HttpResponse r) {
    if (gen != generation_ || state_ != State::kHandling || closed_) return;
    state_ = State::kAnswered;
    std::string out = status_line(r.status);
    out += fmt::format("Content-Type: {}\r\nContent-Length: {}\r\n", r.content_type, r.body.size());
    append_headers(r.headers, &out);
    out += keep_alive() ? "Connection: keep-alive\r\n\r\n" : "Connection: close\r\n\r\n";
    out += r.body;
    queue_bytes(std::move(out));
    end_after_write_ = true;
    pump();
  }
  void do_start_stream(uint64_t gen, int status, std::string content_type, HttpHeaders headers) {
    if (gen != generation_ || state_ != State::kHandling || closed_) return;
    state_ = State::kStreaming;
    chunked_ = version_ >= 11;
    if (!chunked_) keep_alive_ = false;  // HTTP/1.0: the body ends with the connection
    std::string out = status_line(status);
    out += fmt::format("Content-Type: {}\r\nCache-Control: no-cache\r\n", content_type);
    if (chunked_) out += "Transfer-Encoding: chunked\r\n";
    append_headers(headers, &out);
    out += keep_alive() ? "Connection: keep-alive\r\n\r\n" : "Connection: close\r\n\r\n";
    queue_bytes(std::move(out));
    pump();
  }
  void do_write(uint64_t gen, std::string data) {
    if (gen != generation_ || state_ != State::kStreaming || closed_ || data.empty()) return;
    if (chunked_) {
      std::string c = fmt::format("{:x}\r\n", data.size());
      c += data;
      c += "\r\n";
      queue_bytes(std::move(c));
    } else {
      queue_bytes(std::move(data));
    }
    pump();
  }
  void do_end_stream(uint64_t gen) {
    if (gen != generation_ || state_ != State::kStreaming || closed_) return;
    state_ = State::kAnswered;
    if (chunked_) queue_bytes("0\r\n\r\n");
    end_after_write_ = true;
    pump();
  }
  void do_on_close(uint64_t gen, std::function<void()> fn) {
    if (gen != generation_ || answer_complete_) return;
    if (closed_) {
      fn();  // the client left before this answer was written
      return;
    }
    on_close_ = std::move(fn);
  }
  uint64_t generation() const { return generation_; }

 private:
  enum class State : uint8_t { kReading, kHandling, kStreaming, kAnswered, kDone };

  bool keep_alive() const { return keep_alive_ && !impl_.stopping.load(); }
  std::string status_line(int status) const {
    return fmt::format("HTTP/1.{} {} {}\r\nServer: hinge\r\n", version_ >= 11 ? 1 : 0, status,
                       reason_phrase(status));
  }
  static void append_headers(const HttpHeaders& h, std::string* out) {
    for (const auto& [k, v] : h) {
      // Header injection guard: handlers never put CR/LF in values, but make sure.
      if (k.find_first_of("\r\n") != std::string::npos || v.find_first_of("\r\n") != std::string::npos)
        continue;
      *out += fmt::format("{}: {}\r\n", k, v);
    }
  }

  void do_read() {
    if (closed_) return;
    state_ = State::kReading;
    parser_.emplace();
    parser_->body_limit(impl_.config.max_body_bytes);
    parser_->header_limit(static_cast<uint32_t>(impl_.config.max_header_bytes));
    stream_.expires_after(seconds(impl_.config.idle_timeout_s));
    http::async_read(stream_, buffer_, *parser_,
                     [self = shared_from_this()](beast::error_code ec, size_t) { self->on_read(ec); });
  }

  void reply_error_and_close(int status, const std::string& message) {
    impl_.exchanges.fetch_add(1);
    linger_ = true;
    ++generation_;
    state_ = State::kHandling;
    keep_alive_ = false;
    ApiError e;
    e.http_status = status;
    e.message = message;
    HttpResponse r;
    r.status = status;
    r.body = api_error_body(e);
    do_respond(generation_, std::move(r));
  }

  void on_read(beast::error_code ec) {
    stream_.expires_never();
    if (closed_) return;
    if (ec == http::error::body_limit)
      return reply_error_and_close(413, fmt::format("request body exceeds {} bytes",
                                                    impl_.config.max_body_bytes));
    if (ec == http::error::header_limit)
      return reply_error_and_close(431, "request headers too large");
    if (ec && ec.category() == http::make_error_code(http::error::body_limit).category() &&
        ec != http::error::end_of_stream && ec != http::error::partial_message)
      return reply_error_and_close(400, "malformed HTTP request: " + ec.message());
    if (ec) return client_gone();

    auto& req = parser_->get();
    HttpRequest r;
    r.method = std::string(req.method_string());
    r.target = std::string(req.target());
    r.path = r.target.substr(0, r.target.find('?'));
    for (const auto& f : req) {
      std::string name(f.name_string());
      for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      r.headers.emplace_back(std::move(name), std::string(f.value()));
    }
    r.body = std::move(req.body());
    keep_alive_ = req.keep_alive();
    version_ = req.version();
    parser_.reset();
    ++generation_;
    state_ = State::kHandling;
    on_close_ = nullptr;
    answer_complete_ = false;
    impl_.exchanges.fetch_add(1);
    start_watch();
    // Handlers report errors as responses; anything that still escapes (an allocation
    // failure) must not take the I/O thread down: answer 500 and go on.
    try {
      impl_.handler(std::move(r), make_exchange());
    } catch (const std::exception& e) {
      HttpResponse resp;
      resp.status = 500;
      resp.body = api_error_body(ApiError::server_error(std::string("internal error: ") + e.what()));
      do_respond(generation_, std::move(resp));
    }
  }

  // Reads while the handler works: EOF or an error means the client went away; bytes are kept
  // (a pipelined next request) for the next parse.
  void start_watch() {
    if (watch_pending_ || closed_) return;
    if (buffer_.size() > impl_.config.max_header_bytes + impl_.config.max_body_bytes)
      return client_gone();
    watch_pending_ = true;
    stream_.async_read_some(buffer_.prepare(4096),
                            [self = shared_from_this()](beast::error_code ec, size_t n) {
                              self->on_watch(ec, n);
                            });
  }
  void on_watch(beast::error_code ec, size_t n) {
    watch_pending_ = false;
    if (closed_) return;
    if (!ec) {
      buffer_.commit(n);
      if (resume_read_) {
        resume_read_ = false;
        do_read();
      } else {
        start_watch();
      }
      return;
    }
    if (ec == net::error::operation_aborted && resume_read_) {
      resume_read_ = false;
      do_read();
      return;
    }
    client_gone();
  }

  void queue_bytes(std::string s) { out_.push_back(std::move(s)); }
  void pump() {
    if (writing_ || closed_) return;
    if (out_.empty()) {
      if (end_after_write_) {
        end_after_write_ = false;
        answer_done();
      }
      return;
    }
    auto buf = std::make_shared<std::string>();
    for (auto& s : out_) *buf += s;
    out_.clear();
    writing_ = true;
    stream_.expires_after(seconds(impl_.config.write_timeout_s));
    net::async_write(stream_, net::buffer(*buf),
                     [self = shared_from_this(), buf](beast::error_code ec, size_t) {
                       self->writing_ = false;
                       self->stream_.expires_never();
                       if (ec) return self->client_gone();
                       self->pump();
                     });
  }

  void answer_done() {
    impl_.exchanges.fetch_sub(1);
    state_ = State::kDone;
    answer_complete_ = true;
    on_close_ = nullptr;
    if (!keep_alive()) return shutdown();
    if (watch_pending_) {
      resume_read_ = true;
      beast::error_code ignored;
      stream_.socket().cancel(ignored);  // on_watch resumes reading
    } else {
      do_read();
    }
  }

  void shutdown() {
    if (closed_) return;
    closed_ = true;
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
    if (linger_ && !watch_pending_) {
      // The client may still be sending the body we refused: read and drop it for a moment so
      // the kernel does not answer with a reset that would destroy our error response.
      stream_.expires_after(std::chrono::seconds(1));
      discard(0);
      return;
    }
    stream_.socket().close(ignored);
  }
  void discard(size_t total) {
    auto buf = std::make_shared<std::array<char, 16384>>();
    stream_.async_read_some(net::buffer(*buf), [self = shared_from_this(), buf, total](
                                                   beast::error_code ec, size_t n) {
      if (!ec && total + n < (16u << 20)) return self->discard(total + n);
      beast::error_code ignored;
      self->stream_.socket().close(ignored);
    });
  }

  void client_gone() {
    if (closed_) return;
    closed_ = true;
    out_.clear();
    beast::error_code ignored;
    stream_.socket().close(ignored);
    if (state_ == State::kHandling || state_ == State::kStreaming || state_ == State::kAnswered) {
      impl_.exchanges.fetch_sub(1);
      state_ = State::kDone;
      if (on_close_) {
        auto fn = std::move(on_close_);
        on_close_ = nullptr;
        fn();
      }
    }
  }

  ExchangePtr make_exchange();

  beast::tcp_stream stream_;
  HttpServer::Impl& impl_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  State state_ = State::kReading;
  uint64_t generation_ = 0;
  unsigned version_ = 11;
  bool keep_alive_ = true;
  bool chunked_ = true;
  bool closed_ = false;
  bool writing_ = false;
  bool end_after_write_ = false;
  bool watch_pending_ = false;
  bool resume_read_ = false;
  bool answer_complete_ = false;  // the current generation's answer was fully written
  bool linger_ = false;           // refused before the whole request was read
  std::deque<std::string> out_;
  std::function<void()> on_close_;
};

namespace {

class BeastExchange final : public Exchange {
 public:
  BeastExchange(std::shared_ptr<Session> s, uint64_t gen) : s_(std::move(s)), gen_(gen) {}
  void respond(HttpResponse r) override {
    s_->post([s = s_, g = gen_, r = std::move(r)]() mutable { s->do_respond(g, std::move(r)); });
  }
  void start_stream(int status, std::string ct, HttpHeaders h) override {
    s_->post([s = s_, g = gen_, status, ct = std::move(ct), h = std::move(h)]() mutable {
      s->do_start_stream(g, status, std::move(ct), std::move(h));
    });
  }
  void write(std::string data) override {
    s_->post([s = s_, g = gen_, d = std::move(data)]() mutable { s->do_write(g, std::move(d)); });
  }
  void end_stream() override {
    s_->post([s = s_, g = gen_] { s->do_end_stream(g); });
  }
  void post(std::function<void()> fn) override {
    s_->post([fn = std::move(fn)] {
      try {
        fn();
      } catch (const std::exception& e) {
        std::fprintf(stderr, "hinge: internal error in a response: %s\n", e.what());
      }
    });
  }
  void on_close(std::function<void()> fn) override {
    s_->post([s = s_, g = gen_, fn = std::move(fn)]() mutable { s->do_on_close(g, std::move(fn)); });
  }

 private:
  std::shared_ptr<Session> s_;
  uint64_t gen_;
};

}  // namespace

ExchangePtr Session::make_exchange() {
  return std::make_shared<BeastExchange>(shared_from_this(), generation_);
}

void HttpServer::Impl::do_accept() {
  acceptor->async_accept(net::make_strand(ioc), [this](beast::error_code ec, tcp::socket socket) {
    if (ec) {
      if (ec == net::error::operation_aborted || !acceptor->is_open()) return;
      do_accept();  // EMFILE and the like: keep serving the connections we have
      return;
    }
    beast::error_code ignored;
    socket.set_option(tcp::no_delay(true), ignored);
    auto s = std::make_shared<Session>(std::move(socket), *this);
    {
      std::lock_guard lock(sessions_mu);
      std::erase_if(sessions, [](const std::weak_ptr<Session>& w) { return w.expired(); });
      sessions.push_back(s);
    }
    s->run();
    do_accept();
  });
}

StatusOr<std::unique_ptr<HttpServer>> HttpServer::start(const HttpServerConfig& config,
                                                        HttpHandler handler) {
  auto impl = std::make_unique<Impl>();
  impl->config = config;
  impl->handler = std::move(handler);
  beast::error_code ec;
  const auto address = net::ip::make_address(config.host, ec);
  if (ec) return Status::Errorf("--host {}: not an IP address ({})", config.host, ec.message());
  const tcp::endpoint ep(address, config.port);
  impl->acceptor.emplace(impl->ioc);
  impl->acceptor->open(ep.protocol(), ec);
  if (!ec) impl->acceptor->set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) impl->acceptor->bind(ep, ec);
  if (!ec) impl->acceptor->listen(net::socket_base::max_listen_connections, ec);
  if (ec)
    return Status::Errorf("cannot listen on {}:{}: {}", config.host, config.port, ec.message());
  impl->port = impl->acceptor->local_endpoint().port();
  impl->work.emplace(impl->ioc.get_executor());
  impl->do_accept();
  const int n = std::max(1, config.io_threads);
  for (int i = 0; i < n; ++i) impl->threads.emplace_back([p = impl.get()] { p->ioc.run(); });
  return std::unique_ptr<HttpServer>(new HttpServer(std::move(impl)));
}

HttpServer::HttpServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
HttpServer::~HttpServer() { stop(); }

uint16_t HttpServer::port() const { return impl_->port; }
int64_t HttpServer::open_connections() const { return impl_->connections.load(); }
int64_t HttpServer::pending_answers() const { return impl_->exchanges.load(); }

void HttpServer::stop_accepting() {
  net::post(impl_->ioc, [p = impl_.get()] {
    beast::error_code ignored;
    if (p->acceptor && p->acceptor->is_open()) p->acceptor->close(ignored);
  });
}

void HttpServer::stop() {
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

}  // namespace hinge::server
