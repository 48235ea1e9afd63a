// What this machine can do with T threads: its memory read bandwidth and its multiply-add peak
// per instruction family, measured here (never taken from a data sheet), and the shares that
// `hinge run` and `hinge bench` print against them ("decode 25.1 GB/s = 93% of 27.0 GB/s").
//
// Measuring takes about 1-2 s, so a profile is kept in a small JSON file per CPU and thread
// count: $HINGE_CACHE_DIR, else $XDG_CACHE_HOME/hinge, else ~/.cache/hinge, named
// machine-<hash of the CPU label>-t<threads>.json. `hinge bench --membw` / `--compute` measure
// and write it; `hinge bench -m` measures what is missing; `hinge run` only reads it.
// HINGE_MACHINE_PROFILE=off turns all of it off (no file read or written, no shares printed).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "roofline/compute_peak.h"

namespace hinge {
class ThreadPool;
}

namespace hinge::roofline {

struct MachineProfile {
  std::string cpu;                // kernels::cpu_label() at measurement
  int32_t threads = 0;
  double membw_bytes_per_s = 0;   // median streaming read (common/membw.h); 0: not measured
  std::vector<ComputePeak> peaks; // empty: not measured
  int64_t measured_unix = 0;      // seconds since the epoch of the latest measurement

  // The best measured peak among integer (or floating-point) families that hinge's kernels may
  // use now (a family switched off by HINGE_DISABLE_AMX / _VNNI / _BF16 is skipped: with AMX
  // off, prefill is a share of the VNNI peak); nullptr when none.
  const ComputePeak* best_peak(bool integer) const;
};

bool machine_profile_enabled();  // false with HINGE_MACHINE_PROFILE=off
std::string machine_profile_path(int32_t threads);
// The cached profile for this CPU and thread count, if there is a readable one.
std::optional<MachineProfile> load_machine_profile(int32_t threads);
// Writes atomically (temporary file + rename), creating the folder.
Status save_machine_profile(const MachineProfile& profile);
// Measures the bandwidth (membw_bytes: buffer, 0: skip) and/or the compute peaks on `pool`,
// over `base` (whose other fields are kept), and stamps the CPU, threads and time.
StatusOr<MachineProfile> measure_machine_profile(ThreadPool& pool, MachineProfile base,
                                                 int64_t membw_bytes, bool compute);

// "93% of 27.0 GB/s" (or "" without a bandwidth).
std::string bandwidth_share(const MachineProfile& p, double bytes_per_s);
// "6.8% of 10.6 TOP/s amx-int8" (or "" without a peak of that kind).
std::string peak_share(const MachineProfile& p, double ops_per_s, bool integer);
// "10.6 TOP/s", "666 GOP/s" (integer) or "FLOP/s" for floating point.
std::string format_ops(double ops_per_s, bool integer);

// The shares as JSON fields (for `hinge run --json` and `hinge bench --json`), those the profile
// has: membw_gb_per_s and decode_membw_share; peak_family, peak_gops and prefill_peak_share.
template <class Json>
void add_share_fields(Json& j, const MachineProfile* p, double decode_bytes_per_s,
                      double prefill_ops_per_s, bool integer) {
  if (p == nullptr) return;
  if (p->membw_bytes_per_s > 0) {
    j["membw_gb_per_s"] = p->membw_bytes_per_s / 1e9;
    j["decode_membw_share"] = decode_bytes_per_s / p->membw_bytes_per_s;
  }
  if (const ComputePeak* peak = p->best_peak(integer)) {
    j["peak_family"] = peak_family_info(peak->family).name;
    j["peak_gops"] = peak->ops_per_s / 1e9;
    j["prefill_peak_share"] = prefill_ops_per_s / peak->ops_per_s;
  }
}

}  // namespace hinge::roofline
