// `hinge synth`: random-weight GGUF models of real shapes for benchmarks, or (--transplant) a
// trained llama model rewritten in another family's layout for parity tests.
#include <cstdio>

#include "cli/commands.h"
#include "common/thread_pool.h"
#include "model/loaded_model.h"
#include "model/synth.h"
#include "model/transplant.h"

namespace hinge::cli {

namespace {

int transplant_command(const SynthArgs& args, GgmlType type) {
  if (!args.preset.empty()) return fail("--transplant and --preset are exclusive");
  if (args.family.empty()) return fail("--transplant needs --family (llama, qwen2, phi3, granite, mistral3)");
  auto m = load_model(args.transplant, LoadOptions{});
  if (!m.ok()) return fail(m.status().message());
  std::fprintf(stderr, "hinge: writing %s (%s as %s, %s)...\n", args.output.c_str(),
               args.transplant.c_str(), args.family.c_str(), args.type.c_str());
  if (Status st = write_transplanted_model(**m, args.family, type, args.output, args.width);
      !st.ok())
    return fail(st.message());
  std::fprintf(stderr, "hinge: wrote %s\n", args.output.c_str());
  return 0;
}

}  // namespace

int synth_command(const SynthArgs& args) {
  if (args.width > 0 && args.transplant.empty()) return fail("--width goes with --transplant FILE");
  if (!args.transplant.empty() || !args.family.empty()) {
    if (args.transplant.empty()) return fail("--family needs --transplant FILE");
    auto type = ggml_type_from_name(args.type);
    if (!type || (*type != GgmlType::F32 && *type != GgmlType::F16 && *type != GgmlType::Q8_0 &&
                  *type != GgmlType::Q4_0 && *type != GgmlType::Q4_K && *type != GgmlType::Q5_K &&
                  *type != GgmlType::Q6_K))
      return fail("--type must be one of f32, f16, q8_0, q4_0, q4_k, q5_k, q6_k (got '" +
                  args.type + "')");
    if (args.output.empty()) return fail("-o/--output is required");
    return transplant_command(args, *type);
  }
  if (args.list || args.preset.empty()) {
    for (const auto& p : synth_presets()) std::printf("%-15s %s\n", p.name.c_str(), p.description.c_str());
    if (!args.list) return fail("--preset is required (one of the above)");
    return 0;
  }
  const SynthPreset* preset = find_synth_preset(args.preset);
  if (!preset) return fail("unknown preset '" + args.preset + "' (see hinge synth --list)");
  auto type = ggml_type_from_name(args.type);
  if (!type || (*type != GgmlType::F32 && *type != GgmlType::F16 && *type != GgmlType::BF16 &&
                *type != GgmlType::Q8_0 && *type != GgmlType::Q4_0 && *type != GgmlType::Q4_K &&
                *type != GgmlType::Q5_K && *type != GgmlType::Q6_K))
    return fail("--type must be one of f32, f16, bf16, q8_0, q4_0, q4_k, q5_k, q6_k (got '" +
                args.type +
                "')");
  if (args.output.empty()) return fail("-o/--output is required");
  ThreadPool pool(hardware_threads());
  std::fprintf(stderr, "hinge: writing %s (%s, %s)...\n", args.output.c_str(), preset->name.c_str(),
               args.type.c_str());
  SynthPreset shaped = *preset;
  if (args.context > 0) shaped.config.context_length = args.context;
  if (Status st = write_synth_model(shaped, *type, args.seed, args.output, pool, args.layers); !st.ok())
    return fail(st.message());
  std::fprintf(stderr, "hinge: wrote %s\n", args.output.c_str());
  return 0;
}

}  // namespace hinge::cli
