#include "engine/engine_thread.h"

#include <cstdio>
#include <utility>

namespace hinge {

EngineThread::EngineThread(std::unique_ptr<Engine> engine) : engine_(std::move(engine)) {
  HINGE_CHECK(engine_ != nullptr);
  stats_ = engine_->stats();
  thread_ = std::thread([this] { loop(); });
}

EngineThread::~EngineThread() { stop(); }

StatusOr<RequestId> EngineThread::submit(GenerateRequest request, Sink sink) {
  if (!sink) return Status::Error("submit: a sink is required");
  std::future<StatusOr<RequestId>> result;
  {
    std::lock_guard lock(mu_);
    if (stopping_) return Status::Error("the engine is shutting down");
    Add add{std::move(request), std::move(sink), {}};
    result = add.result.get_future();
    queue_.emplace_back(std::move(add));
  }
  cv_.notify_one();
  return result.get();
}

void EngineThread::abort(RequestId id) {
  {
    std::lock_guard lock(mu_);
    if (stopping_) return;
    queue_.emplace_back(Abort{id});
  }
  cv_.notify_one();
}

EngineStats EngineThread::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

int32_t EngineThread::num_active() const {
  std::lock_guard lock(mu_);
  return num_active_;
}

void EngineThread::stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_one();
  if (thread_.joinable()) thread_.join();
}

void EngineThread::dispatch(const std::vector<RequestDelta>& deltas) {
  for (const RequestDelta& d : deltas) {
    auto it = active_.find(d.id);
    if (it == active_.end()) continue;
    it->second.sink(d);
    if (d.finished() && --it->second.samples_left == 0) active_.erase(it);
  }
}

void EngineThread::loop() {
  std::vector<RequestDelta> deltas;
  std::deque<Command> commands;
  for (;;) {
    bool stopping = false;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] { return stopping_ || !queue_.empty() || engine_->has_unfinished(); });
      commands.swap(queue_);
      stopping = stopping_;
    }
    for (Command& c : commands) {
      if (auto* add = std::get_if<Add>(&c)) {
        const int32_t n = add->request.n;
        auto id = stopping ? StatusOr<RequestId>(Status::Error("the engine is shutting down"))
                           : engine_->add_request(std::move(add->request));
        if (id.ok()) active_.emplace(*id, Active{std::move(add->sink), n});
        add->result.set_value(std::move(id));
      } else {
        engine_->abort(std::get<Abort>(c).id);
      }
    }
    commands.clear();
    if (stopping)
      for (const auto& [id, a] : active_) engine_->abort(id);
    if (engine_->has_unfinished()) {
      if (Status st = engine_->step(&deltas); !st.ok()) {
        // A failed step is a bug or a broken model: abort everything rather than spin.
        std::fprintf(stderr, "hinge: engine step failed: %s\n", st.message().c_str());
        for (const auto& [id, a] : active_) engine_->abort(id);
        continue;
      }
      dispatch(deltas);
    }
    {
      std::lock_guard lock(mu_);
      stats_ = engine_->stats();
      num_active_ = static_cast<int32_t>(active_.size());
      if (stopping_ && queue_.empty() && !engine_->has_unfinished()) break;
    }
  }
}

}  // namespace hinge
