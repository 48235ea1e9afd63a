// RequestWorkers: a small pool for the CPU-heavy part of a request before it reaches the
// engine (JSON parsing, chat-template rendering, tokenization), so the I/O threads only move
// bytes and stay responsive (/health, streams) however large the bodies others send. Bounded:
// submit() refuses when max_queued tasks wait (the caller answers 503). Workers run at
// SCHED_BATCH so a woken I/O thread preempts them.
//
// Two classes: generation requests are taken first, and bulk tasks (/tokenize, /detokenize of
// arbitrary text) may occupy at most threads - 1 workers at once (1 with one thread) and at
// most max_queued / 16 (>= 4) queue places, so a flood of large /tokenize bodies never holds
// every worker or the whole queue while generation requests wait. The queued tasks' bodies
// (`bytes` at submit) are bounded by max_queued_bytes together.
//
// Thread-safety: submit() from any thread; the destructor runs what is queued, then joins.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace hinge::server {

class RequestWorkers {
 public:
  RequestWorkers(int32_t threads, int32_t max_queued, size_t max_queued_bytes = 256u << 20);
  ~RequestWorkers();
  RequestWorkers(const RequestWorkers&) = delete;
  RequestWorkers& operator=(const RequestWorkers&) = delete;

  // Queues `task` (holding `bytes` of request data); false (task dropped) when its class's
  // queue is full or the bytes would pass max_queued_bytes. Tasks must not throw (an escaping
  // exception is reported on stderr and dropped).
  enum class Kind : uint8_t { kGeneration, kBulk };
  bool submit(std::function<void()> task, Kind kind = Kind::kGeneration, size_t bytes = 0);
  int32_t queued() const;

 private:
  void run();

  struct Task {
    std::function<void()> fn;
    size_t bytes = 0;
  };
  const int32_t max_queued_;
  const int32_t max_bulk_queued_;
  const size_t max_queued_bytes_;
  size_t queued_bytes_ = 0;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Task> generation_, bulk_;
  int32_t max_bulk_running_ = 1;
  int32_t bulk_running_ = 0;
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace hinge::server
