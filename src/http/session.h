// One HTTP/1.1 connection of http::Server, as a state machine on its strand:
//
//   idle --first byte--> header --complete--> body --complete--> handling --answer--> idle
//
// idle waits keep_alive_timeout_s for a request's first byte; header then has header_timeout_s
// (1 s on an overflow connection); body must keep a mean rate of min_body_bytes_per_s after
// that grace. Headers + chunked trailers are bounded by the read buffer's limit (431), bodies
// by max_body_bytes (413). While the handler works, a watch read keeps the socket read (EOF:
// a half-close, answered anyway; a reset: the client is gone). Output goes through one queue
// per connection, bounded (ServerConfig::max_output_bytes) and watched for stalls.
#pragma once

#include <utility>  // before Asio: its awaitable.hpp uses std::exchange

#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "http/server_impl.h"

namespace hinge::http {

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(boost::asio::ip::tcp::socket socket, Server::Impl& core, bool overflow);
  ~Session();

  void run();
  void close_from_server();  // any thread
  // Any thread: when the connection is waiting for a request, claims it and closes it (to make
  // room for a new one); false when it is busy.
  bool try_evict();

  template <typename F>
  void post(F&& f) {
    boost::asio::post(socket_.get_executor(), std::forward<F>(f));
  }
  // Exchange operations, run on the strand; `gen` ties them to one request.
  void do_respond(uint64_t gen, HttpResponse r);
  void do_start_stream(uint64_t gen, int status, std::string content_type, HttpHeaders headers);
  void do_write(uint64_t gen, std::string data);
  void do_end_stream(uint64_t gen);
  void do_on_close(uint64_t gen, std::function<void(CloseReason)> fn);

 private:
  enum class State : uint8_t {
    kIdle, kHeader, kBody, kHandling, kStreaming, kAnswered, kLinger, kClosed
  };
  enum class Phase : uint8_t { kNone, kIdle, kHeader, kBody, kLinger };

  // Reading.
  void wait_request();
  void begin_header();
  void on_header(boost::beast::error_code ec, size_t n);
  void read_body();
  void on_body(boost::beast::error_code ec, size_t n);
  bool check_read_error(boost::beast::error_code ec);
  void dispatch();
  void watch();
  void on_raw_read(boost::beast::error_code ec, size_t n);
  void on_half_close();
  void check_peer();
  void arm_read_deadline(Phase phase, std::chrono::steady_clock::time_point at);
  void cancel_read_deadline();

  // Writing.
  bool keep_alive() const;
  std::string status_line(int status) const;
  void append_common_headers(const HttpHeaders& extra, std::string* out) const;
  void queue_bytes(std::string s);
  bool backlog_too_large();  // cuts the connection (too slow) and returns true
  bool over_total_output();  // the same, for the budget of all connections
  bool reserve_body(uint64_t bytes);  // from Impl::body_bytes; false when over the budget
  void release_body();
  void pump();
  void on_written(boost::beast::error_code ec, size_t n);
  void send_now(std::string_view bytes);  // best effort, non-blocking (interim responses)
  void answer_done();
  void reply_error_and_close(int status, const std::string& message, bool linger = true);

  // Reads and writes go to the TLS stream when there is one, else to the socket.
  template <typename F>
  void with_stream(F&& f) {
    if (tls_) {
      f(*tls_);
    } else {
      f(socket_);
    }
  }
  void on_handshake(boost::beast::error_code ec);

  // Closing.
  void close(CloseReason reason);
  void graceful_close();

  boost::asio::ip::tcp::socket socket_;
  std::optional<boost::asio::ssl::stream<boost::asio::ip::tcp::socket&>> tls_;  // over socket_
  Server::Impl& core_;
  const bool overflow_;
  boost::asio::steady_timer read_timer_, write_timer_, peer_timer_;
  boost::beast::flat_buffer buffer_;
  std::optional<boost::beast::http::request_parser<boost::beast::http::string_body>> parser_;

  State state_ = State::kIdle;
  Phase deadline_phase_ = Phase::kNone;
  bool read_timed_out_ = false;
  std::atomic<bool> idle_{false};  // waiting for a request (eviction may claim it)
  bool raw_pending_ = false;       // the idle / watch read is in flight
  bool restart_ = false;           // cancelled the watch read to parse a pipelined request
  bool half_closed_ = false;       // the client sent EOF after its request
  bool closed_ = false;
  CloseReason close_reason_ = CloseReason::kClientGone;
  bool lingering_ = false;  // refused before the request was read whole: drain before closing
  std::chrono::steady_clock::time_point linger_end_;
  uint64_t generation_ = 0;
  bool counted_exchange_ = false;  // this generation is counted in Impl::exchanges
  bool answer_complete_ = false;   // this generation's answer was fully written

  // The current request.
  unsigned version_ = 11;
  bool keep_alive_ = true;
  bool head_ = false;
  bool preflight_ = false;
  std::string origin_, cors_request_headers_;
  size_t header_bytes_ = 0;
  size_t body_bytes_ = 0;
  int64_t body_reserved_ = 0;  // this request's share of Impl::body_bytes
  std::chrono::steady_clock::time_point body_start_;
  std::function<void(CloseReason)> on_close_;

  // The current answer.
  bool chunked_ = true;
  bool end_after_write_ = false;
  bool writing_ = false;
  std::string inflight_;  // being written from inflight_off_
  size_t inflight_off_ = 0;
  std::string pending_;   // queued behind it
};

}  // namespace hinge::http
