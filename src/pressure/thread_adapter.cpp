#include "pressure/thread_adapter.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <utility>

namespace hinge {
namespace {

pressure::ThreadAdvisor::Config advisor_config(int32_t max_threads, const std::string& root,
                                               const std::vector<int>& cpus) {
  pressure::ThreadAdvisor::Config c;
  c.max_threads = max_threads;
  double cores = static_cast<double>(cpus.size());
  if (const auto quota = pressure::cgroup_cpu_quota(root)) cores = std::min(cores, *quota);
  c.cores_available = std::max(1.0, cores);
  const long hz = ::sysconf(_SC_CLK_TCK);
  c.ticks_per_second = hz > 0 ? hz : 100;
  return c;
}

double steady_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

ThreadAdapter::ThreadAdapter(bool enabled, int32_t max_threads, std::string root,
                             double interval_seconds)
    : enabled_(enabled && max_threads > 1),
      root_(std::move(root)),
      interval_(interval_seconds),
      cpus_(pressure::allowed_cpus()),
      advisor_(advisor_config(max_threads, root_, cpus_)) {
  // The baseline now, so the first decision comes one interval into the engine's life (a
  // short run under contention should not spend its first interval on every thread).
  if (!enabled_) return;
  const double now = steady_seconds();
  next_sample_ = now + interval_;
  pressure::CpuSample s;
  s.wall_seconds = now;
  s.self_cpu_seconds = pressure::process_cpu_seconds();
  if (pressure::read_cpu_ticks(root_, cpus_, &buffer_, &s.ticks)) advisor_.update(s);
}

void ThreadAdapter::tick(ThreadPool& pool) {
  if (!enabled_) return;
  const double now = steady_seconds();
  if (now < next_sample_) return;
  next_sample_ = now + interval_;
  sample(pool, now, pressure::process_cpu_seconds());
}

void ThreadAdapter::sample(ThreadPool& pool, double wall_seconds, double self_cpu_seconds) {
  if (!enabled_) return;
  pressure::CpuSample s;
  s.wall_seconds = wall_seconds;
  s.self_cpu_seconds = self_cpu_seconds;
  if (!pressure::read_cpu_ticks(root_, cpus_, &buffer_, &s.ticks)) return;
  const pressure::ThreadAdvisor::Advice& a = advisor_.update(s);
  if (a.changed) ++changes_;
  pool.set_active_threads(a.threads);
  pool.set_spin_limit(a.contended ? ThreadPool::kContendedSpinLimit
                                  : ThreadPool::kDefaultSpinLimit);
}

ThreadAdapterStats ThreadAdapter::stats(const ThreadPool& pool) const {
  ThreadAdapterStats s;
  s.threads_active = pool.size();
  s.cpu_others_cores = advisor_.advice().others_cores;
  s.contended = advisor_.advice().contended;
  s.thread_changes = changes_;
  return s;
}

}  // namespace hinge
