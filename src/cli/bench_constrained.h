// `hinge bench --constrained N`: the grammar the first N requests follow (--grammar FILE in GBNF,
// --json-schema FILE, or any JSON object), and the split of their time per token from the free
// requests' (constrained decoding must not slow the free requests of the same batch).
#pragma once

#include <memory>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "common/status.h"
#include "grammar/grammar.h"

namespace hinge::cli {

StatusOr<std::shared_ptr<const grammar::Grammar>> bench_grammar(const BenchArgs& args);

struct ConstrainedSplit {
  std::vector<double> itl_constrained_ms, itl_free_ms;
  int64_t constrained_tokens = 0, free_tokens = 0;
  // JSON fields (constrained_*, free_*, mask_ms_per_step) and the table's lines.
  void to_json(nlohmann::ordered_json* j, double mask_seconds, int64_t masks, int64_t cache_hits,
               int64_t decode_steps);
  void print(double mask_seconds, int64_t masks, int64_t cache_hits, int64_t decode_steps);
};

}  // namespace hinge::cli
