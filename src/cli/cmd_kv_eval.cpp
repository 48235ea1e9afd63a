// `hinge kv-eval`: top-1 agreement and KL divergence of each KV storage dtype against f32 KV,
// teacher-forced over a text (the table in docs/kv-dtypes.md).
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "common/thread_pool.h"
#include "eval/kv_eval.h"
#include "model/loaded_model.h"
#include "tokenizer/tokenizer.h"

namespace hinge::cli {

int kv_eval_command(const KvEvalArgs& args) {
  std::vector<kv::KvDtype> dtypes;
  const std::vector<std::string> all = {"f32",      "f16",      "bf16", "fp8_e4m3",
                                        "fp8_e5m2", "int8", "int4"};
  for (const std::string& name : args.dtypes.empty() ? all : args.dtypes) {
    std::string n = name;
    for (char& c : n)
      if (c == '-') c = '_';
    auto d = kv::parse_kv_dtype(n);
    if (!d) return fail(fmt::format("--dtypes: unknown KV dtype '{}' (one of f32 f16 bf16 "
                                    "fp8_e4m3 fp8_e5m2 int8 int4)", name));
    dtypes.push_back(*d);
  }
  std::ifstream in(args.text_file, std::ios::binary);
  if (!in) return fail(fmt::format("{}: cannot open the text file", args.text_file));
  std::stringstream ss;
  ss << in.rdbuf();
  auto m = load_model_with_progress(args.model, args.tokenizer);
  if (!m.ok()) return fail(m.status().message());
  auto tok = Tokenizer::create((*m)->vocab);
  if (!tok.ok()) return fail(tok.status().with_context(args.model).message());
  std::vector<int32_t> ids = (*tok)->encode(ss.str(), /*add_special=*/true, /*parse_special=*/false);
  const int64_t ctx = (*m)->config.context_length;
  if (static_cast<int64_t>(ids.size()) > ctx) ids.resize(static_cast<size_t>(ctx));
  if (ids.size() < 2) return fail(fmt::format("{}: the text has fewer than 2 tokens", args.text_file));
  ThreadPool pool(args.threads > 0 ? args.threads : hardware_threads());
  if (!args.json)
    fmt::print("{} tokens of {}\n{:<10} {:>10} {:>12} {:>10} {:>14}\n", ids.size(), args.text_file,
               "KV dtype", "top-1 agr.", "mean KL", "max KL", "bytes/token");
  for (kv::KvDtype d : dtypes) {
    auto r = evaluate_kv_dtype(**m, ids, d, d, pool);
    if (!r.ok()) return fail(r.status().message());
    if (args.json) {
      nlohmann::ordered_json j;
      j["dtype"] = std::string(kv::kv_dtype_name(d));
      j["positions"] = r->positions;
      j["top1_agreement"] = r->top1_agreement;
      j["mean_kl"] = r->mean_kl;
      j["max_kl"] = r->max_kl;
      j["bytes_per_token"] = r->bytes_per_token;
      std::puts(j.dump().c_str());
    } else {
      fmt::print("{:<10} {:>9.2f}% {:>12.6f} {:>10.4f} {:>14}\n", kv::kv_dtype_name(d),
                 100 * r->top1_agreement, r->mean_kl, r->max_kl, r->bytes_per_token);
    }
  }
  return 0;
}

}  // namespace hinge::cli
