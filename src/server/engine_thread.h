// EngineThread: one Engine driven by its own thread — the server's core. Other threads enqueue
// requests and cancel them; the engine itself stays single-threaded (only this thread touches
// it, and the admission controller, if any).
//
//   EngineThread et(std::move(engine), admission_config);       // or no admission control
//   SubmitTicket t = et.enqueue(request, {.user = "key"},
//                           [](const SubmitResult& r) {...},     // once: accepted or why not
//                           [](const RequestDelta& d) {...});    // every delta of every sample
//   et.cancel(t);                                                // queued or running
//
// Loop: take queued commands (enqueue, cancel), expire requests that waited too long, admit
// queued requests while they fit (sched::AdmissionController: worst-case KV blocks minus the
// prefix-cache hit, interactive reserve, bounded queue, per-user cap), run one step if anything
// is unfinished, hand each delta to its request's sink, release the reservations of finished
// requests, publish a stats snapshot; sleep on a condition variable when idle. A failed step is
// logged; the requests it scheduled get final kError deltas and the loop goes on.
//
// Callbacks run on the engine thread and must not block (the server posts to its I/O threads).
// on_result is called exactly once per enqueue: kAccepted before the first delta, or a rejection
// (then no delta ever follows). After the n-th finished delta of a request its sink is dropped.
// Without admission control a request is accepted at once if the engine's validation passes.
//
// Thread-safety: every public method is safe from any thread. Destruction stops the loop.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <variant>

#include "pressure/pressure_policy.h"
#include "hinge/engine.h"
#include "pressure/pressure_level.h"
#include "sched/admission.h"
#include "sched/kv_demand.h"

namespace hinge {

// What enqueue() and submit() hand back, for cancel() and cancel_sample(). Its own id space:
// tickets count every enqueue (a refused one too), while the engine's RequestId, which deltas
// carry, counts accepted requests and their samples; after one refusal (or one request with
// n > 1) the two disagree, so neither converts to the other.
struct SubmitTicket {
  uint64_t value = 0;
  constexpr SubmitTicket() = default;
  constexpr explicit SubmitTicket(uint64_t v) : value(v) {}
  constexpr auto operator<=>(const SubmitTicket&) const = default;
};

}  // namespace hinge

template <>
struct std::hash<hinge::SubmitTicket> {
  size_t operator()(hinge::SubmitTicket t) const noexcept { return std::hash<uint64_t>()(t.value); }
};

namespace hinge {

struct SubmitOptions {
  std::string user;  // per-user concurrency key (API key or `user`); empty: no per-user cap
  int32_t max_concurrent = 0;  // this key's cap (a tenant's); 0: max_concurrent_per_user
};

struct SubmitResult {
  enum class Kind : uint8_t {
    kAccepted,      // in the engine; deltas follow
    kInvalid,       // the engine's validation failed (400)
    kTooLarge,      // worst case over the per-request share of the KV pool (400)
    kUserLimit,     // per-user concurrency cap (429)
    kQueueFull,     // admission queue full (503)
    kTimedOut,      // waited in the queue longer than the limit (503)
    kShuttingDown,  // the server is draining or stopped (503)
    kPressure,      // memory pressure is critical: admission paused (503)
    kCancelled,     // cancel() before admission (the client went away)
  };
  Kind kind = Kind::kAccepted;
  std::string message;        // for the client; never prompt text
  int32_t retry_after_s = 0;  // kUserLimit / kQueueFull / kTimedOut / kShuttingDown
  double queue_seconds = 0;   // time from enqueue to the decision
  bool accepted() const { return kind == Kind::kAccepted; }
};
const char* submit_result_name(SubmitResult::Kind k);  // "accepted", "queue_full", ...

// Memory pressure as the engine thread applies it (pressure/pressure_policy.h).
struct PressureStats {
  pressure::PressureLevel level = pressure::PressureLevel::kNormal;    // memory
  pressure::PressureLevel thermal = pressure::PressureLevel::kNormal;  // temperature
  std::string reasons;               // the signals behind the level (no client data)
  int64_t transitions[3] = {0, 0, 0};  // entries into normal / elevated / critical
  int64_t rejected = 0;              // 503s while admission was paused
  int64_t capped = 0;                // new requests whose max_tokens was lowered
  int64_t shrinks = 0;               // prefix-cache shrinks
};

// What the dashboard and /metrics read: the engine's and admission's counters after a step.
struct EngineThreadStats {
  PressureStats pressure;
  EngineStats engine;
  std::optional<sched::AdmissionStats> admission;
  std::string kv_block_map;  // one char per block (kv::BlockPool legend), refreshed <= 4 Hz
  int32_t active = 0;        // requests enqueued and not finished or rejected
  bool draining = false;
};

class EngineThread {
 public:
  using Sink = std::function<void(const RequestDelta&)>;
  using ResultFn = std::function<void(const SubmitResult&)>;

  // admission: nullopt for none (every valid request goes straight to the engine's scheduler).
  // Its num_blocks and block_size_tokens are taken from the engine.
  explicit EngineThread(std::unique_ptr<Engine> engine,
                        std::optional<sched::AdmissionConfig> admission = std::nullopt,
                        PressurePolicyConfig pressure_policy = {});
  ~EngineThread();
  EngineThread(const EngineThread&) = delete;
  EngineThread& operator=(const EngineThread&) = delete;

  // Asynchronous: returns the request's ticket at once; on_result and sink are called on the
  // engine thread. Both are required.
  SubmitTicket enqueue(GenerateRequest request, SubmitOptions options, ResultFn on_result,
                       Sink sink);
  // Asynchronous; unknown or finished tickets are ignored. A queued request gets kCancelled, a
  // running one its final kAborted deltas.
  void cancel(SubmitTicket ticket);
  // Asynchronous: ends one sample (index in [0, n)) of a running request with kAborted (a stop
  // string matched it); ignored when unknown, finished, or not forked yet.
  void cancel_sample(SubmitTicket ticket, int32_t index);

  // Runs fn on the engine thread between steps (prefix-cache owner operations: purge, policy)
  // and returns its result; blocks until it ran. After stop(): runs nothing, returns -1.
  int32_t call(std::function<int32_t(Engine&)> fn);

  // Asynchronous: the memory-pressure level is now `level` (a pressure::PressureWatch calls
  // it on each transition); the engine thread applies pressure_actions() from its next loop
  // turn and keeps the KV limit in step with what requests hold. `reasons` goes to the log and
  // stats (never client data). `thermal`: the temperature's level, which lowers the work per
  // step only (pressure_policy.h).
  void set_pressure(pressure::PressureLevel level, std::string reasons,
                    pressure::PressureLevel thermal = pressure::PressureLevel::kNormal);

  // Blocking convenience: enqueue and wait for the decision; the ticket once accepted.
  StatusOr<SubmitTicket> submit(GenerateRequest request, Sink sink);

  // Snapshot taken after the last step.
  EngineThreadStats stats() const;
  int32_t num_active() const;  // requests enqueued and not finished or rejected
  // Blocks until the engine thread has published an idle snapshot (no request enqueued,
  // queued, running or holding KV blocks) or timeout_s passes; false on timeout. For tests and
  // graceful shutdown: no polling.
  bool wait_idle(double timeout_s) const;
  // The engine's settings (immutable after construction).
  int32_t max_model_len() const { return max_model_len_; }
  int32_t block_size() const { return block_size_; }
  int32_t kv_groups() const { return kv_groups_; }
  // The KV groups' shape for worst cases (sched/kv_demand.h): windows and prefill chunk.
  const sched::KvDemandShape& kv_demand() const { return kv_demand_; }
  bool detokenizes() const { return detokenizes_; }  // EngineConfig::detokenize
  // EngineConfig::context_policy is kShift: outputs may run past the context.
  bool shifts_context() const { return shifts_context_; }
  int32_t num_blocks() const { return num_blocks_; }
  // Worst case over which admission answers kTooLarge (blocks); INT32_MAX without admission.
  int32_t max_request_blocks() const { return max_request_blocks_; }

  // Stop accepting: later enqueues get kShuttingDown; queued and running requests go on.
  void drain();
  // Stops the loop: queued requests get kShuttingDown, running ones are aborted (their sinks get
  // final deltas), later enqueues are rejected. Idempotent; the destructor calls it.
  void stop();

 private:
  using Clock = std::chrono::steady_clock;
  struct Add {
    SubmitTicket ticket;
    GenerateRequest request;
    SubmitOptions options;
    ResultFn on_result;
    Sink sink;
    Clock::time_point at;
  };
  struct Cancel {
    SubmitTicket ticket;
    int32_t sample = -1;  // -1: the whole request
  };
  struct Call {
    std::function<int32_t(Engine&)> fn;
    std::shared_ptr<std::promise<int32_t>> done;
  };
  struct SetPressure {
    pressure::PressureLevel level;
    std::string reasons;
    pressure::PressureLevel thermal;
  };
  using Command = std::variant<Add, Cancel, Call, SetPressure>;
  struct Pending {  // queued in admission
    GenerateRequest request;
    ResultFn on_result;
    Sink sink;
    Clock::time_point at;
  };
  struct Active {
    SubmitTicket ticket;
    Sink sink;
    int32_t samples_left = 1;
  };

  void loop();
  void handle_add(Add& add, bool stopping);
  void handle_cancel(SubmitTicket ticket);
  void start(SubmitTicket ticket, Pending& p);
  void admit_queued();
  void handle_pressure(SetPressure& p);
  void apply_pressure(bool transition);  // pressure_actions() for the level and usage now
  bool paused() const { return actions_.pause_admission; }
  void dispatch(const std::vector<RequestDelta>& deltas);
  double seconds_since_start() const;
  void reject(ResultFn& fn, SubmitResult::Kind kind, std::string message, int32_t retry_s,
              Clock::time_point at);

  std::unique_ptr<Engine> engine_;  // engine thread only (after construction)
  std::optional<sched::AdmissionController> admission_;  // engine thread only
  const Clock::time_point t0_ = Clock::now();
  int32_t max_model_len_ = 0;
  int32_t block_size_ = 0;
  int32_t kv_groups_ = 1;
  sched::KvDemandShape kv_demand_;
  int32_t num_blocks_ = 0;
  int32_t max_request_blocks_ = INT32_MAX;
  bool detokenizes_ = true;
  bool shifts_context_ = false;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  mutable std::condition_variable idle_cv_;  // notified at each stats publication
  bool unpublished_ = false;  // guarded by mu_: commands taken, their outcome not yet in stats_
  std::deque<Command> queue_;  // guarded by mu_
  bool stopping_ = false;      // guarded by mu_
  bool draining_ = false;      // guarded by mu_
  uint64_t next_ticket_ = 1;   // guarded by mu_ (SubmitTicket values)
  EngineThreadStats stats_;    // guarded by mu_
  std::atomic<int32_t> num_active_{0};

  // Engine thread only.
  // Admission tracks tickets by their value (sched::AdmissionTicket::id).
  std::unordered_map<SubmitTicket, Pending> pending_;    // ticket -> queued request
  std::unordered_map<SubmitTicket, RequestId> running_;  // ticket -> engine id
  std::unordered_map<RequestId, Active> active_;         // engine id -> sink
  Clock::time_point last_map_{};
  PressurePolicyConfig pressure_policy_;
  PressureActions actions_;  // for pressure_.level
  PressureStats pressure_;
  std::thread thread_;
};

}  // namespace hinge
