#include "pressure/pressure_signals.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <system_error>

namespace hinge::pressure {
namespace {

constexpr size_t kMaxFileBytes = 64 * 1024;

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\n')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\n' || s.back() == '\r'))
    s.remove_suffix(1);
  return s;
}

template <typename T>
std::optional<T> parse_number(std::string_view s) {
  s = trim(s);
  if (s.empty()) return std::nullopt;
  T v{};
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  if constexpr (std::is_floating_point_v<T>) {
    if (!std::isfinite(v)) return std::nullopt;
  }
  return v;
}

// Calls fn(line) for each line of text.
template <typename Fn>
void for_each_line(std::string_view text, Fn&& fn) {
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    fn(text.substr(0, nl));
    if (nl == std::string_view::npos) break;
    text.remove_prefix(nl + 1);
  }
}

// "some avg10=1.50 avg60=..." -> 1.50 for key "some".
std::optional<double> psi_avg10(std::string_view line, std::string_view kind) {
  if (line.substr(0, kind.size()) != kind || line.size() <= kind.size() ||
      line[kind.size()] != ' ')
    return std::nullopt;
  line.remove_prefix(kind.size() + 1);
  constexpr std::string_view kKey = "avg10=";
  if (line.substr(0, kKey.size()) != kKey) return std::nullopt;
  line.remove_prefix(kKey.size());
  const auto v = parse_number<double>(line.substr(0, line.find(' ')));
  if (!v || *v < 0 || *v > 100) return std::nullopt;
  return v;
}

}  // namespace

std::optional<int64_t> CgroupMemory::limit_bytes() const {
  if (high_bytes && max_bytes) return std::min(*high_bytes, *max_bytes);
  if (high_bytes) return high_bytes;
  return max_bytes;
}

std::optional<std::string> read_small_file(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return std::nullopt;
  std::string text;
  char buf[4096];
  size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) {
    text.append(buf, n);
    if (text.size() > kMaxFileBytes) {
      std::fclose(f);
      return std::nullopt;
    }
  }
  const bool failed = std::ferror(f) != 0;
  std::fclose(f);
  if (failed) return std::nullopt;
  return text;
}

std::optional<Psi> parse_psi(std::string_view text) {
  std::optional<double> some, full;
  bool bad = false;
  for_each_line(text, [&](std::string_view line) {
    line = trim(line);
    if (line.empty()) return;
    if (auto v = psi_avg10(line, "some")) some = v;
    else if (auto w = psi_avg10(line, "full")) full = w;
    else bad = true;
  });
  if (bad || !some) return std::nullopt;
  return Psi{*some, full.value_or(0)};
}

std::optional<std::optional<int64_t>> parse_cgroup_limit(std::string_view text) {
  text = trim(text);
  if (text == "max") return std::optional<int64_t>{};
  const auto v = parse_number<int64_t>(text);
  if (!v || *v < 0) return std::nullopt;
  return std::optional<int64_t>{*v};
}

std::optional<std::string> parse_cgroup_v2_path(std::string_view text) {
  std::optional<std::string> path;
  for_each_line(text, [&](std::string_view line) {
    line = trim(line);
    if (line.substr(0, 3) != "0::") return;
    std::string_view p = line.substr(3);
    if (p.empty() || p.front() != '/') return;
    // No way out of the cgroup tree.
    if (p.find("/..") != std::string_view::npos || p.find('\0') != std::string_view::npos) return;
    path = std::string(p);
  });
  return path;
}

bool parse_memory_events(std::string_view text, CgroupMemory* m) {
  bool seen = false, bad = false;
  for_each_line(text, [&](std::string_view line) {
    line = trim(line);
    if (line.empty()) return;
    const size_t sp = line.find(' ');
    if (sp == std::string_view::npos) {
      bad = true;
      return;
    }
    const auto v = parse_number<int64_t>(line.substr(sp + 1));
    if (!v || *v < 0) {
      bad = true;
      return;
    }
    const std::string_view key = line.substr(0, sp);
    if (key == "high") m->events_high = *v;
    else if (key == "max") m->events_max = *v;
    else if (key == "oom") m->events_oom = *v;
    seen = true;
  });
  return seen && !bad;
}

std::optional<std::string> cgroup_dir(const std::string& root) {
  const auto self = read_small_file(root + "/proc/self/cgroup");
  if (!self) return std::nullopt;
  const auto path = parse_cgroup_v2_path(*self);
  if (!path) return std::nullopt;
  return root + "/sys/fs/cgroup" + (*path == "/" ? std::string() : *path);
}

namespace {

std::optional<Psi> read_psi(const std::string& path) {
  const auto text = read_small_file(path);
  return text ? parse_psi(*text) : std::nullopt;
}

std::optional<CgroupMemory> read_cgroup(const std::string& root) {
  const auto dir = cgroup_dir(root);
  if (!dir) return std::nullopt;
  const auto current = read_small_file(*dir + "/memory.current");
  if (!current) return std::nullopt;
  const auto cur = parse_number<int64_t>(*current);
  if (!cur || *cur < 0) return std::nullopt;
  CgroupMemory m;
  m.current_bytes = *cur;
  if (auto t = read_small_file(*dir + "/memory.high"))
    if (auto v = parse_cgroup_limit(*t)) m.high_bytes = *v;
  if (auto t = read_small_file(*dir + "/memory.max"))
    if (auto v = parse_cgroup_limit(*t)) m.max_bytes = *v;
  if (auto t = read_small_file(*dir + "/memory.events")) (void)parse_memory_events(*t, &m);
  return m;
}

std::optional<double> read_millicelsius(const std::string& path) {
  const auto t = read_small_file(path);
  if (!t) return std::nullopt;
  const auto v = parse_number<int64_t>(*t);
  if (!v || *v < -273150 || *v > 1000000) return std::nullopt;
  return static_cast<double>(*v) / 1000.0;
}

void keep_lowest(std::optional<double>* slot, double v) {
  if (!*slot || v < **slot) *slot = v;
}

std::vector<ThermalZone> read_thermal(const std::string& root) {
  std::vector<ThermalZone> zones;
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path dir = fs::path(root) / "sys/class/thermal";
  fs::directory_iterator it(dir, ec), end;
  for (; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.rfind("thermal_zone", 0) != 0) continue;
    const std::string base = it->path().string();
    const auto temp = read_millicelsius(base + "/temp");
    if (!temp) continue;
    ThermalZone z;
    z.name = name;
    z.temp_c = *temp;
    for (int k = 0; k < 32; ++k) {
      const std::string trip = base + "/trip_point_" + std::to_string(k);
      const auto type = read_small_file(trip + "_type");
      if (!type) break;
      const auto t = read_millicelsius(trip + "_temp");
      if (!t) continue;
      const std::string_view ty = trim(*type);
      if (ty == "passive" || ty == "active") keep_lowest(&z.passive_c, *t);
      else if (ty == "hot") keep_lowest(&z.hot_c, *t);
      else if (ty == "critical") keep_lowest(&z.critical_c, *t);
    }
    zones.push_back(std::move(z));
  }
  std::sort(zones.begin(), zones.end(),
            [](const ThermalZone& a, const ThermalZone& b) { return a.name < b.name; });
  return zones;
}

}  // namespace

PressureSignals read_pressure_signals(const std::string& root) {
  PressureSignals s;
  s.memory_psi = read_psi(root + "/proc/pressure/memory");
  s.cpu_psi = read_psi(root + "/proc/pressure/cpu");
  s.cgroup = read_cgroup(root);
  s.thermal = read_thermal(root);
  return s;
}

std::optional<int64_t> cgroup_memory_limit(const std::string& root) {
  const auto m = read_cgroup(root);
  if (!m) return std::nullopt;
  return m->limit_bytes();
}

}  // namespace hinge::pressure
