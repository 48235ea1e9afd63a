#include "engine/sample_state.h"

#include <algorithm>
#include <cmath>

namespace hinge {

void SampleBook::add(RequestId id, GenerateRequest req, int64_t n_vocab, const Tokenizer* tok,
                     bool detokenize) {
  auto group = std::make_unique<Group>();
  group->params = std::move(req);
  for (int32_t i = 0; i < group->params.n; ++i) {
    const RequestId sid(id.value + static_cast<uint64_t>(i));
    group->ids.push_back(sid);
    samples.try_emplace(sid, id, i, group->params, n_vocab, tok, detokenize);
  }
  groups.emplace(id, std::move(group));
}

RequestDelta& SampleBook::delta_for(RequestId sid, std::vector<RequestDelta>* deltas) {
  SampleState& st = samples.at(sid);
  if (st.delta_step == step) return (*deltas)[st.delta_slot];
  st.delta_step = step;
  st.delta_slot = num_deltas++;
  delta_sids.push_back(sid);
  if (st.delta_slot == deltas->size()) deltas->emplace_back();
  RequestDelta& d = (*deltas)[st.delta_slot];
  d.id = st.group;
  d.index = st.index;
  d.token_ids.clear();
  d.text.clear();
  d.finish_reason = FinishReason::kNone;
  d.usage = {};
  d.logprobs.clear();
  d.prompt_logprobs.clear();
  return d;
}

void SampleBook::finish(RequestId sid, FinishReason reason, std::vector<RequestDelta>* deltas) {
  auto it = samples.find(sid);
  if (it == samples.end()) return;
  SampleState& st = it->second;
  RequestDelta& d = delta_for(sid, deltas);
  if (st.output) d.text += st.output->finish();
  if (reason == FinishReason::kLength && st.stop_seen) reason = FinishReason::kStop;
  d.finish_reason = reason;
  d.usage = st.usage;
  const RequestId group = st.group;
  samples.erase(it);
  auto g = groups.find(group);
  if (g != groups.end() &&
      std::none_of(g->second->ids.begin(), g->second->ids.end(),
                   [&](RequestId id) { return samples.contains(id); }))
    groups.erase(g);
}

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
