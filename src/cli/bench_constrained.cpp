#include "cli/bench_constrained.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "common/percentile.h"
#include "grammar/json_schema.h"

namespace hinge::cli {
namespace {

StatusOr<std::string> read(const std::string& path, const char* flag) {
  std::ifstream f(path);
  if (!f) return Status::Errorf("{} {}: cannot read it", flag, path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

double p50(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return percentile(v, 50);
}

}  // namespace

StatusOr<std::shared_ptr<const grammar::Grammar>> bench_grammar(const BenchArgs& a) {
  std::string gbnf = grammar::json_object_gbnf();
  if (!a.grammar_file.empty()) {
    auto t = read(a.grammar_file, "--grammar");
    if (!t.ok()) return t.status();
    gbnf = *t;
  } else if (!a.json_schema_file.empty()) {
    auto t = read(a.json_schema_file, "--json-schema");
    if (!t.ok()) return t.status();
    const auto schema = nlohmann::ordered_json::parse(*t, nullptr, false);
    if (schema.is_discarded()) return Status::Errorf("--json-schema {}: not JSON", a.json_schema_file);
    auto g = grammar::json_schema_to_gbnf(schema);
    if (!g.ok()) return Status::Errorf("--json-schema {}: {}", a.json_schema_file, g.status().message());
    gbnf = *g;
  }
  auto g = grammar::Grammar::parse(gbnf);
  if (!g.ok()) return g.status();
  return std::make_shared<const grammar::Grammar>(std::move(g).value());
}

void ConstrainedSplit::to_json(nlohmann::ordered_json* j, double mask_seconds, int64_t masks,
                               int64_t cache_hits, int64_t decode_steps) {
  const double c = p50(itl_constrained_ms), f = p50(itl_free_ms);
  (*j)["constrained_output_tokens"] = constrained_tokens;
  (*j)["constrained_itl_ms_p50"] = c;
  (*j)["constrained_tokens_per_s"] = c > 0 ? 1e3 / c : 0;
  (*j)["free_output_tokens"] = free_tokens;
  (*j)["free_itl_ms_p50"] = f;
  (*j)["free_tokens_per_s"] = f > 0 ? 1e3 / f : 0;
  (*j)["masks"] = masks;
  (*j)["mask_cache_hits"] = cache_hits;
  (*j)["mask_ms_per_mask"] = masks > 0 ? mask_seconds * 1e3 / static_cast<double>(masks) : 0;
  (*j)["mask_ms_per_decode_step"] = decode_steps > 0 ? mask_seconds * 1e3 / static_cast<double>(decode_steps) : 0;
}

void ConstrainedSplit::print(double mask_seconds, int64_t masks, int64_t cache_hits, int64_t decode_steps) {
  const double c = p50(itl_constrained_ms), f = p50(itl_free_ms);
  std::printf("constrained        %lld tokens, %.2f ms per token p50 (%.1f tok/s each)\n",
              static_cast<long long>(constrained_tokens), c, c > 0 ? 1e3 / c : 0.0);
  std::printf("free               %lld tokens, %.2f ms per token p50 (%.1f tok/s each)\n",
              static_cast<long long>(free_tokens), f, f > 0 ? 1e3 / f : 0.0);
  std::printf("grammar masks      %lld (%lld from the cache), %.3f ms each, %.3f ms per decode step (CPU)\n",
              static_cast<long long>(masks), static_cast<long long>(cache_hits), masks > 0 ? mask_seconds * 1e3 / static_cast<double>(masks) : 0.0,
              decode_steps > 0 ? mask_seconds * 1e3 / static_cast<double>(decode_steps) : 0.0);
}

}  // namespace hinge::cli
