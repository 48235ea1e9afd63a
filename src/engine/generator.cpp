#include "engine/generator.h"

#include <chrono>

#include "engine/sampler.h"
#include "engine/stop_matcher.h"

namespace hinge {
namespace {
using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}
}  // namespace

StatusOr<GenerationResult> generate(LlamaModel& model, const Tokenizer& tokenizer,
                                    const std::vector<int32_t>& prompt_ids, KvCache& cache,
                                    const GenerationOptions& options) {
  if (prompt_ids.empty()) return Status::Error("generate: empty prompt (start from BOS)");
  if (cache.num_tokens() != 0) return Status::Error("generate: cache is not empty");
  HINGE_RETURN_IF_ERROR(options.sampling.validate());
  const LlamaConfig& cfg = model.config();
  const int64_t ctx = std::min(cfg.context_length, cache.max_tokens());
  if (static_cast<int64_t>(prompt_ids.size()) >= ctx)
    return Status::Errorf("prompt of {} tokens does not fit the context size {}", prompt_ids.size(), ctx);

  GenerationResult res;
  res.prompt_tokens = static_cast<int64_t>(prompt_ids.size());
  std::vector<float> logits(static_cast<size_t>(cfg.n_vocab));
  std::vector<int32_t> history = prompt_ids;
  history.reserve(prompt_ids.size() + static_cast<size_t>(options.max_new_tokens));
  Sampler sampler(options.sampling, cfg.n_vocab);
  StreamingDetokenizer detok(tokenizer);
  for (int32_t id : prompt_ids) (void)detok.push_context(id);
  StopMatcher stops(options.sampling.stop);
  auto emit = [&](const std::string& text) {
    if (text.empty()) return;
    res.text += text;
    if (options.on_text) options.on_text(text);
  };

  auto t0 = Clock::now();
  HINGE_RETURN_IF_ERROR(model.forward(prompt_ids, cache, logits.data()));
  res.prefill_seconds = seconds_since(t0);

  const uint64_t weight_bytes = model.weights().bytes_per_token();
  const uint64_t kv_bytes_per_pos = static_cast<uint64_t>(cfg.kv_bytes_per_token(sizeof(float)));
  double bytes_read = 0;
  res.finish_reason = "length";
  auto t_decode = Clock::now();
  for (int64_t i = 0; i < options.max_new_tokens; ++i) {
    const int32_t next = sampler.sample(logits.data(), history);
    if (!options.sampling.ignore_eos && tokenizer.is_eog(next)) {
      res.finish_reason = "stop";
      break;
    }
    res.token_ids.push_back(next);
    history.push_back(next);
    emit(stops.push(detok.push(next)));
    if (stops.stopped()) {
      res.finish_reason = "stop";
      break;
    }
    if (i + 1 == options.max_new_tokens) break;
    if (cache.num_tokens() + 1 > ctx) break;  // context full: finish with "length"
    const int32_t one[1] = {next};
    HINGE_RETURN_IF_ERROR(model.forward(one, cache, logits.data()));
    bytes_read += static_cast<double>(weight_bytes + kv_bytes_per_pos * cache.num_tokens());
  }
  res.decode_seconds = seconds_since(t_decode);
  emit(stops.push(detok.flush()));
  emit(stops.flush());

  res.generated_tokens = static_cast<int64_t>(res.token_ids.size());
  if (res.prefill_seconds > 0) res.prefill_tokens_per_s = res.prompt_tokens / res.prefill_seconds;
  const int64_t decode_steps = res.generated_tokens > 0 ? res.generated_tokens - 1 : 0;
  if (res.decode_seconds > 0 && decode_steps > 0) {
    res.decode_tokens_per_s = decode_steps / res.decode_seconds;
    res.achieved_gb_per_s = bytes_read / res.decode_seconds / 1e9;
  }
  return res;
}

}  // namespace hinge
