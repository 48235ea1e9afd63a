// EngineConfig's and GenerateRequest's validation (Engine::create, Engine::check_request).
#include "engine/request_check.h"

namespace hinge {

Status EngineConfig::validate() const {
  if (threads < 1) return Status::Errorf("threads must be >= 1, got {}", threads);
  if (kv_memory_bytes < 0) return Status::Error("kv memory must not be negative");
  if (!(kv_memory_fraction > 0 && kv_memory_fraction <= 1))
    return Status::Errorf("kv memory fraction must be in (0, 1], got {}", kv_memory_fraction);
  if (block_size < 1 || block_size > 1024)
    return Status::Errorf("--block-size must be in [1, 1024], got {}", block_size);
  if (max_batched_tokens < 1)
    return Status::Errorf("--max-batched-tokens must be >= 1, got {}", max_batched_tokens);
  if (max_num_seqs < 1) return Status::Errorf("--max-num-seqs must be >= 1, got {}", max_num_seqs);
  if (max_model_len < 0) return Status::Errorf("--ctx-size must be >= 0, got {}", max_model_len);
  if (kv_groups < 1) return Status::Errorf("--kv-groups must be >= 1, got {}", kv_groups);
  if (sink_tokens < 0 || sink_tokens > 65536)
    return Status::Errorf("--sink-tokens must be in [0, 65536], got {}", sink_tokens);
  if (spec_k < 1 || spec_k > kMaxSpecTokens)
    return Status::Errorf("--spec-k must be in [1, {}], got {}", kMaxSpecTokens, spec_k);
  if (spec_ngram_min < 1 || spec_ngram_max < spec_ngram_min || spec_ngram_max > 16)
    return Status::Errorf("n-gram lengths must satisfy 1 <= min <= max <= 16, got {}..{}",
                          spec_ngram_min, spec_ngram_max);
  // (kDraft without a draft model: Engine::create; the CLI loads it after this check.)
  if (draft_model != nullptr && spec_mode != SpecMode::kDraft)
    return Status::Error("a draft model goes with --speculative draft");
  return Status::Ok();
}

Status check_generate_request(const GenerateRequest& req, const ModelConfig& c,
                              int32_t max_model_len, int32_t max_num_seqs,
                              ContextPolicy policy) {
  const int64_t n_prompt = static_cast<int64_t>(req.prompt_token_ids.size());
  if (n_prompt == 0) return Status::Error("empty prompt (start from BOS)");
  for (int32_t t : req.prompt_token_ids)
    if (t < 0 || t >= c.n_vocab)
      return Status::Errorf("prompt token id {} is out of range [0, {})", t, c.n_vocab);
  if (req.max_new_tokens < 1)
    return Status::Errorf("max_new_tokens must be >= 1, got {}", req.max_new_tokens);
  if (policy == ContextPolicy::kShift) {
    if (n_prompt >= max_model_len)
      return Status::Errorf("prompt {} does not fit the context size {} (--context-policy shift "
                            "drops old tokens while generating, not from the prompt)",
                            n_prompt, max_model_len);
    if (req.keep_tokens < 0 || req.keep_tokens > n_prompt)
      return Status::Errorf("keep_tokens {} must be in [0, prompt {}]", req.keep_tokens, n_prompt);
  } else if (n_prompt + req.max_new_tokens > max_model_len) {
    return Status::Errorf("prompt {} + max_new_tokens {} exceeds the context size {}", n_prompt,
                          req.max_new_tokens, max_model_len);
  }
  if (req.n < 1 || req.n > max_num_seqs)
    return Status::Errorf("n must be in [1, {}], got {}", max_num_seqs, req.n);
  if (req.logprobs < -1 || req.logprobs > 20)
    return Status::Errorf("logprobs must be in [-1, 20], got {}", req.logprobs);
  if (req.prompt_logprobs < -1 || req.prompt_logprobs > 20)
    return Status::Errorf("prompt logprobs must be in [-1, 20], got {}", req.prompt_logprobs);
  if (!req.forced_tokens.empty()) {
    if (req.n != 1) return Status::Errorf("forced tokens need n = 1, got {}", req.n);
    if (static_cast<int64_t>(req.forced_tokens.size()) < req.max_new_tokens)
      return Status::Errorf("{} forced tokens for max_new_tokens {}", req.forced_tokens.size(),
                            req.max_new_tokens);
    for (int32_t t : req.forced_tokens)
      if (t < 0 || t >= c.n_vocab)
        return Status::Errorf("forced token id {} is out of range [0, {})", t, c.n_vocab);
  }
  for (const LogitBias& b : req.sampling.logit_bias)
    if (b.token >= c.n_vocab)
      return Status::Errorf("logit bias token id {} is out of range [0, {})", b.token,
                            c.n_vocab);
  return req.sampling.validate();
}

}  // namespace hinge
