#include "plan/workloads.h"

#include <algorithm>
#include <cmath>
#include <random>

namespace hinge::plan {
namespace {

constexpr int64_t kMaxRequests = 1000000, kMaxTokens = 1 << 20;

class Draw {
 public:
  Draw(uint64_t seed, int64_t vocab)
      : rng_(seed), id_(3, static_cast<int32_t>(std::max<int64_t>(4, vocab) - 1)) {}
  void append(std::vector<int32_t>* out, int64_t n) {
    for (int64_t i = 0; i < n; ++i) out->push_back(id_(rng_));
  }
  int64_t length(int64_t max, bool mixed) {
    return mixed ? std::uniform_int_distribution<int64_t>(1, max)(rng_) : max;
  }
  std::mt19937_64& rng() { return rng_; }

 private:
  std::mt19937_64 rng_;
  std::uniform_int_distribution<int32_t> id_;
};

Status check(const WorkloadSpec& w) {
  if (w.message_tokens < 1 || w.message_tokens > kMaxTokens)
    return Status::Error(
        "--prompt-tokens: each message / question / prompt needs 1 to 1048576 tokens");
  if (w.output_tokens < 1 || w.output_tokens > kMaxTokens)
    return Status::Error("--gen-tokens: 1 to 1048576");
  if (w.system_tokens < 0 || w.system_tokens > kMaxTokens)
    return Status::Error("--shared-prefix: 0 to 1048576 tokens");
  if (!(w.rate >= 0) || !std::isfinite(w.rate))
    return Status::Error("--rate: arrivals per second >= 0");
  return Status::Ok();
}

std::vector<int32_t> system_prompt(Draw& d, int64_t tokens) {
  std::vector<int32_t> p = {1};  // BOS
  d.append(&p, tokens);
  return p;
}

StatusOr<std::vector<SimRequest>> chat(const WorkloadSpec& w) {
  if (w.requests < 1 || w.turns < 1 || w.requests * w.turns > kMaxRequests)
    return Status::Error(
        "--requests (conversations) and --turns: at least 1 each, 1000000 messages in all at most");
  if (!(w.think_s >= 0) || !std::isfinite(w.think_s))
    return Status::Error("--think-s: seconds >= 0");
  Draw d(w.seed, w.vocab);
  const std::vector<int32_t> system = system_prompt(d, w.system_tokens);
  std::vector<SimRequest> out;
  for (int64_t c = 0; c < w.requests; ++c) {
    std::vector<int32_t> so_far = system;
    int64_t previous = -1, previous_output = 0;
    for (int64_t t = 0; t < w.turns; ++t) {
      // The previous answer (the tokens the simulator samples), then the new message.
      so_far.insert(so_far.end(), static_cast<size_t>(previous_output), kSimSampledToken);
      d.append(&so_far, d.length(w.message_tokens, w.mixed_lengths));
      SimRequest r;
      r.prompt = so_far;
      r.output_tokens = static_cast<int32_t>(d.length(w.output_tokens, w.mixed_lengths));
      r.after = previous;
      r.arrival_s = previous < 0 ? (w.rate > 0 ? static_cast<double>(c) / w.rate : 0) : w.think_s;
      if (static_cast<int64_t>(so_far.size()) + r.output_tokens > kMaxTokens)
        return Status::Error(
            "--workload chat: a conversation outgrows 1048576 tokens; fewer --turns");
      previous = static_cast<int64_t>(out.size());
      previous_output = r.output_tokens;
      out.push_back(std::move(r));
    }
  }
  return out;
}

StatusOr<std::vector<SimRequest>> rag(const WorkloadSpec& w) {
  if (w.documents < 1 || w.documents > 100000) return Status::Error("--documents: 1 to 100000");
  if (w.document_tokens < 1 || w.document_tokens > kMaxTokens)
    return Status::Error("--document-tokens: 1 to 1048576");
  if (!(w.zipf >= 0) || w.zipf > 10) return Status::Error("--zipf: an exponent in [0, 10]");
  Draw d(w.seed, w.vocab);
  const std::vector<int32_t> system = system_prompt(d, w.system_tokens);
  std::vector<std::vector<int32_t>> docs(static_cast<size_t>(w.documents));
  for (auto& doc : docs) d.append(&doc, w.document_tokens);
  // Zipf popularity: document k asked with weight 1 / (k + 1)^s.
  std::vector<double> weight(static_cast<size_t>(w.documents));
  for (size_t k = 0; k < weight.size(); ++k)
    weight[k] = 1.0 / std::pow(static_cast<double>(k + 1), w.zipf);
  std::discrete_distribution<size_t> pick(weight.begin(), weight.end());
  std::vector<SimRequest> out(static_cast<size_t>(w.requests));
  for (size_t i = 0; i < out.size(); ++i) {
    SimRequest& r = out[i];
    r.prompt = system;
    const auto& doc = docs[pick(d.rng())];
    r.prompt.insert(r.prompt.end(), doc.begin(), doc.end());
    d.append(&r.prompt, d.length(w.message_tokens, w.mixed_lengths));
    r.output_tokens = static_cast<int32_t>(d.length(w.output_tokens, w.mixed_lengths));
    r.arrival_s = w.rate > 0 ? static_cast<double>(i) / w.rate : 0;
  }
  return out;
}

StatusOr<std::vector<SimRequest>> burst(const WorkloadSpec& w) {
  if (w.bursts < 1 || w.requests < 1 || w.bursts * w.requests > kMaxRequests)
    return Status::Error(
        "--bursts and --requests (per burst): at least 1 each, 1000000 requests in all at most");
  if (!(w.interval_s >= 0) || !std::isfinite(w.interval_s))
    return Status::Error("--burst-interval: seconds >= 0");
  Draw d(w.seed, w.vocab);
  const std::vector<int32_t> system = system_prompt(d, w.system_tokens);
  std::vector<SimRequest> out;
  for (int64_t b = 0; b < w.bursts; ++b)
    for (int64_t i = 0; i < w.requests; ++i) {
      SimRequest r;
      r.prompt = system;
      d.append(&r.prompt, d.length(w.message_tokens, w.mixed_lengths));
      r.output_tokens = static_cast<int32_t>(d.length(w.output_tokens, w.mixed_lengths));
      r.arrival_s = static_cast<double>(b) * w.interval_s;
      out.push_back(std::move(r));
    }
  return out;
}

}  // namespace

StatusOr<std::vector<SimRequest>> generate_workload(const WorkloadSpec& w) {
  HINGE_RETURN_IF_ERROR(check(w));
  if (w.name == "chat") return chat(w);
  if (w.name == "rag") {
    if (w.requests < 1 || w.requests > kMaxRequests)
      return Status::Error("--requests: 1 to 1000000");
    return rag(w);
  }
  if (w.name == "burst") return burst(w);
  return Status::Errorf("--workload: unknown '{}'; expected bench, chat, rag or burst", w.name);
}

}  // namespace hinge::plan
