// http::Session, the writing half: status lines and headers, whole responses and streams, the
// output queue with its per-connection and global budgets and the write-stall timer, and the
// transport's own error answers. The reading half and closing: session.cpp.
#include "http/session.h"

#include <algorithm>

#include <fmt/format.h>

#include "http/session_detail.h"

namespace hinge::http {

namespace net = boost::asio;
namespace beast = boost::beast;
using namespace detail;  // NOLINT(build/namespaces): this file's half of Session

// ---- writing --------------------------------------------------------------------------------

bool Session::keep_alive() const {
  return keep_alive_ && !half_closed_ && !core_.stopping.load() && !core_.draining.load();
}

std::string Session::status_line(int status) const {
  return fmt::format("HTTP/1.{} {} {}\r\nServer: hinge\r\n", version_ >= 11 ? 1 : 0, status,
                     reason_phrase(status));
}

void Session::append_common_headers(const HttpHeaders& extra, std::string* out) const {
  // Header injection guard: handlers never put CR/LF in names or values, but make sure.
  for (const auto& [k, v] : extra)
    if (header_is_safe(k, v)) *out += fmt::format("{}: {}\r\n", k, v);
  for (const auto& [k, v] : core_.cors.headers(origin_, preflight_, cors_request_headers_))
    if (header_is_safe(k, v)) *out += fmt::format("{}: {}\r\n", k, v);
  *out += keep_alive() ? "Connection: keep-alive\r\n\r\n" : "Connection: close\r\n\r\n";
}

void Session::do_respond(uint64_t gen, HttpResponse r) {
  if (gen != generation_ || state_ != State::kHandling || closed_) return;
  state_ = State::kAnswered;
  std::string out = status_line(r.status);
  const bool no_body = r.status == 204 || r.status == 304;
  if (!no_body)
    out += fmt::format("Content-Type: {}\r\nContent-Length: {}\r\n", r.content_type, r.body.size());
  append_common_headers(r.headers, &out);
  if (!head_ && !no_body) out += r.body;
  queue_bytes(std::move(out));
  end_after_write_ = true;
  if (over_total_output()) return;
  pump();
}

void Session::do_start_stream(uint64_t gen, int status, std::string content_type, HttpHeaders headers) {
  if (gen != generation_ || state_ != State::kHandling || closed_) return;
  state_ = State::kStreaming;
  chunked_ = version_ >= 11 && !head_;
  if (version_ < 11) keep_alive_ = false;  // HTTP/1.0: the body ends with the connection
  std::string out = status_line(status);
  out += fmt::format("Content-Type: {}\r\nCache-Control: no-cache\r\n", content_type);
  if (chunked_) out += "Transfer-Encoding: chunked\r\n";
  append_common_headers(headers, &out);
  queue_bytes(std::move(out));
  pump();
}

void Session::do_write(uint64_t gen, std::string data) {
  if (gen != generation_ || state_ != State::kStreaming || closed_ || data.empty() || head_) return;
  if (chunked_) {
    std::string c = fmt::format("{:x}\r\n", data.size());
    c += data;
    c += "\r\n";
    queue_bytes(std::move(c));
  } else {
    queue_bytes(std::move(data));
  }
  if (backlog_too_large()) return;
  pump();
}

void Session::do_end_stream(uint64_t gen) {
  if (gen != generation_ || state_ != State::kStreaming || closed_) return;
  state_ = State::kAnswered;
  if (chunked_) queue_bytes("0\r\n\r\n");
  end_after_write_ = true;
  pump();
}

void Session::do_on_close(uint64_t gen, std::function<void(CloseReason)> fn) {
  if (gen != generation_ || answer_complete_) return;
  if (closed_) return fn(close_reason_);  // it closed before the handler asked
  on_close_ = std::move(fn);
}

void Session::queue_bytes(std::string s) {
  core_.output_queued.fetch_add(static_cast<int64_t>(s.size()));
  if (pending_.empty()) {
    pending_ = std::move(s);
  } else {
    pending_ += s;
  }
}

// A stream's backlog is bounded: a client that stopped reading must not make the server hold
// all it would have sent (a whole response is bounded by the handler that built it).
bool Session::backlog_too_large() {
  const size_t queued = pending_.size() + inflight_.size() - inflight_off_;
  if (queued <= core_.config.max_output_bytes) return over_total_output();
  core_.too_slow.fetch_add(1);
  close(CloseReason::kClientTooSlow);
  return true;
}

// All connections' unsent output together is bounded too (whole responses included): past
// max_total_output_bytes, a connection holding more than 64 KiB of it is cut.
bool Session::over_total_output() {
  const size_t queued = pending_.size() + inflight_.size() - inflight_off_;
  if (static_cast<size_t>(core_.output_queued.load()) <= core_.config.max_total_output_bytes ||
      queued <= kSlowCutMinBytes)
    return false;
  core_.too_slow.fetch_add(1);
  close(CloseReason::kClientTooSlow);
  return true;
}

void Session::pump() {
  if (writing_ || closed_) return;
  if (inflight_off_ == inflight_.size()) {
    inflight_.clear();
    inflight_off_ = 0;
    std::swap(inflight_, pending_);
  }
  if (inflight_.empty()) {
    if (end_after_write_) {
      end_after_write_ = false;
      answer_done();
    }
    return;
  }
  writing_ = true;
  write_timer_.expires_after(seconds(core_.config.write_stall_timeout_s));
  write_timer_.async_wait([self = shared_from_this()](beast::error_code ec) {
    if (ec || self->closed_ || !self->writing_) return;
    if (self->write_timer_.expiry() > Clock::now()) return;
    self->core_.too_slow.fetch_add(1);
    self->close(CloseReason::kClientTooSlow);
  });
  with_stream([&](auto& stream) {
    stream.async_write_some(
        net::buffer(inflight_.data() + inflight_off_, inflight_.size() - inflight_off_),
        [self = shared_from_this()](beast::error_code ec, size_t n) { self->on_written(ec, n); });
  });
}

void Session::on_written(beast::error_code ec, size_t n) {
  writing_ = false;
  write_timer_.cancel();
  if (closed_) return;
  if (ec) return close(CloseReason::kClientGone);
  inflight_off_ += n;
  core_.output_queued.fetch_sub(static_cast<int64_t>(n));
  pump();
}

void Session::send_now(std::string_view bytes) {
  if (writing_ || !pending_.empty() || inflight_off_ != inflight_.size()) return;
  if (tls_) {  // no raw bytes on a TLS connection: the interim answer goes through the queue
    queue_bytes(std::string(bytes));
    return pump();
  }
  (void)::send(socket_.native_handle(), bytes.data(), bytes.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
}

void Session::answer_done() {
  if (counted_exchange_) {
    counted_exchange_ = false;
    core_.exchanges.fetch_sub(1);
  }
  answer_complete_ = true;
  on_close_ = nullptr;
  peer_timer_.cancel();
  if (!keep_alive()) return graceful_close();
  wait_request();
}

void Session::reply_error_and_close(int status, const std::string& message, bool linger) {
  lingering_ = linger && (state_ == State::kHeader || state_ == State::kBody);
  parser_.reset();
  release_body();
  ++generation_;
  state_ = State::kHandling;
  answer_complete_ = false;
  keep_alive_ = false;
  counted_exchange_ = true;
  core_.exchanges.fetch_add(1);
  HttpResponse r;
  r.status = status;
  if (status == 503) r.headers.emplace_back("Retry-After", "1");
  r.body = error_body(status, message);
  do_respond(generation_, std::move(r));
}


}  // namespace hinge::http
