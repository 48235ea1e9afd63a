// StreamingLLM's comparison on hinge's own engine: a long token sequence is teacher-forced
// (GenerateRequest::forced_tokens) through a context of `window` tokens under three policies,
// and the perplexity of each span of span_tokens positions is reported:
//   window-only   ContextPolicy::kShift with no sink tokens (the oldest block goes first)
//   shift         ContextPolicy::kShift keeping the first sink_tokens (whole blocks)
//   recompute     every position predicted from the window - 1 tokens before it, computed
//                 afresh (positions 0 .. window - 1): the exact sliding window, window x slower
//                 (StreamingLLM's baseline: the window alone, which starts mid-text)
//   recompute+BOS the same with the text's first token (BOS) first and the window - 2 tokens
//                 before the position: a sliding window that keeps the sink a model trained on
//                 BOS-led sequences leans on
// Every policy runs through the real scheduler, KV cache and kernels; positions stay below the
// window (the engine refuses any beyond the context).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "common/status.h"
#include "model/loaded_model.h"

namespace hinge {

struct ContextEvalSpan {
  int64_t begin = 0;  // first position predicted (a token index of the text)
  int64_t count = 0;
  double window_only = 0, shift = 0, recompute = 0, recompute_bos = 0;  // perplexity
};

struct ContextEvalResult {
  int32_t window = 0;
  int32_t sink_tokens = 0;
  int64_t tokens = 0;
  int64_t shifts = 0;  // of the shift run
  std::vector<ContextEvalSpan> spans;
};

struct ContextEvalOptions {
  int32_t window = 128;
  int32_t sink_tokens = 4;
  int32_t span_tokens = 256;
  int32_t block_size = 16;
  int32_t threads = 1;
  bool recompute_bos = true;  // also the recompute+BOS run (0 in the spans when false)
};

// Errors: fewer than 2 windows of tokens, a window beyond the model's context, engine errors.
StatusOr<ContextEvalResult> evaluate_context_policies(const LoadedModel& model,
                                                      std::span<const int32_t> tokens,
                                                      const ContextEvalOptions& options);

// A long story-like English text (simple sentences about named children, animals and things,
// as in TinyStories), about `chars` characters, deterministic in `seed`: what the tests and
// `hinge context-eval` feed small story models when no text file is given.
std::string synthetic_story_text(int64_t chars, uint64_t seed = 1);

}  // namespace hinge
