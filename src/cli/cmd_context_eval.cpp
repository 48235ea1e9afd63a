// `hinge context-eval`: perplexity per span of a long text under window-only, shift with sinks
// and sliding-window recompute (the table in docs/bounded-memory.md).
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "common/thread_pool.h"
#include "eval/context_eval.h"
#include "tokenizer/tokenizer.h"

namespace hinge::cli {

int context_eval_command(const ContextEvalArgs& args) {
  if (args.window < 32 || args.window > (1 << 20))
    return fail(fmt::format("--ctx-size must be in [32, 1048576], got {}", args.window));
  if (args.windows < 2 || args.windows > 10000)
    return fail(fmt::format("--windows must be in [2, 10000], got {}", args.windows));
  if (args.span < 1) return fail("--span must be >= 1");
  if (args.block_size < 1 || args.block_size > args.window / 4)
    return fail(fmt::format("--block-size must be in [1, {}] (a quarter of the window), got {}",
                            args.window / 4, args.block_size));
  if (args.sink_tokens < 0 || args.sink_tokens > args.window / 2)
    return fail(fmt::format("--sink-tokens must be in [0, {}], got {}", args.window / 2,
                            args.sink_tokens));
  auto m = load_model_with_progress(args.model, args.tokenizer);
  if (!m.ok()) return fail(m.status().message());
  auto tok = Tokenizer::create((*m)->vocab);
  if (!tok.ok()) return fail(tok.status().with_context(args.model).message());
  std::string text;
  if (!args.text_file.empty()) {
    std::ifstream in(args.text_file, std::ios::binary);
    if (!in) return fail(fmt::format("{}: cannot open the text file", args.text_file));
    std::stringstream ss;
    ss << in.rdbuf();
    text = ss.str();
  } else {
    // About 4 characters per token for story text; cut to the length below.
    text = synthetic_story_text(args.windows * args.window * 5);
  }
  std::vector<int32_t> ids = (*tok)->encode(text, /*add_special=*/true, /*parse_special=*/false);
  if (args.text_file.empty() && static_cast<int64_t>(ids.size()) > args.windows * args.window)
    ids.resize(static_cast<size_t>(args.windows * args.window));
  ContextEvalOptions o;
  o.window = static_cast<int32_t>(args.window);
  o.sink_tokens = static_cast<int32_t>(args.sink_tokens);
  o.span_tokens = static_cast<int32_t>(args.span);
  o.block_size = static_cast<int32_t>(args.block_size);
  o.threads = args.threads > 0 ? args.threads : hardware_threads();
  auto r = evaluate_context_policies(**m, ids, o);
  if (!r.ok()) return fail(r.status().message());
  if (args.json) {
    nlohmann::ordered_json j;
    j["window"] = r->window;
    j["sink_tokens"] = r->sink_tokens;
    j["tokens"] = r->tokens;
    j["shifts"] = r->shifts;
    j["spans"] = nlohmann::ordered_json::array();
    for (const ContextEvalSpan& s : r->spans)
      j["spans"].push_back({{"begin", s.begin}, {"count", s.count},
                            {"window_only", s.window_only}, {"shift", s.shift},
                            {"recompute", s.recompute}, {"recompute_bos", s.recompute_bos}});
    std::puts(j.dump().c_str());
    return 0;
  }
  fmt::print("{} tokens ({:.1f} windows of {}), {} sink tokens, {} shifts\n", r->tokens,
             static_cast<double>(r->tokens) / r->window, r->window, r->sink_tokens, r->shifts);
  fmt::print("{:>14} {:>12} {:>12} {:>12} {:>14} {:>10}\n", "positions", "window-only", "shift",
             "recompute", "recompute+BOS", "shift/rec");
  for (const ContextEvalSpan& s : r->spans)
    fmt::print("{:>6}-{:<7} {:>12.3f} {:>12.3f} {:>12.3f} {:>14.3f} {:>9.3f}x\n", s.begin,
               s.begin + s.count - 1, s.window_only, s.shift, s.recompute, s.recompute_bos,
               s.shift / s.recompute);
  return 0;
}

}  // namespace hinge::cli
