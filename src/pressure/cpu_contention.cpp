#include "pressure/cpu_contention.h"

#include <fcntl.h>
#include <sched.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <thread>

#include "pressure/pressure_signals.h"

namespace hinge::pressure {
namespace {

constexpr size_t kMaxStatBytes = 1 << 20;  // the cpu lines of a 4096-core machine fit

bool next_number(std::string_view* s, int64_t* v) {
  size_t i = 0;
  while (i < s->size() && (*s)[i] == ' ') ++i;
  if (i == s->size()) return false;
  const char* b = s->data() + i;
  const char* e = s->data() + s->size();
  auto [p, ec] = std::from_chars(b, e, *v);
  if (ec != std::errc() || *v < 0 || (p != e && *p != ' ')) return false;
  s->remove_prefix(static_cast<size_t>(p - s->data()));
  return true;
}

}  // namespace

std::optional<CpuTicks> parse_proc_stat(std::string_view text, std::span<const int> cpus) {
  CpuTicks t;
  bool any_cpu_line = false;
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    if (line.size() < 4 || line.substr(0, 3) != "cpu") continue;
    if (line[3] == ' ') {  // the all-cores line
      any_cpu_line = true;
      continue;
    }
    std::string_view rest = line.substr(3);
    const size_t sp = rest.find(' ');
    if (sp == std::string_view::npos) return std::nullopt;
    int id = -1;
    auto [p, ec] = std::from_chars(rest.data(), rest.data() + sp, id);
    if (ec != std::errc() || p != rest.data() + sp || id < 0) return std::nullopt;
    any_cpu_line = true;
    if (std::find(cpus.begin(), cpus.end(), id) == cpus.end()) continue;
    rest.remove_prefix(sp);
    // user nice system idle iowait irq softirq steal [guest guest_nice] (guest is in user)
    int64_t f[8] = {};
    for (int k = 0; k < 8; ++k) {
      if (!next_number(&rest, &f[k])) {
        if (k < 4) return std::nullopt;  // kernels since 2.6.33 print at least 8
        break;
      }
    }
    const int64_t busy = f[0] + f[1] + f[2] + f[5] + f[6] + f[7];
    t.busy += busy;
    t.total += busy + f[3] + f[4];
    ++t.cores;
  }
  if (!any_cpu_line || t.cores == 0) return std::nullopt;
  return t;
}

std::optional<std::optional<double>> parse_cpu_max(std::string_view text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.remove_suffix(1);
  const size_t sp = text.find(' ');
  if (sp == std::string_view::npos) return std::nullopt;
  const std::string_view quota = text.substr(0, sp), period_text = text.substr(sp + 1);
  int64_t period = 0;
  auto [pp, pec] =
      std::from_chars(period_text.data(), period_text.data() + period_text.size(), period);
  if (pec != std::errc() || pp != period_text.data() + period_text.size() || period <= 0)
    return std::nullopt;
  if (quota == "max") return std::optional<double>{};
  int64_t q = 0;
  auto [qp, qec] = std::from_chars(quota.data(), quota.data() + quota.size(), q);
  if (qec != std::errc() || qp != quota.data() + quota.size() || q <= 0) return std::nullopt;
  return std::optional<double>{static_cast<double>(q) / static_cast<double>(period)};
}

std::vector<int> allowed_cpus() {
  std::vector<int> cpus;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    for (int c = 0; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &set)) cpus.push_back(c);
  }
  if (cpus.empty()) {
    const unsigned n = std::max(1u, std::thread::hardware_concurrency());
    for (unsigned c = 0; c < n; ++c) cpus.push_back(static_cast<int>(c));
  }
  return cpus;
}

std::optional<std::optional<double>> parse_cfs_quota(std::string_view quota_us,
                                                     std::string_view period_us) {
  auto number = [](std::string_view t) -> std::optional<int64_t> {
    while (!t.empty() && (t.back() == '\n' || t.back() == ' ')) t.remove_suffix(1);
    int64_t v = 0;
    auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
    if (t.empty() || ec != std::errc() || p != t.data() + t.size()) return std::nullopt;
    return v;
  };
  const auto q = number(quota_us), period = number(period_us);
  if (!q || !period || *period <= 0) return std::nullopt;
  if (*q == -1) return std::optional<double>{};
  if (*q <= 0) return std::nullopt;
  return std::optional<double>(static_cast<double>(*q) / static_cast<double>(*period));
}

std::optional<std::string> parse_cgroup_v1_path(std::string_view text, std::string_view controller) {
  std::optional<std::string> path;
  size_t at = 0;
  while (at < text.size() && !path) {
    size_t end = text.find('\n', at);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view line = text.substr(at, end - at);
    at = end + 1;
    const size_t c1 = line.find(':');
    const size_t c2 = c1 == std::string_view::npos ? c1 : line.find(':', c1 + 1);
    if (c2 == std::string_view::npos) continue;
    std::string_view list = line.substr(c1 + 1, c2 - c1 - 1);
    const std::string_view p = line.substr(c2 + 1);
    if (p.empty() || p.front() != '/' || p.find("/..") != std::string_view::npos) continue;
    while (!list.empty()) {
      const size_t comma = list.find(',');
      if (list.substr(0, comma) == controller) {
        path = std::string(p);
        break;
      }
      if (comma == std::string_view::npos) break;
      list.remove_prefix(comma + 1);
    }
  }
  return path;
}

std::optional<double> cgroup_cpu_quota(const std::string& root) {
  if (const auto dir = cgroup_dir(root)) {
    if (const auto text = read_small_file(*dir + "/cpu.max")) {
      const auto q = parse_cpu_max(*text);
      return q ? *q : std::nullopt;
    }
  }
  // cgroup v1 (or a hybrid hierarchy, whose v2 part has no cpu controller).
  const auto self = read_small_file(root + "/proc/self/cgroup");
  if (!self) return std::nullopt;
  const auto path = parse_cgroup_v1_path(*self, "cpu");
  if (!path) return std::nullopt;
  for (const char* mount : {"cpu", "cpu,cpuacct", "cpuacct,cpu"}) {
    const std::string dir = root + "/sys/fs/cgroup/" + mount + (*path == "/" ? "" : *path);
    const auto quota = read_small_file(dir + "/cpu.cfs_quota_us");
    const auto period = read_small_file(dir + "/cpu.cfs_period_us");
    if (!quota || !period) continue;
    const auto q = parse_cfs_quota(*quota, *period);
    return q ? *q : std::nullopt;
  }
  return std::nullopt;
}

double process_cpu_seconds() {
  rusage ru{};
  if (getrusage(RUSAGE_SELF, &ru) != 0) return 0;
  auto sec = [](const timeval& tv) {
    return static_cast<double>(tv.tv_sec) + static_cast<double>(tv.tv_usec) * 1e-6;
  };
  return sec(ru.ru_utime) + sec(ru.ru_stime);
}

bool read_cpu_ticks(const std::string& root, std::span<const int> cpus, std::string* buffer,
                    CpuTicks* out) {
  const std::string path = root + "/proc/stat";
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  if (buffer->size() < 16384) buffer->resize(16384);
  size_t used = 0;
  for (;;) {
    if (used == buffer->size()) {
      // The cpu lines come first: stop at the first line that is not one, once one is whole.
      const std::string_view seen(buffer->data(), used);
      const size_t intr = seen.find("\nintr");
      if (intr != std::string_view::npos || buffer->size() >= kMaxStatBytes) break;
      buffer->resize(buffer->size() * 2);
    }
    const ssize_t n = ::read(fd, buffer->data() + used, buffer->size() - used);
    if (n < 0) {
      ::close(fd);
      return false;
    }
    if (n == 0) break;
    used += static_cast<size_t>(n);
  }
  ::close(fd);
  std::string_view text(buffer->data(), used);
  if (const size_t nl = text.rfind('\n'); nl != std::string_view::npos && used == buffer->size())
    text = text.substr(0, nl);  // a cut-off last line
  const auto t = parse_proc_stat(text, cpus);
  if (!t) return false;
  *out = *t;
  return true;
}

ThreadAdvisor::ThreadAdvisor(const Config& config) : config_(config) {
  config_.max_threads = std::max(1, config_.max_threads);
  config_.cores_available = std::max(1.0, config_.cores_available);
  config_.ticks_per_second = std::max<int64_t>(1, config_.ticks_per_second);
  advice_.threads = config_.max_threads;
  advice_.free_cores = config_.cores_available;
}

ThreadAdvisor::Advice ThreadAdvisor::update(const CpuSample& s) {
  advice_.changed = false;
  if (!last_) {
    last_ = s;
    return advice_;
  }
  const double wall = s.wall_seconds - last_->wall_seconds;
  const int64_t dbusy = s.ticks.busy - last_->ticks.busy;
  if (wall <= 0 || dbusy < 0 || s.ticks.cores != last_->ticks.cores) {  // clock or set changed
    last_ = s;
    return advice_;
  }
  const double busy_core_seconds =
      static_cast<double>(dbusy) / static_cast<double>(config_.ticks_per_second);
  const double self = std::max(0.0, s.self_cpu_seconds - last_->self_cpu_seconds);
  last_ = s;
  const double cores = std::min(config_.cores_available, static_cast<double>(s.ticks.cores));
  const double others = std::clamp((busy_core_seconds - self) / wall, 0.0, cores);
  advice_.others_cores = others;
  advice_.free_cores = std::max(0.0, cores - others);
  advice_.contended = others > config_.contended_cores;
  const int32_t target = std::clamp(
      static_cast<int32_t>(std::floor(advice_.free_cores + config_.headroom)), 1,
      config_.max_threads);
  int32_t next = advice_.threads;
  if (target < advice_.threads) {
    next = target;
    raise_votes_ = 0;
  } else if (target > advice_.threads) {
    if (++raise_votes_ >= config_.raise_after) {
      next = target;
      raise_votes_ = 0;
    }
  } else {
    raise_votes_ = 0;
  }
  advice_.changed = next != advice_.threads;
  advice_.threads = next;
  return advice_;
}

}  // namespace hinge::pressure
