// http::Session, the reading half: deadlines, headers, bodies and their budget, the watch read
// (pipelining, half-close), and closing. The writing half: session_write.cpp.
#include "http/session.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstdio>

#include <fmt/format.h>

#include "http/session_detail.h"

namespace hinge::http {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace bhttp = beast::http;
using tcp = net::ip::tcp;
using namespace detail;  // NOLINT(build/namespaces): this file's half of Session

namespace {

// The handler's view of one request on a Session: every call is posted to the strand.
class SessionExchange final : public Exchange {
 public:
  SessionExchange(std::shared_ptr<Session> s, uint64_t gen) : s_(std::move(s)), gen_(gen) {}
  void respond(HttpResponse r) override {
    s_->post([s = s_, g = gen_, r = std::move(r)]() mutable { s->do_respond(g, std::move(r)); });
  }
  void start_stream(int status, std::string ct, HttpHeaders h) override {
    s_->post([s = s_, g = gen_, status, ct = std::move(ct), h = std::move(h)]() mutable {
      s->do_start_stream(g, status, std::move(ct), std::move(h));
    });
  }
  void write(std::string d) override {
    s_->post([s = s_, g = gen_, d = std::move(d)]() mutable { s->do_write(g, std::move(d)); });
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
  void on_close(std::function<void(CloseReason)> fn) override {
    s_->post([s = s_, g = gen_, fn = std::move(fn)]() mutable { s->do_on_close(g, std::move(fn)); });
  }

 private:
  std::shared_ptr<Session> s_;
  uint64_t gen_;
};

}  // namespace

Session::Session(tcp::socket socket, Server::Impl& core, bool overflow)
    : socket_(std::move(socket)),
      core_(core),
      overflow_(overflow),
      read_timer_(socket_.get_executor()),
      write_timer_(socket_.get_executor()),
      peer_timer_(socket_.get_executor()),
      buffer_(core.config.max_header_bytes + kTrailerSlack) {
  if (core_.tls) tls_.emplace(socket_, *core_.tls);
  core_.connections.fetch_add(1);
  if (overflow_) core_.overflow.fetch_add(1);
}

Session::~Session() {
  core_.body_bytes.fetch_sub(body_reserved_);
  core_.output_queued.fetch_sub(static_cast<int64_t>(pending_.size() + inflight_.size() - inflight_off_));
  if (counted_exchange_) core_.exchanges.fetch_sub(1);
  if (overflow_) core_.overflow.fetch_sub(1);
  core_.connections.fetch_sub(1);
}

void Session::run() {
  net::dispatch(socket_.get_executor(), [self = shared_from_this()] {
    if (!self->tls_) return self->wait_request();
    // The handshake has the header timeout (a client that connects and sends nothing, or
    // drips a ClientHello, is a slowloris too).
    const double t = self->overflow_ ? kOverflowHeaderTimeout : self->core_.config.header_timeout_s;
    self->arm_read_deadline(Phase::kHeader, Clock::now() + seconds(t));
    self->tls_->async_handshake(net::ssl::stream_base::server,
                                [self](beast::error_code ec) { self->on_handshake(ec); });
  });
}

void Session::on_handshake(beast::error_code ec) {
  cancel_read_deadline();
  if (closed_) return;
  if (ec) {
    if (read_timed_out_) core_.timeouts_header.fetch_add(1);
    return close(CloseReason::kClientGone);
  }
  wait_request();
}

void Session::close_from_server() {
  post([self = shared_from_this()] { self->close(CloseReason::kServerStopping); });
}

bool Session::try_evict() {
  bool expected = true;
  if (!idle_.compare_exchange_strong(expected, false)) return false;
  post([self = shared_from_this()] {
    if (self->state_ == State::kIdle && !self->closed_) self->close(CloseReason::kClientGone);
  });
  return true;
}

// ---- reading --------------------------------------------------------------------------------

void Session::arm_read_deadline(Phase phase, Clock::time_point at) {
  deadline_phase_ = phase;
  read_timed_out_ = false;
  read_timer_.expires_at(at);
  read_timer_.async_wait([self = shared_from_this(), phase](beast::error_code ec) {
    if (ec || self->closed_ || self->deadline_phase_ != phase) return;
    if (self->read_timer_.expiry() > Clock::now()) return;  // re-armed meanwhile
    self->read_timed_out_ = true;
    // cancel() only reaches an operation the reactor holds. A composed read (a header or a
    // body read is several read_somes) whose inner completion is already queued starts its
    // next read_some after the cancel and would wait on: a client dripping a byte a second in
    // step with the deadline kept its connection. Shutting the receive side ends that read
    // too (it sees end of stream); the answer (408) still goes out on the send side.
    beast::error_code ignored;
    self->socket_.cancel(ignored);
    self->socket_.shutdown(tcp::socket::shutdown_receive, ignored);
  });
}

void Session::cancel_read_deadline() {
  deadline_phase_ = Phase::kNone;
  read_timer_.cancel();
}

void Session::wait_request() {
  if (closed_) return;
  state_ = State::kIdle;
  buffer_.max_size(core_.config.max_header_bytes + kTrailerSlack);
  if (buffer_.size() > 0) {  // a pipelined request
    if (!raw_pending_) return begin_header();
    restart_ = true;  // the watch read completes with operation_aborted, then we parse
    read_timed_out_ = false;
    beast::error_code ignored;
    socket_.cancel(ignored);
    return;
  }
  const double idle = overflow_ ? kOverflowHeaderTimeout : core_.config.keep_alive_timeout_s;
  arm_read_deadline(Phase::kIdle, Clock::now() + seconds(idle));
  idle_.store(!overflow_);
  watch();  // a watch read still pending serves as the idle read
}

void Session::begin_header() {
  idle_.store(false);
  state_ = State::kHeader;
  // Nothing of the previous request may shape this one's answers (an error before dispatch).
  version_ = 11;
  head_ = preflight_ = false;
  origin_.clear();
  cors_request_headers_.clear();
  parser_.emplace();
  parser_->header_limit(static_cast<uint32_t>(core_.config.max_header_bytes));
  parser_->body_limit(core_.config.max_body_bytes);
  const double t = overflow_ ? kOverflowHeaderTimeout : core_.config.header_timeout_s;
  arm_read_deadline(Phase::kHeader, Clock::now() + seconds(t));
  with_stream([&](auto& stream) {
    bhttp::async_read_header(stream, buffer_, *parser_,
                             [self = shared_from_this()](beast::error_code ec, size_t n) {
                               self->on_header(ec, n);
                             });
  });
}

// Maps a read error to its answer; true when the request is over (answered or closed).
bool Session::check_read_error(beast::error_code ec) {
  if (!ec) return false;
  const bool header = state_ == State::kHeader;
  if (read_timed_out_) {
    (header ? core_.timeouts_header : core_.timeouts_body).fetch_add(1);
    reply_error_and_close(408, header ? "the request headers did not arrive in time"
                                      : "the request body arrived too slowly", /*linger=*/false);
    return true;
  }
  if (ec == bhttp::error::body_limit) {
    reply_error_and_close(413, fmt::format("request body exceeds {} bytes",
                                           core_.config.max_body_bytes));
    return true;
  }
  if (ec == bhttp::error::header_limit || ec == bhttp::error::buffer_overflow) {
    reply_error_and_close(431, header ? "request headers too large"
                                      : "request trailers too large (headers and trailers "
                                        "together are limited)");
    return true;
  }
  if (ec.category() == bhttp::make_error_code(bhttp::error::body_limit).category() &&
      ec != bhttp::error::end_of_stream && ec != bhttp::error::partial_message) {
    reply_error_and_close(400, "malformed HTTP request: " + ec.message());
    return true;
  }
  close(CloseReason::kClientGone);
  return true;
}

void Session::on_header(beast::error_code ec, size_t n) {
  cancel_read_deadline();
  if (closed_) return;
  if (check_read_error(ec)) return;
  header_bytes_ = n;
  auto& req = parser_->get();
  version_ = req.version();
  keep_alive_ = req.keep_alive();
  const std::string_view method(req.method_string().data(), req.method_string().size());
  head_ = method == "HEAD";
  const auto origin = req[bhttp::field::origin];
  origin_.assign(origin.data(), origin.size());
  preflight_ = method == "OPTIONS" && req.find("access-control-request-method") != req.end();
  if (preflight_) {
    const auto h = req["access-control-request-headers"];
    cors_request_headers_.assign(h.data(), h.size());
  }
  if (auto r = check_method(method)) return reply_error_and_close(r->status, r->message);
  if (overflow_ && !((method == "GET" || head_) && req.target() == "/health")) {
    core_.refused.fetch_add(1);
    return reply_error_and_close(503, "too many connections; retry shortly");
  }
  const auto te = req[bhttp::field::transfer_encoding];
  if (auto r = check_transfer_encoding(std::string_view(te.data(), te.size())))
    return reply_error_and_close(r->status, r->message);
  if (parser_->is_done()) return dispatch();
  // Bodies being received share one budget (Beast reserves a Content-Length body at once).
  if (const auto cl = parser_->content_length()) {
    if (!reserve_body(*cl))
      return reply_error_and_close(503, "the server is receiving too many request bodies; "
                                        "retry shortly");
  }
  const auto expect = req[bhttp::field::expect];
  if (version_ >= 11 && expects_continue(std::string_view(expect.data(), expect.size())))
    send_now("HTTP/1.1 100 Continue\r\n\r\n");
  state_ = State::kBody;
  body_start_ = Clock::now();
  body_bytes_ = 0;
  const size_t left = core_.config.max_header_bytes > n ? core_.config.max_header_bytes - n : 0;
  buffer_.max_size(std::max(left, kTrailerSlack));
  read_body();
}

void Session::read_body() {
  const double allowed = core_.config.header_timeout_s +
                         static_cast<double>(body_bytes_) / core_.config.min_body_bytes_per_s;
  arm_read_deadline(Phase::kBody, body_start_ + seconds(allowed));
  with_stream([&](auto& stream) {
    bhttp::async_read_some(stream, buffer_, *parser_,
                           [self = shared_from_this()](beast::error_code ec, size_t n) {
                             self->on_body(ec, n);
                           });
  });
}

void Session::on_body(beast::error_code ec, size_t n) {
  cancel_read_deadline();
  if (closed_) return;
  body_bytes_ += n;
  if (check_read_error(ec)) return;
  if (!parser_->content_length() && !reserve_body(n))
    return reply_error_and_close(503, "the server is receiving too many request bodies; "
                                      "retry shortly");
  if (!parser_->is_done()) return read_body();
  dispatch();
}

void Session::dispatch() {
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
  parser_.reset();
  release_body();  // the handler owns the body now (RequestWorkers budgets it)
  read_timed_out_ = false;
  ++generation_;
  state_ = State::kHandling;
  answer_complete_ = false;
  on_close_ = nullptr;
  counted_exchange_ = true;
  core_.exchanges.fetch_add(1);
  buffer_.max_size(core_.config.max_header_bytes + kTrailerSlack);
  if (!half_closed_) watch();
  if (overflow_) keep_alive_ = false;
  // Handlers report errors as responses; anything that still escapes (an allocation failure)
  // must not take the I/O thread down: answer 500 and go on.
  try {
    core_.handler(std::move(r), std::make_shared<SessionExchange>(shared_from_this(), generation_));
  } catch (const std::exception& e) {
    HttpResponse resp;
    resp.status = 500;
    resp.body = error_body(500, std::string("internal error: ") + e.what());
    do_respond(generation_, std::move(resp));
  }
}

// The idle read (state kIdle) and the watch read while a request is handled: bytes are kept
// for the next parse (a pipelined request), EOF is a half-close, an error means the client left.
void Session::watch() {
  if (raw_pending_ || closed_ || half_closed_) return;
  const size_t room = beast::read_size(buffer_, 4096);
  if (room == 0) return;  // a full pipeline: stop reading (TCP pushes back) until it is parsed
  raw_pending_ = true;
  with_stream([&](auto& stream) {
    stream.async_read_some(buffer_.prepare(room),
                           [self = shared_from_this()](beast::error_code ec, size_t n) {
                             self->on_raw_read(ec, n);
                           });
  });
}

void Session::on_raw_read(beast::error_code ec, size_t n) {
  raw_pending_ = false;
  if (closed_) return;
  if (!ec) buffer_.commit(n);
  if (state_ == State::kLinger) {
    buffer_.consume(buffer_.size());
    if (ec) return close(CloseReason::kClientGone);
    arm_read_deadline(Phase::kLinger, std::min(Clock::now() + kLingerQuiet, linger_end_));
    return watch();
  }
  if (state_ == State::kIdle) {
    if (restart_ && ec == net::error::operation_aborted && !read_timed_out_) {
      restart_ = false;
      cancel_read_deadline();
      return begin_header();
    }
    restart_ = false;
    if (ec) {
      if (read_timed_out_) core_.timeouts_idle.fetch_add(1);
      return close(CloseReason::kClientGone);
    }
    cancel_read_deadline();
    return begin_header();
  }
  if (!ec) return watch();
  if (ec == net::error::eof) return on_half_close();
  close(CloseReason::kClientGone);
}

// EOF while a request is handled: the client may only have half-closed (it still reads) or
// have left. An interim 100 (HTTP/1.1 only) makes a peer that closed answer with a reset,
// which the periodic check notices; a half-closed one ignores it and gets its answer.
void Session::on_half_close() {
  half_closed_ = true;
  keep_alive_ = false;
  if (state_ == State::kHandling && version_ >= 11) send_now("HTTP/1.1 100 Continue\r\n\r\n");
  check_peer();
}

void Session::check_peer() {
  if (closed_ || state_ == State::kIdle) return;
  // After a FIN, recv() reports EOF even once a reset arrived; the reset shows as a pending
  // socket error and the connection leaving CLOSE_WAIT.
  const int fd = socket_.native_handle();
  int err = 0;
  socklen_t len = sizeof err;
  tcp_info ti{};
  socklen_t ti_len = sizeof ti;
  const bool reset = (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err != 0) ||
                     (::getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &ti_len) == 0 &&
                      ti.tcpi_state == TCP_CLOSE);
  if (reset) return close(CloseReason::kClientGone);
  peer_timer_.expires_after(kPeerCheckInterval);
  peer_timer_.async_wait([self = shared_from_this()](beast::error_code e) {
    if (!e) self->check_peer();
  });
}

// ---- request body budget -------------------------------------------------------------------

bool Session::reserve_body(uint64_t bytes) {
  const int64_t b = static_cast<int64_t>(std::min<uint64_t>(bytes, INT64_MAX / 4));
  if (core_.body_bytes.fetch_add(b) + b > static_cast<int64_t>(core_.config.max_total_body_bytes)) {
    core_.body_bytes.fetch_sub(b);
    return false;
  }
  body_reserved_ += b;
  return true;
}

void Session::release_body() {
  core_.body_bytes.fetch_sub(body_reserved_);
  body_reserved_ = 0;
}

// ---- closing --------------------------------------------------------------------------------

void Session::close(CloseReason reason) {
  if (closed_) return;
  closed_ = true;
  close_reason_ = reason;
  idle_.store(false);
  state_ = State::kClosed;
  core_.output_queued.fetch_sub(static_cast<int64_t>(pending_.size() + inflight_.size() - inflight_off_));
  pending_.clear();
  inflight_.clear();
  inflight_off_ = 0;
  release_body();  // (the parser stays: a cancelled read still completes into it)
  beast::error_code ignored;
  socket_.close(ignored);
  read_timer_.cancel();
  write_timer_.cancel();
  peer_timer_.cancel();
  if (counted_exchange_) {
    counted_exchange_ = false;
    core_.exchanges.fetch_sub(1);
  }
  if (on_close_) {
    auto fn = std::move(on_close_);
    on_close_ = nullptr;
    fn(reason);
  }
}

// After the last answer: send FIN; when the request was refused before it was read whole, read
// and drop what the client still sends (until linger_s, or 2 s without data) so the kernel does
// not answer it with a reset that destroys our response (a client that writes its whole body
// before reading still gets its 413).
void Session::graceful_close() {
  if (closed_) return;
  beast::error_code ignored;
  socket_.shutdown(tcp::socket::shutdown_send, ignored);
  if (!lingering_ || half_closed_) return close(CloseReason::kClientGone);
  state_ = State::kLinger;
  linger_end_ = Clock::now() + seconds(core_.config.linger_s);
  buffer_.consume(buffer_.size());
  arm_read_deadline(Phase::kLinger, std::min(Clock::now() + kLingerQuiet, linger_end_));
  watch();
}

}  // namespace hinge::http
