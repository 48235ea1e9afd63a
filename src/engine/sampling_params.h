// Per-request sampling parameters (OpenAI / llama.cpp semantics).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "grammar/grammar.h"

namespace hinge {

// A bias added to one token's logit before sampling (OpenAI's logit_bias entry).
struct LogitBias {
  int32_t token = 0;  // >= 0; < n_vocab is the engine's check (Engine::check_request)
  float bias = 0;     // finite, in [-100, 100]
  bool operator==(const LogitBias&) const = default;
};

struct SamplingParams {
  float temperature = 0.8f;        // <= 0: greedy (argmax)
  int32_t top_k = 40;              // <= 0: disabled
  float top_p = 0.95f;             // >= 1: disabled
  float min_p = 0.05f;             // <= 0: disabled
  float repetition_penalty = 1.0f; // 1: disabled (llama.cpp's repeat_penalty)
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  int32_t penalty_last_n = 64;     // window of recent tokens the penalties look at; -1: all
  uint64_t seed = 0xC0FFEE;
  std::vector<std::string> stop;   // stop strings (not part of the output)
  bool ignore_eos = false;
  // Added to the logits after the penalties and before every other step, greedy included (as
  // OpenAI and vLLM apply it): -100 all but bans a token, +100 all but forces it. A sparse add
  // (entries are few; OpenAI allows 300), distinct tokens. Logprobs stay the raw model's.
  std::vector<LogitBias> logit_bias{};
  // Constrained decoding: every sampled token keeps the text a prefix of this grammar's
  // language (grammar/matcher.h); EOS only where it may end, and the sample ends when nothing
  // more can follow. Null: unconstrained.
  std::shared_ptr<const grammar::Grammar> grammar;

  // Checks ranges; the message names the parameter.
  Status validate() const;
};

}  // namespace hinge
