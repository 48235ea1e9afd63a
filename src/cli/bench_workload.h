// The requests `hinge bench` submits, drawn from its seed: BOS, --shared-prefix random ids, then
// --prompt-tokens random ids of each request's own, --gen-tokens each (--mixed-lengths: own
// prompt uniform in [lo, P], output in [1, G], as if EOS came early). `hinge simulate` draws the
// same, so a simulation and a benchmark of the same flags schedule the same steps.
#pragma once

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

namespace hinge::cli {

struct BenchPrompt {
  std::vector<int32_t> tokens;
  int64_t gen_tokens = 0;
};

// bos: the BOS id, or -1 without one (then a request's own part has at least one token unless
// there is a shared prefix). Ids uniform in [0, vocab).
inline std::vector<BenchPrompt> bench_prompts(uint64_t seed, int64_t vocab, int32_t bos,
                                              int64_t shared_prefix, int64_t prompt_tokens,
                                              int64_t gen_tokens, bool mixed_lengths, int64_t n) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int32_t> pick(0, static_cast<int32_t>(vocab - 1));
  std::vector<int32_t> prefix;
  if (bos >= 0) prefix.push_back(bos);
  for (int64_t i = 0; i < shared_prefix; ++i) prefix.push_back(pick(rng));
  std::vector<BenchPrompt> out(static_cast<size_t>(n));
  for (BenchPrompt& r : out) {
    r.tokens = prefix;
    int64_t own = prompt_tokens;
    r.gen_tokens = gen_tokens;
    if (mixed_lengths) {
      const int64_t lo = shared_prefix > 0 || bos >= 0 ? 0 : 1;
      own = std::uniform_int_distribution<int64_t>(std::min(lo, own), own)(rng);
      r.gen_tokens = std::uniform_int_distribution<int64_t>(1, gen_tokens)(rng);
    }
    for (int64_t i = 0; i < own; ++i) r.tokens.push_back(pick(rng));
  }
  return out;
}

}  // namespace hinge::cli
