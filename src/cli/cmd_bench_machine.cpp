// `hinge bench --membw / --compute / --layouts`: what this machine can do, with no model.
//
//   --membw    the memory read bandwidth with -t threads (the limit of decode)
//   --compute  the multiply-add peak per instruction family (the limit of prefill)
//   --layouts  which weight layout each quantized type runs fastest in on this CPU, measured
//              again (kernels/kernel_choice.h); rewrites the layout cache (kernels/layout_cache.h)
//
// --membw and --compute save the machine profile (roofline/machine_profile.h) whose shares
// `hinge run` and `hinge bench -m` print.
#include <fmt/format.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "cli/commands.h"
#include "common/membw.h"
#include "common/thread_pool.h"
#include "common/units.h"
#include "kernels/cpu_features.h"
#include "kernels/kernel_choice.h"
#include "kernels/layout_cache.h"
#include "roofline/machine_profile.h"

namespace hinge::cli {

namespace {

std::string timings_text(const kernels::LayoutChoice& c) {
  std::string s;
  for (const kernels::LayoutTiming& t : c.timings)
    s += fmt::format("{}{} {:.0f} / {:.0f} us", s.empty() ? "" : ", ",
                     kernels::weight_layout_name(t.layout), t.decode_us, t.prefill_us);
  return s;
}

}  // namespace

int bench_machine_command(const BenchArgs& args) {
  const auto size = parse_bytes(args.membw_size);
  if (!size) return fail("--membw-size: '" + args.membw_size + "' is not a size (e.g. 1GiB)");
  if (args.membw_reps < 1 || args.membw_reps > 1000)
    return fail(fmt::format("--membw-reps must be in [1, 1000], got {}", args.membw_reps));
  if (!args.model.empty()) return fail("bench: -m runs a model; --membw, --compute and --layouts "
                                       "measure the machine without one: give one or the other");
  auto config = make_engine_config(args.engine);
  if (!config.ok()) return fail(config.status().message());
  ThreadPool pool(config->threads);
  roofline::MachineProfile profile =
      roofline::load_machine_profile(pool.size()).value_or(roofline::MachineProfile{});
  std::optional<MemBandwidth> bw;
  if (args.membw || args.compute) {
    if (args.membw) {
      auto m = measure_read_bandwidth(pool, static_cast<int64_t>(*size),
                                      static_cast<int32_t>(args.membw_reps));
      if (!m.ok()) return fail(m.status().message());
      bw = *m;
      profile.membw_bytes_per_s = bw->median_bytes_per_s;
    }
    auto measured = roofline::measure_machine_profile(pool, profile, 0, args.compute);
    if (!measured.ok()) return fail(measured.status().message());
    profile = *measured;
    if (Status st = roofline::save_machine_profile(profile); !st.ok())
      std::fprintf(stderr, "hinge: warning: machine profile not saved: %s\n", st.message().c_str());
  }
  std::vector<kernels::LayoutChoice> layouts;
  if (args.layouts) layouts = kernels::recalibrate_weight_layouts();
  const std::string cpu = kernels::cpu_label();
  if (args.json) {
    nlohmann::ordered_json j;
    j["cpu"] = cpu;
    j["threads"] = pool.size();
    if (bw) {
      j["membw_gb_per_s"] = bw->median_bytes_per_s / 1e9;
      j["membw_gb_per_s_best"] = bw->best_bytes_per_s / 1e9;
      j["buffer_bytes"] = bw->buffer_bytes;
      j["reps"] = bw->reps;
    }
    if (args.compute) {
      nlohmann::ordered_json peaks = nlohmann::ordered_json::object();
      for (const roofline::ComputePeak& c : profile.peaks)
        peaks[roofline::peak_family_info(c.family).name] = c.ops_per_s / 1e9;
      j["peaks_gops"] = peaks;  // 2 ops per multiply-add, all threads
    }
    if (args.layouts) {
      nlohmann::ordered_json arr = nlohmann::ordered_json::array();
      for (const kernels::LayoutChoice& c : layouts) {
        nlohmann::ordered_json e;
        e["type"] = std::string(ggml_type_name(c.type));
        e["layout"] = kernels::weight_layout_name(c.layout);
        e["reason"] = c.reason;
        nlohmann::ordered_json t = nlohmann::ordered_json::array();
        for (const kernels::LayoutTiming& lt : c.timings)
          t.push_back({{"layout", kernels::weight_layout_name(lt.layout)},
                       {"decode_us", lt.decode_us},
                       {"prefill_us", lt.prefill_us}});
        e["timings"] = t;
        arr.push_back(e);
      }
      j["weight_layouts"] = arr;
      j["layout_cache"] = kernels::layout_cache_path();
    }
    std::puts(j.dump().c_str());
    return 0;
  }
  std::printf("CPU: %s\n", cpu.c_str());
  if (bw)
    std::printf("memory read bandwidth: %.2f GB/s median, %.2f GB/s best (%d threads, %s buffer, "
                "%d passes)\n",
                bw->median_bytes_per_s / 1e9, bw->best_bytes_per_s / 1e9, bw->threads,
                format_bytes(static_cast<uint64_t>(bw->buffer_bytes)).c_str(), bw->reps);
  if (args.compute) {
    std::printf("compute peaks (%d threads; 2 ops per multiply-add; best of 3 passes):\n",
                pool.size());
    if (profile.peaks.empty()) std::printf("  none of the measured instruction families runs here\n");
    for (const roofline::ComputePeak& c : profile.peaks) {
      const roofline::PeakFamilyInfo& info = roofline::peak_family_info(c.family);
      std::printf("  %-12s %-16s %s\n", info.name, info.instruction,
                  roofline::format_ops(c.ops_per_s, info.integer).c_str());
    }
  }
  if (args.layouts) {
    std::printf("weight layouts (1 thread; 1 / 64 tokens of a 1024 x 4096 product):\n");
    for (const kernels::LayoutChoice& c : layouts) {
      const std::string t = timings_text(c);
      std::printf("  %-5s %-11s %s%s%s\n", std::string(ggml_type_name(c.type)).c_str(),
                  kernels::weight_layout_name(c.layout), c.reason.c_str(), t.empty() ? "" : ": ",
                  t.c_str());
    }
    const std::string path = kernels::layout_cache_path();
    std::printf("  %s\n", path.empty() ? "not cached (HINGE_MACHINE_PROFILE=off or no cache folder)"
                                       : ("cached in " + path).c_str());
  }
  return 0;
}

}  // namespace hinge::cli
