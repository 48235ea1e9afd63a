// `hinge convert`: llama2.c checkpoint or Hugging Face directory (or GGUF) -> GGUF.
#include <cstdio>

#include "cli/commands.h"
#include "cli/progress_bar.h"
#include "common/units.h"
#include "model/gguf_export.h"

namespace hinge::cli {

int convert_command(const ConvertArgs& args) {
  ExportOptions opts;
  if (!args.type.empty()) {
    auto t = ggml_type_from_name(args.type);
    if (!t || !ggml_type_traits(*t)->supported || *t == GgmlType::Q6_K)
      return fail("--type must be one of f32, f16, bf16, q8_0, q4_0, q4_k (got '" + args.type + "')");
    opts.matrix_type = *t;
    if (*t == GgmlType::Q4_K) opts.output_type = GgmlType::Q6_K;
  }
  LoadOptions lo;
  lo.tokenizer_path = args.tokenizer;
  auto m = load_model(args.input, lo);
  if (!m.ok()) return fail(m.status().message());
  if (Status st = export_gguf(**m, args.output, opts); !st.ok()) return fail(st.message());
  std::fprintf(stderr, "hinge: wrote %s (%s, %zu tensors)\n", args.output.c_str(),
               format_count((*m)->num_parameters()).c_str(), (*m)->tensors.size());
  return 0;
}

}  // namespace hinge::cli
