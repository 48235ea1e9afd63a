#include "eval/context_eval.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <unordered_map>

#include <fmt/format.h>

#include "hinge/engine.h"

namespace hinge {
namespace {

EngineConfig eval_config(const ContextEvalOptions& o, ContextPolicy policy, int32_t sinks,
                         int32_t max_len) {
  EngineConfig c;
  c.threads = o.threads;
  c.k_dtype = c.v_dtype = KvDtype::kF32;  // the policies, not KV quantization, are compared
  c.block_size = o.block_size;
  c.max_model_len = max_len;
  c.max_num_seqs = 64;
  c.max_batched_tokens = std::max(512, max_len);
  c.kv_memory_bytes = 0;
  c.context_policy = policy;
  c.sink_tokens = sinks;
  c.enable_prefix_cache = false;
  c.detokenize = false;
  return c;
}

GenerateRequest forced_request(std::span<const int32_t> prompt, std::span<const int32_t> forced) {
  GenerateRequest r;
  r.prompt_token_ids.assign(prompt.begin(), prompt.end());
  r.forced_tokens.assign(forced.begin(), forced.end());
  r.max_new_tokens = static_cast<int32_t>(forced.size());
  r.logprobs = 0;
  r.sampling.temperature = 0;
  r.sampling.ignore_eos = true;
  return r;
}

// Sizes a KV arena for `seqs` sequences of `tokens` each (no automatic sizing from RAM).
void size_kv(EngineConfig* c, const LoadedModel& m, int64_t seqs, int64_t tokens) {
  const int64_t per_token = 2 * m.config.n_layers * m.config.kv_dim() * 4;  // f32 K and V
  c->kv_memory_bytes = per_token * (seqs * (tokens + 2 * c->block_size) + 64 * c->block_size);
}

// Log-probability of tokens[i + 1] at every position i of one forced run (shift policies).
StatusOr<std::vector<double>> shifted_run(const LoadedModel& m, std::span<const int32_t> tokens,
                                          const ContextEvalOptions& o, int32_t sinks,
                                          int64_t* shifts) {
  EngineConfig c = eval_config(o, ContextPolicy::kShift, sinks, o.window);
  c.max_num_seqs = 1;
  size_kv(&c, m, 1, o.window);
  HINGE_ASSIGN_OR_RETURN(auto engine, Engine::create(m, nullptr, c));
  HINGE_RETURN_IF_ERROR(
      engine->add_request(forced_request(tokens.first(1), tokens.subspan(1))).status());
  std::vector<double> lp;
  lp.reserve(tokens.size());
  std::vector<RequestDelta> deltas;
  while (engine->has_unfinished()) {
    HINGE_RETURN_IF_ERROR(engine->step(&deltas));
    for (const RequestDelta& d : deltas)
      for (const PositionLogprobs& p : d.logprobs) lp.push_back(p.sampled.logprob);
  }
  *shifts = engine->stats().context_shifts;
  return lp;
}

// The same, each position from the window - 1 tokens before it computed afresh; with `bos`,
// from the text's first token and the window - 2 tokens before it.
StatusOr<std::vector<double>> recompute_run(const LoadedModel& m, std::span<const int32_t> tokens,
                                            const ContextEvalOptions& o, bool bos) {
  EngineConfig c = eval_config(o, ContextPolicy::kError, 0, o.window);
  size_kv(&c, m, c.max_num_seqs, o.window);
  HINGE_ASSIGN_OR_RETURN(auto engine, Engine::create(m, nullptr, c));
  const int64_t n = static_cast<int64_t>(tokens.size());
  std::vector<double> lp(static_cast<size_t>(n - 1), 0.0);
  // Positions before the first full window: one forced run over the start (nothing dropped).
  const int64_t first_full = o.window - 1;  // predicts tokens[window] from tokens[1 .. window)
  std::unordered_map<uint64_t, int64_t> position_of;
  // The start: prompt tokens[0], forced tokens[1 .. window - 1]: positions 0 .. window - 2.
  {
    auto id = engine->add_request(forced_request(
        tokens.first(1), tokens.subspan(1, static_cast<size_t>(std::min<int64_t>(first_full, n - 1)))));
    if (!id.ok()) return id.status();
    position_of[id->value] = 0;
  }
  int64_t next = first_full;  // the next position to queue: predicts tokens[next + 1]
  std::vector<RequestDelta> deltas;
  std::unordered_map<uint64_t, int64_t> got;
  std::vector<int32_t> prompt;
  while (engine->has_unfinished() || next < n - 1) {
    // Keep the batch full: one request per position, its window - 1 tokens as the prompt.
    while (next < n - 1 && engine->stats().running + engine->stats().waiting < 48) {
      const int64_t begin = next - (o.window - 2);  // tokens [begin, next] (window - 1 of them)
      prompt.assign(tokens.begin() + begin, tokens.begin() + next + 1);
      if (bos) prompt.front() = tokens[0];  // the first token, then the window - 2 before
      auto id = engine->add_request(forced_request(
          prompt, tokens.subspan(static_cast<size_t>(next + 1), 1)));
      if (!id.ok()) return id.status();
      position_of[id->value] = next;
      ++next;
    }
    HINGE_RETURN_IF_ERROR(engine->step(&deltas));
    for (const RequestDelta& d : deltas) {
      int64_t& k = got[d.id.value];
      for (const PositionLogprobs& p : d.logprobs)
        lp[static_cast<size_t>(position_of.at(d.id.value) + k++)] = p.sampled.logprob;
    }
  }
  return lp;
}

}  // namespace

StatusOr<ContextEvalResult> evaluate_context_policies(const LoadedModel& model,
                                                      std::span<const int32_t> tokens,
                                                      const ContextEvalOptions& o) {
  if (o.window > model.config.context_length)
    return Status::Errorf("context-eval: a window of {} tokens is beyond the model's context {}",
                          o.window, model.config.context_length);
  if (static_cast<int64_t>(tokens.size()) < 2 * int64_t{o.window})
    return Status::Errorf("context-eval: {} tokens are fewer than two windows of {}",
                          tokens.size(), o.window);
  if (o.span_tokens < 1) return Status::Error("context-eval: span must be >= 1");
  ContextEvalResult r;
  r.window = o.window;
  r.sink_tokens = o.sink_tokens;
  r.tokens = static_cast<int64_t>(tokens.size());
  int64_t ignored = 0;
  HINGE_ASSIGN_OR_RETURN(const auto window_only, shifted_run(model, tokens, o, 0, &ignored));
  HINGE_ASSIGN_OR_RETURN(const auto shift, shifted_run(model, tokens, o, o.sink_tokens, &r.shifts));
  HINGE_ASSIGN_OR_RETURN(const auto recompute, recompute_run(model, tokens, o, false));
  std::vector<double> recompute_bos;
  if (o.recompute_bos) {
    HINGE_ASSIGN_OR_RETURN(recompute_bos, recompute_run(model, tokens, o, true));
  }
  const int64_t n = static_cast<int64_t>(window_only.size());
  if (static_cast<int64_t>(shift.size()) != n || static_cast<int64_t>(recompute.size()) != n ||
      (o.recompute_bos && static_cast<int64_t>(recompute_bos.size()) != n))
    return Status::Error("context-eval: the runs predicted different numbers of positions");
  for (int64_t b = 0; b < n; b += o.span_tokens) {
    ContextEvalSpan s;
    s.begin = b;
    s.count = std::min<int64_t>(o.span_tokens, n - b);
    double a = 0, sh = 0, rc = 0, rb = 0;
    for (int64_t i = b; i < b + s.count; ++i) {
      a += window_only[static_cast<size_t>(i)];
      sh += shift[static_cast<size_t>(i)];
      rc += recompute[static_cast<size_t>(i)];
      if (o.recompute_bos) rb += recompute_bos[static_cast<size_t>(i)];
    }
    const double k = static_cast<double>(s.count);
    s.window_only = std::exp(-a / k);
    s.shift = std::exp(-sh / k);
    s.recompute = std::exp(-rc / k);
    s.recompute_bos = o.recompute_bos ? std::exp(-rb / k) : 0;
    r.spans.push_back(s);
  }
  return r;
}

std::string synthetic_story_text(int64_t chars, uint64_t seed) {
  static const char* kNames[] = {"Lily", "Tom", "Mia", "Ben", "Sue", "Max", "Anna", "Tim"};
  static const char* kThings[] = {"ball", "kite", "cat", "dog", "box", "flower", "tree", "car",
                                  "book", "cake"};
  static const char* kPlaces[] = {"the park", "the garden", "the house", "the school",
                                  "the forest", "the beach"};
  static const char* kFeel[] = {"happy", "sad", "scared", "tired", "excited", "proud"};
  static const char* kVerbs[] = {"played with", "looked at", "found", "liked", "shared",
                                 "wanted"};
  std::mt19937_64 rng(seed);
  auto pick = [&](const auto& arr) { return arr[rng() % std::size(arr)]; };
  std::string text = "Once upon a time, there was a little girl named Lily.";
  while (static_cast<int64_t>(text.size()) < chars) {
    const char* a = pick(kNames);
    const char* b = pick(kNames);
    const char* t = pick(kThings);
    switch (rng() % 6) {
      case 0: text += fmt::format(" One day, {} went to {} with {}.", a, pick(kPlaces), b); break;
      case 1: text += fmt::format(" {} {} a big {}.", a, pick(kVerbs), t); break;
      case 2: text += fmt::format(" {} was very {} because the {} was gone.", a, pick(kFeel), t); break;
      case 3: text += fmt::format(" \"Can I have the {}?\" asked {}. \"Yes,\" said {}.", t, a, b); break;
      case 4: text += fmt::format(" {} and {} played in {} all day.", a, b, pick(kPlaces)); break;
      default: text += fmt::format(" The {} was red and {} loved it.\n", t, a); break;
    }
  }
  return text;
}

}  // namespace hinge
