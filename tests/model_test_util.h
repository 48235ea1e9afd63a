// Shared helpers of the model tests: load a model and run it.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <unordered_map>
#include <string>
#include <vector>

#include "common/thread_pool.h"
#include "hinge/engine.h"
#include "model/synth.h"
#include "model/transformer.h"
#include "model/loaded_model.h"
#include "test_util.h"
#include "tokenizer/tokenizer.h"

namespace hinge::testing {

// A small engine for the model tests: f32 KV (exact against the reference path), a 64-token
// step budget, `kv_bytes` of KV arena, `threads` threads.
inline EngineConfig small_f32_engine_config(int threads = 1, int64_t kv_bytes = 32 << 20) {
  EngineConfig c;
  c.threads = threads;
  c.k_dtype = c.v_dtype = KvDtype::kF32;
  c.kv_memory_bytes = kv_bytes;
  c.max_batched_tokens = 64;
  return c;
}

// One thread, a 4 MiB KV arena of `dtype`, a 256-token context: the engines of the KV transfer
// and tier tests, whose blocks move between engines of the same configuration.
inline EngineConfig small_kv_engine_config(KvDtype dtype) {
  EngineConfig c = small_f32_engine_config(1, 4 << 20);
  c.k_dtype = c.v_dtype = dtype;
  c.max_model_len = 256;
  return c;
}

// BOS + prompt_len - 1 ids in [3, 503) drawn from `seed`; greedy, EOS ignored.
inline GenerateRequest seeded_request(uint64_t seed, int32_t prompt_len, int32_t max_new) {
  GenerateRequest r;
  std::mt19937_64 rng(seed);
  r.prompt_token_ids = {1};
  while (static_cast<int32_t>(r.prompt_token_ids.size()) < prompt_len)
    r.prompt_token_ids.push_back(static_cast<int32_t>(3 + rng() % 500));
  r.max_new_tokens = max_new;
  r.sampling.temperature = 0.0f;
  r.sampling.seed = seed;
  r.sampling.ignore_eos = true;
  return r;
}

// What one request produced: its tokens, each sampled token's logprob, its final usage.
struct Outcome {
  std::vector<int32_t> tokens;
  std::vector<float> logprobs;
  RequestUsage usage;
};

// Runs r alone on e to the end, with logprobs of the sampled tokens.
inline Outcome generate_outcome(Engine& e, GenerateRequest r) {
  r.logprobs = 0;
  EXPECT_TRUE(e.add_request(std::move(r)).ok());
  Outcome out;
  std::vector<RequestDelta> deltas;
  while (e.has_unfinished()) {
    EXPECT_TRUE(e.step(&deltas).ok());
    for (const RequestDelta& d : deltas) {
      out.tokens.insert(out.tokens.end(), d.token_ids.begin(), d.token_ids.end());
      for (const PositionLogprobs& lp : d.logprobs) out.logprobs.push_back(lp.sampled.logprob);
      out.usage = d.usage;
    }
  }
  return out;
}

// A preset name ("tiny-gemma3") as a GoogleTest parameter name ("tiny_gemma3").
inline std::string param_name(const ::testing::TestParamInfo<const char*>& info) {
  std::string n = info.param;
  for (char& c : n) {
    if (c == '-') c = '_';
  }
  return n;
}

inline std::unique_ptr<LoadedModel> load_or_die(const std::string& path,
                                                const std::string& tokenizer = "") {
  LoadOptions opts;
  opts.tokenizer_path = tokenizer;
  auto m = load_model(path, opts);
  EXPECT_TRUE(m.ok()) << m.status().message();
  if (!m.ok()) return nullptr;
  return std::move(m).value();
}

// Every run of digits in `text`, as ids (CSV or space separated).
inline std::vector<int32_t> parse_ids(const std::string& text) {
  std::vector<int32_t> ids;
  std::string cur;
  for (char c : text) {
    if (c >= '0' && c <= '9') {
      cur += c;
    } else if (!cur.empty()) {
      ids.push_back(std::stoi(cur));
      cur.clear();
    }
  }
  if (!cur.empty()) ids.push_back(std::stoi(cur));
  return ids;
}
inline std::vector<int32_t> read_csv_ids(const std::string& path) { return parse_ids(read_file(path)); }

// Greedy decoding with the KV cache from `prompt`, n new tokens.
inline std::vector<int32_t> greedy(const LoadedModel& m, std::vector<int32_t> prompt, int n,
                                   int threads = 1) {
  ThreadPool pool(threads);
  Transformer model(m.config, m.weights, pool, 16);
  KvCache cache(m.config, static_cast<int64_t>(prompt.size()) + n);
  std::vector<float> logits(static_cast<size_t>(m.config.n_vocab));
  std::vector<int32_t> out;
  EXPECT_TRUE(model.forward(prompt, cache, logits.data()).ok());
  for (int i = 0; i < n; ++i) {
    int32_t best = 0;
    for (int32_t v = 1; v < m.config.n_vocab; ++v)
      if (logits[static_cast<size_t>(v)] > logits[static_cast<size_t>(best)]) best = v;
    out.push_back(best);
    if (i + 1 < n) {
      const int32_t one[1] = {best};
      EXPECT_TRUE(model.forward(one, cache, logits.data()).ok());
    }
  }
  return out;
}

// Max |a - b| over max |b|: the relative error of a whole logits row.
inline double relative_error(const float* a, const float* b, int64_t n) {
  double max_diff = 0, max_ref = 1e-30;
  for (int64_t i = 0; i < n; ++i) {
    max_diff = std::max(max_diff, static_cast<double>(std::abs(a[i] - b[i])));
    max_ref = std::max(max_ref, static_cast<double>(std::abs(b[i])));
  }
  return max_diff / max_ref;
}

// Runs every request to the end on `e` (each_step after each step); the tokens of each, in
// the order given.
inline std::vector<std::vector<int32_t>> run_all(Engine& e, const std::vector<GenerateRequest>& reqs,
                                                 const std::function<void()>& each_step = {}) {
  std::vector<std::vector<int32_t>> out(reqs.size());
  std::unordered_map<uint64_t, size_t> index;
  for (size_t i = 0; i < reqs.size(); ++i) {
    auto id = e.add_request(reqs[i]);
    EXPECT_TRUE(id.ok()) << id.status().message();
    if (id.ok()) index[id->value] = i;
  }
  std::vector<RequestDelta> deltas;
  while (e.has_unfinished()) {
    EXPECT_TRUE(e.step(&deltas).ok());
    if (each_step) each_step();
    for (const RequestDelta& d : deltas)
      out[index.at(d.id.value)].insert(out[index.at(d.id.value)].end(), d.token_ids.begin(),
                                       d.token_ids.end());
  }
  return out;
}

// A request of `prompt` for max_new tokens, EOS ignored: greedy, or sampled at `temperature`
// from `seed` (the rest of the sampling chain off).
inline GenerateRequest request(std::vector<int32_t> prompt, int32_t max_new,
                               float temperature = 0, uint64_t seed = 0) {
  GenerateRequest r;
  r.prompt_token_ids = std::move(prompt);
  r.max_new_tokens = max_new;
  r.sampling.temperature = temperature;
  r.sampling.seed = seed;
  r.sampling.ignore_eos = true;
  return r;
}

// Every sample's tokens and sampled-token logprobs, keyed by (request index, sample index), and
// the engine's stats at the end: what the speculative-decoding tests compare.
struct SampleStreams {
  using Key = std::pair<uint64_t, int32_t>;
  std::map<Key, std::vector<int32_t>> tokens;
  std::map<Key, std::vector<float>> logprobs;
  EngineStats stats;
};
inline SampleStreams run_streams(const LoadedModel& m, const EngineConfig& c,
                                 std::vector<GenerateRequest> reqs,
                                 const Tokenizer* tok = nullptr) {
  SampleStreams out;
  auto e = Engine::create(m, tok, c);
  EXPECT_TRUE(e.ok()) << e.status().message();
  if (!e.ok()) return out;
  std::vector<RequestId> ids;
  for (auto& r : reqs) {
    auto id = (*e)->add_request(std::move(r));
    EXPECT_TRUE(id.ok()) << id.status().message();
    if (id.ok()) ids.push_back(*id);
  }
  if (ids.empty()) return out;
  std::vector<RequestDelta> deltas;
  for (int guard = 0; (*e)->has_unfinished() && guard < 100000; ++guard) {
    EXPECT_TRUE((*e)->step(&deltas).ok());
    for (const RequestDelta& d : deltas) {
      const SampleStreams::Key key{d.id.value - ids.front().value, d.index};
      auto& t = out.tokens[key];
      t.insert(t.end(), d.token_ids.begin(), d.token_ids.end());
      for (const PositionLogprobs& lp : d.logprobs) out.logprobs[key].push_back(lp.sampled.logprob);
    }
  }
  out.stats = (*e)->stats();
  return out;
}

// Per position, how often each token was drawn, over every sample's first `positions` tokens.
using TokenCounts = std::vector<std::map<int32_t, int>>;
inline TokenCounts token_counts(const SampleStreams& s, int positions) {
  TokenCounts counts(static_cast<size_t>(positions));
  for (const auto& [key, t] : s.tokens)
    for (size_t j = 0; j < t.size() && j < counts.size(); ++j) ++counts[j][t[j]];
  return counts;
}

// Two runs' counts agree within 4 sd at every position after the first, for every token drawn
// at least 20 times in both together. Returns how many (position, token) pairs were compared.
inline int expect_same_token_distribution(const TokenCounts& plain, const TokenCounts& spec) {
  int compared = 0;
  for (size_t j = 1; j < plain.size() && j < spec.size(); ++j) {
    std::map<int32_t, int> all = plain[j];
    for (const auto& [t, c] : spec[j]) all[t] += 0;
    for (const auto& [t, c] : all) {
      const int a = c;
      const auto it = spec[j].find(t);
      const int b = it == spec[j].end() ? 0 : it->second;
      if (a + b < 20) continue;
      ++compared;
      EXPECT_LE(std::abs(a - b), 4.0 * std::sqrt(static_cast<double>(a + b)))
          << "position " << j << " token " << t << ": " << a << " without drafts, " << b << " with";
    }
  }
  return compared;
}

// A `hinge synth` preset written with f32 weights (seed 11) to the temp folder as
// PRESET.TAG.gguf, then loaded.
inline std::unique_ptr<LoadedModel> synth_model(const std::string& preset,
                                                const std::string& tag) {
  const std::string path = temp_dir() + "/" + preset + "." + tag + ".gguf";
  ThreadPool pool(2);
  const SynthPreset* p = find_synth_preset(preset);
  EXPECT_NE(p, nullptr);
  if (!p) return nullptr;
  EXPECT_TRUE(write_synth_model(*p, GgmlType::F32, 11, path, pool).ok());
  return load_or_die(path);
}

}  // namespace hinge::testing
