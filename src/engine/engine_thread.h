// EngineThread: one Engine driven by its own thread — the shape the server needs. Other threads
// submit requests and abort them; each request's deltas go to the sink given with it. The engine
// itself stays single-threaded: only the engine thread touches it.
//
//   EngineThread et(std::move(engine));
//   auto id = et.submit(request, [](const RequestDelta& d) { ... });  // sink runs on the engine
//   et.abort(*id);                                                    // thread; must not block
//
// Loop: take queued commands (add, abort), run one step if anything is unfinished, hand each
// delta to its request's sink, publish a stats snapshot; sleep on a condition variable when idle.
// A request's sink sees every delta of every sample, the last one per sample with finished();
// after the n-th finished delta the sink is dropped.
//
// Thread-safety: every public method is safe from any thread. Destruction stops the loop (see
// stop()).
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <variant>

#include "hinge/engine.h"

namespace hinge {

class EngineThread {
 public:
  using Sink = std::function<void(const RequestDelta&)>;

  explicit EngineThread(std::unique_ptr<Engine> engine);
  ~EngineThread();
  EngineThread(const EngineThread&) = delete;
  EngineThread& operator=(const EngineThread&) = delete;

  // Queues the request and waits until the engine thread has accepted or rejected it (at most
  // one step). Errors: the engine's validation, or the thread is stopped.
  StatusOr<RequestId> submit(GenerateRequest request, Sink sink);
  // Asynchronous; unknown or finished ids are ignored. The sink gets the final kAborted deltas.
  void abort(RequestId id);

  // Snapshot taken after the last step.
  EngineStats stats() const;
  int32_t num_active() const;  // requests whose sink is still attached

  // Stops the loop: requests still running are aborted (their sinks get final deltas), later
  // submits fail. Idempotent; the destructor calls it.
  void stop();

 private:
  struct Add {
    GenerateRequest request;
    Sink sink;
    std::promise<StatusOr<RequestId>> result;
  };
  struct Abort {
    RequestId id;
  };
  using Command = std::variant<Add, Abort>;
  struct Active {
    Sink sink;
    int32_t samples_left = 1;
  };

  void loop();
  void dispatch(const std::vector<RequestDelta>& deltas);

  std::unique_ptr<Engine> engine_;  // engine thread only (after construction)
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Command> queue_;  // guarded by mu_
  bool stopping_ = false;      // guarded by mu_
  EngineStats stats_;          // guarded by mu_
  int32_t num_active_ = 0;     // guarded by mu_
  std::unordered_map<RequestId, Active> active_;  // engine thread only
  std::thread thread_;
};

}  // namespace hinge
