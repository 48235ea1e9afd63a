// KvEventPublisher: puts the engine's KV events on a ZeroMQ PUB socket in vLLM's wire format
// (kv_event_wire.h), with vLLM's replay service on a ROUTER socket. hinge binds both endpoints
// and subscribers connect (as llm-d's pod discovery and Dynamo's relay do).
//
//   PUB     frames [topic, seq (8-byte big-endian, from 0), payload], one message per batch
//   ROUTER  a request [identity, "", start_seq (8-byte big-endian)] (a REQ or DEALER client)
//           is answered with [identity, "", seq, payload] for every buffered batch with
//           seq >= start_seq, oldest first, then [identity, "", -1 (8 bytes), ""]
//           (a DEALER that sends no empty delimiter gets replies without one).
//
// The engine thread calls publish() once per step that changed the cache: the batch is
// swapped into a recycled log under a mutex (no allocation once warm, no I/O); the publisher's
// own thread encodes and sends it and keeps the last buffer_batches payloads for replay.
// ZeroMQ's PUB drops messages for a subscriber that is too slow (the high-water mark), which
// is what the sequence numbers and the replay service are for. A batch the publisher's queue
// has no room for is dropped and counted (dropped_batches): its sequence number is never used,
// so subscribers see a contiguous stream of what was sent.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "cluster/kv_event_wire.h"
#include "common/status.h"
#include "kv/kv_events.h"

namespace hinge::cluster {

struct KvEventPublisherOptions {
  std::string endpoint;         // tcp://HOST:PORT (PORT 0: a free port) or ipc://PATH
  std::string replay_endpoint;  // the same forms; empty: no replay service
  std::string topic;            // first frame of every message
  KvEventWire wire;
  size_t buffer_batches = 10000;  // kept for replay (vLLM's buffer_steps)
  size_t max_queued_batches = 10000;
  int32_t send_hwm = 100000;  // ZeroMQ high-water mark of the PUB socket (messages)
};

class KvEventPublisher final : public kv::KvEventSink {
 public:
  // Binds the sockets (errors: bad endpoint, address in use) and starts the thread. The first
  // batch (sequence 0) is the engine's all-cleared.
  static StatusOr<std::unique_ptr<KvEventPublisher>> start(const KvEventPublisherOptions& options);
  // Sends what is queued (for up to a second), then closes the sockets.
  ~KvEventPublisher() override;

  void publish(kv::KvEventLog* log) override;

  // The endpoints bound (a port 0 resolved).
  const std::string& endpoint() const { return endpoint_; }
  const std::string& replay_endpoint() const { return replay_endpoint_; }
  uint64_t batches_sent() const { return sent_.load(); }
  uint64_t dropped_batches() const { return dropped_.load(); }
  uint64_t replay_requests() const { return replays_.load(); }

  struct Impl;  // the ZeroMQ sockets

 private:
  explicit KvEventPublisher(const KvEventPublisherOptions& options);
  void run();
  void send_batch(const kv::KvEventLog& log);
  void serve_replay();

  KvEventPublisherOptions options_;
  std::unique_ptr<Impl> impl_;
  std::string endpoint_;
  std::string replay_endpoint_;

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<kv::KvEventLog> queue_;   // guarded by mu_
  std::vector<kv::KvEventLog> spare_;  // emptied logs to recycle, guarded by mu_
  bool stop_ = false;                  // guarded by mu_

  // Publisher thread only.
  uint64_t next_seq_ = 0;
  std::deque<std::pair<uint64_t, std::string>> replay_buffer_;
  std::string payload_;

  std::atomic<uint64_t> sent_{0};
  std::atomic<uint64_t> dropped_{0};
  std::atomic<uint64_t> replays_{0};
  std::thread thread_;
};

// "kv@<host>:<port>@<model>", llm-d's topic form: host and port of the replica's HTTP server.
std::string kv_event_topic(std::string_view host, int port, std::string_view model);

}  // namespace hinge::cluster
