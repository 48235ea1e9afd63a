#include "cluster/kv_event_publisher.h"

#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <zmq.hpp>

namespace hinge::cluster {

struct KvEventPublisher::Impl {
  zmq::context_t ctx{1};
  zmq::socket_t pub{ctx, zmq::socket_type::pub};
  zmq::socket_t replay;  // unset without a replay endpoint
};

namespace {

void put_be64(uint64_t v, char* out) {
  for (int i = 7; i >= 0; --i) {
    out[i] = static_cast<char>(v & 0xff);
    v >>= 8;
  }
}

// ZeroMQ's form of an endpoint: "tcp://HOST:0" asks for any free port ("tcp://HOST:*").
StatusOr<std::string> zmq_endpoint(const std::string& e, const char* flag) {
  if (e.rfind("ipc://", 0) == 0 && e.size() > 6) return e;
  if (e.rfind("tcp://", 0) != 0)
    return Status::Errorf("{} '{}': use tcp://HOST:PORT (or ipc://PATH)", flag, e);
  const size_t colon = e.rfind(':');
  if (colon == std::string::npos || colon < 6 || colon + 1 == e.size())
    return Status::Errorf("{} '{}': no port; use tcp://HOST:PORT (PORT 0: any free port)", flag, e);
  const std::string port = e.substr(colon + 1);
  if (port == "0" || port == "*") return e.substr(0, colon) + ":*";
  for (char c : port)
    if (c < '0' || c > '9')
      return Status::Errorf("{} '{}': port '{}' is not a number", flag, e, port);
  if (port.size() > 5 || std::stoi(port) > 65535)
    return Status::Errorf("{} '{}': port {} is out of range", flag, e, port);
  return e;
}

StatusOr<std::string> bind(zmq::socket_t& s, const std::string& endpoint, const char* flag) {
  HINGE_ASSIGN_OR_RETURN(const std::string ep, zmq_endpoint(endpoint, flag));
  try {
    s.bind(ep);
    return s.get(zmq::sockopt::last_endpoint);
  } catch (const zmq::error_t& err) {
    return Status::Errorf("{} {}: cannot bind: {}", flag, endpoint, err.what());
  }
}

}  // namespace

std::string kv_event_topic(std::string_view host, int port, std::string_view model) {
  return fmt::format("kv@{}:{}@{}", host, port, model);
}

KvEventPublisher::KvEventPublisher(const KvEventPublisherOptions& options)
    : options_(options), impl_(std::make_unique<Impl>()) {}

StatusOr<std::unique_ptr<KvEventPublisher>> KvEventPublisher::start(
    const KvEventPublisherOptions& options) {
  if (options.buffer_batches == 0 || options.max_queued_batches == 0)
    return Status::Error("KV events: buffer and queue sizes must be at least 1");
  std::unique_ptr<KvEventPublisher> p(new KvEventPublisher(options));
  Impl& z = *p->impl_;
  z.pub.set(zmq::sockopt::sndhwm, options.send_hwm);
  z.pub.set(zmq::sockopt::linger, 0);
  HINGE_ASSIGN_OR_RETURN(p->endpoint_, bind(z.pub, options.endpoint, "--kv-events"));
  if (!options.replay_endpoint.empty()) {
    z.replay = zmq::socket_t(z.ctx, zmq::socket_type::router);
    z.replay.set(zmq::sockopt::linger, 0);
    HINGE_ASSIGN_OR_RETURN(p->replay_endpoint_,
                           bind(z.replay, options.replay_endpoint, "--kv-events-replay"));
  }
  p->thread_ = std::thread([raw = p.get()] { raw->run(); });
  return p;
}

KvEventPublisher::~KvEventPublisher() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void KvEventPublisher::publish(kv::KvEventLog* log) {
  std::unique_lock<std::mutex> lock(mu_);
  if (queue_.size() >= options_.max_queued_batches) {
    lock.unlock();
    log->clear();
    if (dropped_.fetch_add(1) == 0)
      std::fprintf(stderr, "hinge: KV events: the publisher fell behind; batches dropped "
                           "(subscribers resynchronize on the next all-cleared or by replay)\n");
    return;
  }
  if (spare_.empty()) {
    queue_.emplace_back();
  } else {
    queue_.push_back(std::move(spare_.back()));
    spare_.pop_back();
  }
  queue_.back().swap(*log);  // *log gets the recycled (empty) buffers
  lock.unlock();
  cv_.notify_one();
}

void KvEventPublisher::run() {
  const auto deadline_after_stop = std::chrono::seconds(1);
  std::chrono::steady_clock::time_point stop_at{};
  std::deque<kv::KvEventLog> work;
  while (true) {
    if (impl_->replay) {
      zmq::pollitem_t item{impl_->replay.handle(), 0, ZMQ_POLLIN, 0};
      zmq::poll(&item, 1, std::chrono::milliseconds(5));
      if (item.revents & ZMQ_POLLIN) serve_replay();
    }
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (!impl_->replay)
        cv_.wait_for(lock, std::chrono::milliseconds(100), [&] { return stop_ || !queue_.empty(); });
      if (stop_ && stop_at == std::chrono::steady_clock::time_point{})
        stop_at = std::chrono::steady_clock::now() + deadline_after_stop;
      if (queue_.empty() && stop_) break;
      work.swap(queue_);
    }
    for (kv::KvEventLog& log : work) {
      if (stop_at != std::chrono::steady_clock::time_point{} &&
          std::chrono::steady_clock::now() > stop_at)
        break;
      send_batch(log);
    }
    std::lock_guard<std::mutex> lock(mu_);
    for (kv::KvEventLog& log : work) {
      log.clear();
      spare_.push_back(std::move(log));
    }
    work.clear();
    if (stop_at != std::chrono::steady_clock::time_point{} &&
        std::chrono::steady_clock::now() > stop_at)
      break;
  }
}

void KvEventPublisher::send_batch(const kv::KvEventLog& log) {
  const double ts =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  payload_.clear();
  encode_kv_event_batch(log, ts, options_.wire, &payload_);
  char seq[8];
  put_be64(next_seq_, seq);
  zmq::socket_t& pub = impl_->pub;
  // PUB never blocks: past the high-water mark a subscriber's messages are dropped by ZeroMQ.
  pub.send(zmq::buffer(options_.topic), zmq::send_flags::sndmore);
  pub.send(zmq::buffer(seq, 8), zmq::send_flags::sndmore);
  pub.send(zmq::buffer(payload_), zmq::send_flags::none);
  if (replay_buffer_.size() >= options_.buffer_batches) replay_buffer_.pop_front();
  replay_buffer_.emplace_back(next_seq_, payload_);
  ++next_seq_;
  sent_.fetch_add(1);
}

void KvEventPublisher::serve_replay() {
  zmq::socket_t& s = impl_->replay;
  std::vector<zmq::message_t> frames;
  while (true) {
    zmq::message_t m;
    if (!s.recv(m, zmq::recv_flags::dontwait)) return;
    const bool more = m.more();
    frames.push_back(std::move(m));
    if (!more) break;
    if (frames.size() > 8) {  // not a replay request: drain and ignore the rest
      while (s.get(zmq::sockopt::rcvmore)) {
        zmq::message_t skip;
        if (!s.recv(skip, zmq::recv_flags::dontwait)) break;
      }
      return;
    }
  }
  // [identity, "", seq] from REQ/DEALER-with-delimiter, [identity, seq] from a bare DEALER.
  const bool delimited = frames.size() == 3 && frames[1].size() == 0;
  if (!(delimited || frames.size() == 2) || frames.back().size() != 8) return;
  replays_.fetch_add(1);
  uint64_t start = 0;
  const auto* b = static_cast<const unsigned char*>(frames.back().data());
  for (int i = 0; i < 8; ++i) start = (start << 8) | b[i];
  const std::string identity(static_cast<const char*>(frames[0].data()), frames[0].size());
  auto reply = [&](const char* seq, const std::string& payload) {
    s.send(zmq::buffer(identity), zmq::send_flags::sndmore);
    if (delimited) s.send(zmq::message_t(), zmq::send_flags::sndmore);
    s.send(zmq::buffer(seq, 8), zmq::send_flags::sndmore);
    s.send(zmq::buffer(payload), zmq::send_flags::none);
  };
  char seq[8];
  for (const auto& [n, payload] : replay_buffer_) {
    if (n < start) continue;
    put_be64(n, seq);
    reply(seq, payload);
  }
  put_be64(~uint64_t{0}, seq);  // -1: the end of the replay
  reply(seq, std::string());
}

}  // namespace hinge::cluster
