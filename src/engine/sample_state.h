// The engine's per-sample output state: each sample's sampler (own random stream),
// output processor (text, stop strings) and usage, grouped per request; and the logprobs of one logits row.
// Engine-thread only.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <unordered_map>
#include <vector>

#include "engine/sampler.h"
#include "engine/spec_decode.h"
#include "grammar/matcher.h"
#include "engine/output_processor.h"
#include "hinge/engine.h"
#include "tokenizer/tokenizer.h"

namespace hinge {

// Sample i of a request draws from its own random stream (seed + i * golden ratio), so the
// samples of one request differ while each stays reproducible.
inline SamplingParams sample_params(const SamplingParams& p, int32_t index) {
  SamplingParams s = p;
  s.seed = p.seed + static_cast<uint64_t>(index) * 0x9E3779B97F4A7C15ull;
  return s;
}

// Output state of one sample (one scheduler request id).
struct SampleState {
  RequestId group;        // the id add_request returned
  int32_t index = 0;      // sample index within the group
  const GenerateRequest* params = nullptr;  // owned by the group
  Sampler sampler;
  std::optional<OutputProcessor> output;  // text and stop strings (EngineConfig::detokenize)
  RequestUsage usage;
  bool stop_seen = false;  // EOS or stop string: finish after update()
  bool prompt_logprobs_sent = false;  // the group's prompt logprobs went out in a delta
  int64_t delta_step = -1;  // the step whose deltas hold this sample's, at delta_slot
  size_t delta_slot = 0;
  // Constrained decoding (sampling.grammar): the grammar's state after the tokens so far, and
  // the mask of the next step's allowed tokens (n_vocab bits).
  std::optional<grammar::Matcher> matcher;
  std::vector<uint64_t> mask;
  // Speculative decoding: this sample's draft length (the engine sets its k_max on first use).
  SpecController spec;
  // A draft model's (engine/draft_model.h): the drafts proposed for this step; for a sampled
  // request the draft's sampler (its own stream) and the distribution q of each draft
  // ([k_max][n_vocab], allocated on first use).
  std::vector<int32_t> drafts;
  std::optional<Sampler> draft_sampler;
  std::vector<float> draft_probs;

  SampleState(RequestId g, int32_t i, const GenerateRequest& p, int64_t n_vocab,
              const Tokenizer* tok, bool detokenize)
      : group(g),
        index(i),
        params(&p),
        sampler(sample_params(p.sampling, i), n_vocab) {
    if (tok && detokenize)
      output.emplace(*tok, p.sampling.stop,
                     p.prompt_token_ids.empty() ? -1 : p.prompt_token_ids.back());
    usage.prompt_tokens = static_cast<int32_t>(p.prompt_token_ids.size());
    if (p.sampling.grammar) {
      matcher.emplace(p.sampling.grammar);
      mask.assign(static_cast<size_t>((n_vocab + 63) / 64), 0);
    }
  }
};

struct Group {
  GenerateRequest params;
  std::vector<RequestId> ids;  // sample 0 (== group id), then samples 1..n-1
  // params.prompt_logprobs >= 0: entry i for prompt token i + 1, filled in position order as
  // the prompt is computed (a recompute after preemption skips the positions already done).
  std::vector<PositionLogprobs> prompt_logprobs;
};

// The engine's live samples, grouped per request, and this step's deltas: the caller's vector
// is reused in place (its buffers keep their capacity), its first num_deltas are this step's.
struct SampleBook {
  std::unordered_map<RequestId, std::unique_ptr<Group>> groups;
  std::unordered_map<RequestId, SampleState> samples;
  size_t num_deltas = 0;             // deltas of this step (a prefix of the caller's vector)
  std::vector<RequestId> delta_sids;  // deltas[i] belongs to this sample
  int64_t step = 0;

  // Request id's group: samples id, id + 1, ..., id + n - 1.
  void add(RequestId id, GenerateRequest req, int64_t n_vocab, const Tokenizer* tok,
           bool detokenize);
  // The start of step `s`: no delta yet.
  void begin_step(int64_t s) {
    step = s;
    num_deltas = 0;
    delta_sids.clear();
  }
  // This step's delta of sample sid: the next one of the caller's vector, reset in place.
  RequestDelta& delta_for(RequestId sid, std::vector<RequestDelta>* deltas);
  // Sample sid's final delta (its text flushed, usage, reason); the sample (and its group once
  // no sample is left) is forgotten.
  void finish(RequestId sid, FinishReason reason, std::vector<RequestDelta>* deltas);
};

// Log-softmax of the raw logits (n_vocab of them) at `token`, and the k most likely tokens
// (ties: lower id first).
void fill_logprobs(const float* logits, int64_t n_vocab, int32_t token, int32_t k,
                   PositionLogprobs* out);

}  // namespace hinge
