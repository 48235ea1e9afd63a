// Single-sequence generation: prompt -> prefill -> sample/decode loop, streaming text through
// the detokenizer and stop-string matcher, with timing statistics. `hinge run` uses it.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/status.h"
#include "engine/sampling_params.h"
#include "model/llama_model.h"
#include "tokenizer/tokenizer.h"

namespace hinge {

struct GenerationResult {
  std::vector<int32_t> token_ids;  // generated ids (not the prompt)
  std::string text;                // generated text (stop string excluded)
  int64_t prompt_tokens = 0;
  int64_t generated_tokens = 0;
  double prefill_seconds = 0;
  double decode_seconds = 0;       // time of the decode steps (tokens after the first)
  double prefill_tokens_per_s = 0;
  double decode_tokens_per_s = 0;
  double achieved_gb_per_s = 0;    // (weights + KV bytes read per decoded token) x decode tok/s
  std::string finish_reason;       // "length" or "stop"
};

struct GenerationOptions {
  int64_t max_new_tokens = 256;
  SamplingParams sampling;
  // Called with each piece of text as soon as it is safe to show (complete UTF-8, not part of a
  // possible stop string).
  std::function<void(const std::string&)> on_text;
};

// Generates after `prompt_ids` (which must be non-empty, e.g. {BOS}). The cache must be empty.
StatusOr<GenerationResult> generate(LlamaModel& model, const Tokenizer& tokenizer,
                                    const std::vector<int32_t>& prompt_ids, KvCache& cache,
                                    const GenerationOptions& options);

}  // namespace hinge
