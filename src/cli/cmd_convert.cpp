// `hinge convert`: llama2.c checkpoint or Hugging Face directory (or GGUF) -> GGUF.
// With --type, a matrix whose rows do not split into the type's blocks gets the closest type that
// fits (fallback_matrix_type): one warning line per such tensor on stderr, and a count at the end.
#include <cstdio>
#include <string>

#include "cli/commands.h"
#include "cli/progress_bar.h"
#include "common/units.h"
#include "model/gguf_export.h"

namespace hinge::cli {

int convert_command(const ConvertArgs& args) {
  ExportOptions opts;
  if (!args.type.empty()) {
    auto t = ggml_type_from_name(args.type);
    if (!t || !ggml_type_traits(*t)->supported)
      return fail("--type must be one of f32, f16, bf16, q8_0, q4_0, q4_k, q5_k, q6_k (got '" +
                  args.type + "')");
    opts.matrix_type = *t;
    if (*t == GgmlType::Q4_K || *t == GgmlType::Q5_K) opts.output_type = GgmlType::Q6_K;
  }
  int64_t num_fallbacks = 0;
  opts.on_fallback = [&num_fallbacks](const TypeFallback& f) {
    std::string shape;
    for (uint64_t d : f.ne) shape += (shape.empty() ? "" : ", ") + std::to_string(d);
    const auto wanted = *ggml_type_traits(f.wanted);
    std::fprintf(stderr,
                 "hinge: warning: %s [%s]: rows of %llu values are not a multiple of %s's block "
                 "of %u; using %s\n",
                 f.name.c_str(), shape.c_str(), static_cast<unsigned long long>(f.ne[0]),
                 std::string(wanted.name).c_str(), wanted.block_elems,
                 std::string(ggml_type_name(f.used)).c_str());
    ++num_fallbacks;
  };
  LoadOptions lo;
  lo.tokenizer_path = args.tokenizer;
  auto m = load_model(args.input, lo);
  if (!m.ok()) return fail(m.status().message());
  if (Status st = export_gguf(**m, args.output, opts); !st.ok()) return fail(st.message());
  if (num_fallbacks > 0)
    std::fprintf(stderr, "hinge: %lld tensor%s fell back to another type (see the warnings above)\n",
                 static_cast<long long>(num_fallbacks), num_fallbacks == 1 ? "" : "s");
  std::fprintf(stderr, "hinge: wrote %s (%s, %zu tensors)\n", args.output.c_str(),
               format_count((*m)->num_parameters()).c_str(), (*m)->tensors.size());
  return 0;
}

}  // namespace hinge::cli
