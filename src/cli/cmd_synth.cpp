// `hinge synth`: random-weight GGUF models of real shapes for benchmarks.
#include <cstdio>

#include "cli/commands.h"
#include "common/thread_pool.h"
#include "model/synth.h"

namespace hinge::cli {

int synth_command(const SynthArgs& args) {
  if (args.list || args.preset.empty()) {
    for (const auto& p : synth_presets()) std::printf("%-15s %s\n", p.name.c_str(), p.description.c_str());
    if (!args.list) return fail("--preset is required (one of the above)");
    return 0;
  }
  const SynthPreset* preset = find_synth_preset(args.preset);
  if (!preset) return fail("unknown preset '" + args.preset + "' (see hinge synth --list)");
  auto type = ggml_type_from_name(args.type);
  if (!type || (*type != GgmlType::F32 && *type != GgmlType::F16 && *type != GgmlType::BF16 &&
                *type != GgmlType::Q8_0 && *type != GgmlType::Q4_0 && *type != GgmlType::Q4_K))
    return fail("--type must be one of f32, f16, bf16, q8_0, q4_0, q4_k (got '" + args.type + "')");
  if (args.output.empty()) return fail("-o/--output is required");
  ThreadPool pool(hardware_threads());
  std::fprintf(stderr, "hinge: writing %s (%s, %s)...\n", args.output.c_str(), preset->name.c_str(),
               args.type.c_str());
  if (Status st = write_synth_model(*preset, *type, args.seed, args.output, pool, args.layers); !st.ok())
    return fail(st.message());
  std::fprintf(stderr, "hinge: wrote %s\n", args.output.c_str());
  return 0;
}

}  // namespace hinge::cli
