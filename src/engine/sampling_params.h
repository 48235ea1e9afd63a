// Per-request sampling parameters (OpenAI / llama.cpp semantics).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace hinge {

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

  // Checks ranges; the message names the parameter.
  Status validate() const;
};

}  // namespace hinge
