// StreamingLLM's comparison on the two small trained models (eval/context_eval.h), over a
// synthetic story text of 20 windows (6 under the sanitizers, where the sliding-window recompute
// of every position took 7 minutes; the margins hold there too: at 6 windows tinystories-656k
// ends with shift / recompute 0.79 and window-only / shift 1.27, stories260K with shift /
// recompute 0.97): the shift policy stays within 10% of sliding-window recompute at the end of
// the text; on tinystories-656k (trained with BOS-led sequences, so it leans on its first tokens
// as attention sinks) window-only is clearly worse than shift with sinks; stories260K (llama2.c
// trains on chunks cut anywhere in the token stream) shows no sink effect: both shifted runs stay
// near recompute. The recompute with the text's BOS first (StreamingLLM's baseline keeps no sink)
// sits between them on tinystories-656k, as measured (2026-12-06, 20 windows: shift 49.5,
// recompute+BOS 58.0, recompute 68.3 at the end): the model leans on BOS, and shift's cached keys
// were computed with more of the text in view than a window of 127 fresh tokens has.
// docs/bounded-memory.md has the tables.
#include <gtest/gtest.h>

#include <cmath>

#include "eval/context_eval.h"
#include "model_test_util.h"
#include "tokenizer/tokenizer.h"

namespace hinge {
namespace {

#if defined(__SANITIZE_ADDRESS__)
constexpr int32_t kWindows = 6;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr int32_t kWindows = 6;
#else
constexpr int32_t kWindows = 20;
#endif
#else
constexpr int32_t kWindows = 20;
#endif

ContextEvalResult evaluate(const std::string& path, int32_t window, bool recompute_bos) {
  auto m = testing::load_or_die(path);
  EXPECT_TRUE(m);
  if (!m) return {};
  auto tok = Tokenizer::create(m->vocab);
  EXPECT_TRUE(tok.ok());
  std::vector<int32_t> ids =
      (*tok)->encode(synthetic_story_text(kWindows * window * 5), true, false);
  EXPECT_GE(ids.size(), static_cast<size_t>(kWindows * window));
  ids.resize(static_cast<size_t>(kWindows * window));
  ContextEvalOptions o;
  o.window = window;
  o.sink_tokens = 4;
  o.span_tokens = 256;
  o.threads = 2;
  o.recompute_bos = recompute_bos;
  auto r = evaluate_context_policies(*m, ids, o);
  EXPECT_TRUE(r.ok()) << r.status().message();  // any position past the window is an error
  if (!r.ok()) return {};
  EXPECT_EQ(r->spans.size(), static_cast<size_t>((kWindows * window - 1 + 255) / 256));
  EXPECT_GT(r->shifts, 0);
  for (const ContextEvalSpan& s : r->spans)
    EXPECT_TRUE(std::isfinite(s.window_only) && std::isfinite(s.shift) &&
                std::isfinite(s.recompute) && s.recompute > 1)
        << s.begin;
  for (const ContextEvalSpan& s : r->spans)
    EXPECT_TRUE(recompute_bos ? std::isfinite(s.recompute_bos) && s.recompute_bos > 1
                              : s.recompute_bos == 0)
        << s.begin;
  return *r;
}

TEST(ContextEval, ShiftStaysNearRecomputeAndSinksMatterWhereTheModelUsesThem) {
  const ContextEvalResult tiny =
      evaluate(testing::shared_path("models/tinystories-656k"), 128, /*recompute_bos=*/true);
  ASSERT_FALSE(tiny.spans.empty());
  const ContextEvalSpan& t = tiny.spans.back();
  EXPECT_LE(t.shift, 1.10 * t.recompute) << t.shift << " vs " << t.recompute;
  EXPECT_GT(t.window_only, 1.10 * t.shift) << t.window_only << " vs " << t.shift;
  // The order measured: shift < recompute with BOS < recompute without.
  EXPECT_LT(1.05 * t.shift, t.recompute_bos) << t.shift << " vs " << t.recompute_bos;
  EXPECT_LT(1.05 * t.recompute_bos, t.recompute) << t.recompute_bos << " vs " << t.recompute;

  const ContextEvalResult small =
      evaluate(testing::shared_path("models/stories260K.gguf"), 128, /*recompute_bos=*/false);
  ASSERT_FALSE(small.spans.empty());
  const ContextEvalSpan& s = small.spans.back();
  EXPECT_LE(s.shift, 1.10 * s.recompute) << s.shift << " vs " << s.recompute;
  EXPECT_LE(s.window_only, 1.10 * s.recompute) << s.window_only << " vs " << s.recompute;
}

}  // namespace
}  // namespace hinge
