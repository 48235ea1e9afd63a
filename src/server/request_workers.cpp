#include "server/request_workers.h"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <cstdio>
#include <exception>

namespace hinge::server {

RequestWorkers::RequestWorkers(int32_t threads, int32_t max_queued, size_t max_queued_bytes)
    : max_queued_(std::max(1, max_queued)),
      max_bulk_queued_(std::max(4, max_queued / 16)),
      max_queued_bytes_(max_queued_bytes),
      max_bulk_running_(std::max(1, threads - 1)) {
  for (int32_t i = 0; i < std::max(1, threads); ++i) threads_.emplace_back([this] { run(); });
}

RequestWorkers::~RequestWorkers() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (auto& t : threads_) t.join();
}

bool RequestWorkers::submit(std::function<void()> task, Kind kind, size_t bytes) {
  {
    std::lock_guard lock(mu_);
    if (static_cast<int32_t>(generation_.size() + bulk_.size()) >= max_queued_) return false;
    if (kind == Kind::kBulk && static_cast<int32_t>(bulk_.size()) >= max_bulk_queued_) return false;
    if (queued_bytes_ + bytes > max_queued_bytes_ && queued_bytes_ > 0) return false;
    queued_bytes_ += bytes;
    (kind == Kind::kBulk ? bulk_ : generation_).push_back(Task{std::move(task), bytes});
  }
  cv_.notify_all();  // a worker that may not take bulk work must not swallow the wake-up
  return true;
}

int32_t RequestWorkers::queued() const {
  std::lock_guard lock(mu_);
  return static_cast<int32_t>(generation_.size() + bulk_.size());
}

void RequestWorkers::run() {
  sched_param p{};
  (void)pthread_setschedparam(pthread_self(), SCHED_BATCH, &p);
  for (;;) {
    std::function<void()> task;
    bool bulk = false;
    {
      std::unique_lock lock(mu_);
      auto runnable = [this] {
        return !generation_.empty() || (!bulk_.empty() && bulk_running_ < max_bulk_running_);
      };
      cv_.wait(lock, [&] { return runnable() || (stop_ && generation_.empty() && bulk_.empty()); });
      if (!runnable()) return;  // stopping, nothing left
      bulk = generation_.empty();
      auto& q = bulk ? bulk_ : generation_;
      task = std::move(q.front().fn);
      queued_bytes_ -= q.front().bytes;
      q.pop_front();
      if (bulk) ++bulk_running_;
    }
    try {
      task();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "hinge: internal error in a request worker: %s\n", e.what());
    }
    if (bulk) {
      {
        std::lock_guard lock(mu_);
        --bulk_running_;
      }
      cv_.notify_all();
    }
  }
}

}  // namespace hinge::server
