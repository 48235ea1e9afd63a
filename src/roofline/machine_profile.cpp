#include "roofline/machine_profile.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <xxhash.h>

#include "common/cache_dir.h"
#include "common/membw.h"
#include "common/thread_pool.h"
#include "kernels/cpu_features.h"

namespace hinge::roofline {

namespace {

// The version of the profile file; older ones are measured again.
constexpr int64_t kMachineProfileVersion = 2;

// A family this CPU has but hinge's kernels may not use now (HINGE_DISABLE_AMX / _VNNI / _BF16,
// or a test's switch): not a limit of this run.
bool switched_off(PeakFamily f) {
  if (!cpu_has_family(f)) return false;  // a profile's entry for what this CPU lacks stays
  switch (f) {
    case PeakFamily::kAmxInt8: return !kernels::cpu_has_amx_int8();
    case PeakFamily::kAmxBf16: return !kernels::cpu_has_amx_bf16();
    case PeakFamily::kAvx512Vnni: return !kernels::cpu_has_avx512_vnni();
    case PeakFamily::kAvx512Bf16: return !kernels::cpu_has_avx512_bf16();
    default: return false;
  }
}

}  // namespace

const ComputePeak* MachineProfile::best_peak(bool integer) const {
  const ComputePeak* best = nullptr;
  for (const ComputePeak& p : peaks)
    if (peak_family_info(p.family).integer == integer && !switched_off(p.family) &&
        (!best || p.ops_per_s > best->ops_per_s))
      best = &p;
  return best;
}

bool machine_profile_enabled() {
  const char* v = std::getenv("HINGE_MACHINE_PROFILE");
  return !(v && std::strcmp(v, "off") == 0);
}

std::string machine_profile_path(int32_t threads) {
  const std::string dir = cache_dir();
  if (dir.empty()) return "";
  const std::string label = kernels::cpu_label();
  const uint64_t h = XXH3_64bits(label.data(), label.size());
  return fmt::format("{}/machine-{:016x}-t{}.json", dir, h, threads);
}

std::optional<MachineProfile> load_machine_profile(int32_t threads) {
  if (!machine_profile_enabled()) return std::nullopt;
  const std::string path = machine_profile_path(threads);
  if (path.empty()) return std::nullopt;
  std::ifstream in(path);
  if (!in) return std::nullopt;
  const nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return std::nullopt;  // a damaged file is measured again, not trusted
  // Profiles before version 2 hold an avx2-int8 peak from a loop the compiler had folded
  // (compute_peak.cpp): measured again rather than trusted.
  if (!j.contains("version") || !j["version"].is_number_integer() ||
      j["version"].get<int64_t>() < kMachineProfileVersion)
    return std::nullopt;
  MachineProfile p;
  try {
    p.cpu = j.at("cpu").get<std::string>();
    p.threads = j.at("threads").get<int32_t>();
    p.membw_bytes_per_s = j.value("membw_gb_per_s", 0.0) * 1e9;
    p.measured_unix = j.value("measured_unix", int64_t{0});
    if (j.contains("peaks") && j["peaks"].is_object()) {
      for (const auto& [name, v] : j["peaks"].items()) {
        const PeakFamilyInfo* info = peak_family_by_name(name);
        if (!info || !v.is_number()) continue;
        const double gops = v.get<double>();
        if (!(gops > 0 && gops < 1e7)) return std::nullopt;  // not a rate a CPU measures
        p.peaks.push_back({info->family, v.get<double>() * 1e9, p.threads});
      }
    }
  } catch (const nlohmann::json::exception&) {
    return std::nullopt;
  }
  // all_peak_families() order, whatever order the file has
  auto rank = [](PeakFamily f) {
    const auto& all = all_peak_families();
    for (size_t i = 0; i < all.size(); ++i)
      if (all[i].family == f) return i;
    return all.size();
  };
  std::sort(p.peaks.begin(), p.peaks.end(),
            [&](const ComputePeak& a, const ComputePeak& b) { return rank(a.family) < rank(b.family); });
  if (p.cpu != kernels::cpu_label() || p.threads != threads) return std::nullopt;
  if (!(p.membw_bytes_per_s >= 0) || p.membw_bytes_per_s > 1e14) return std::nullopt;
  return p;
}

Status save_machine_profile(const MachineProfile& p) {
  if (!machine_profile_enabled()) return Status::Ok();
  const std::string path = machine_profile_path(p.threads);
  if (path.empty()) return Status::Error("no cache folder: set HINGE_CACHE_DIR or HOME");
  nlohmann::ordered_json j;
  j["version"] = kMachineProfileVersion;
  j["cpu"] = p.cpu;
  j["threads"] = p.threads;
  j["membw_gb_per_s"] = p.membw_bytes_per_s / 1e9;
  nlohmann::ordered_json peaks = nlohmann::ordered_json::object();
  for (const ComputePeak& c : p.peaks) peaks[peak_family_info(c.family).name] = c.ops_per_s / 1e9;
  j["peaks"] = peaks;  // giga-ops per second, 2 per multiply-add
  j["measured_unix"] = p.measured_unix;
  return write_file_atomically(path, j.dump(2) + "\n");
}

StatusOr<MachineProfile> measure_machine_profile(ThreadPool& pool, MachineProfile base,
                                                 int64_t membw_bytes, bool compute) {
  base.cpu = kernels::cpu_label();
  base.threads = pool.size();
  if (membw_bytes > 0) {
    auto bw = measure_read_bandwidth(pool, membw_bytes, 7);
    if (!bw.ok()) return bw.status();
    base.membw_bytes_per_s = bw->median_bytes_per_s;
  }
  if (compute) base.peaks = measure_compute_peaks(pool);
  base.measured_unix = std::chrono::duration_cast<std::chrono::seconds>(
                           std::chrono::system_clock::now().time_since_epoch())
                           .count();
  return base;
}

std::string format_ops(double ops_per_s, bool integer) {
  const char* unit = integer ? "OP/s" : "FLOP/s";
  if (ops_per_s >= 1e12) return fmt::format("{:.2f} T{}", ops_per_s / 1e12, unit);
  return fmt::format("{:.0f} G{}", ops_per_s / 1e9, unit);
}

std::string bandwidth_share(const MachineProfile& p, double bytes_per_s) {
  if (p.membw_bytes_per_s <= 0) return "";
  return fmt::format("{:.0f}% of {:.1f} GB/s", 100.0 * bytes_per_s / p.membw_bytes_per_s,
                     p.membw_bytes_per_s / 1e9);
}

std::string peak_share(const MachineProfile& p, double ops_per_s, bool integer) {
  const ComputePeak* best = p.best_peak(integer);
  if (!best || best->ops_per_s <= 0) return "";
  return fmt::format("{:.1f}% of {} {}", 100.0 * ops_per_s / best->ops_per_s,
                     format_ops(best->ops_per_s, integer), peak_family_info(best->family).name);
}

}  // namespace hinge::roofline
