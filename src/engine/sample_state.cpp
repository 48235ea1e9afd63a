#include "engine/sample_state.h"

#include <algorithm>
#include <cmath>

namespace hinge {

void fill_logprobs(const float* logits, int64_t n_vocab, int32_t token, int32_t k,
                   PositionLogprobs* out) {
  const size_t vocab = static_cast<size_t>(n_vocab);
  const float mx = *std::max_element(logits, logits + vocab);
  double sum = 0;
  for (size_t i = 0; i < vocab; ++i) sum += std::exp(static_cast<double>(logits[i] - mx));
  const float lse = mx + static_cast<float>(std::log(sum));
  out->sampled = {token, logits[token] - lse};
  auto better = [](const TokenLogprob& a, const TokenLogprob& b) {
    return a.logprob != b.logprob ? a.logprob > b.logprob : a.token < b.token;
  };
  std::vector<TokenLogprob>& top = out->top;
  top.clear();
  const size_t kk = std::min(static_cast<size_t>(std::max(0, k)), vocab);
  top.reserve(kk);
  for (size_t i = 0; i < vocab && kk > 0; ++i) {
    const TokenLogprob c{static_cast<int32_t>(i), logits[i]};
    if (top.size() < kk) {
      top.push_back(c);
      std::push_heap(top.begin(), top.end(), better);  // front: the worst kept
    } else if (better(c, top.front())) {
      std::pop_heap(top.begin(), top.end(), better);
      top.back() = c;
      std::push_heap(top.begin(), top.end(), better);
    }
  }
  std::sort(top.begin(), top.end(), better);
  for (TokenLogprob& t : top) t.logprob -= lse;
}

}  // namespace hinge
