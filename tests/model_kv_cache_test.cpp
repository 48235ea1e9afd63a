// Acceptance 2 and 3: incremental decoding with the KV cache equals a full recompute at every
// position; grouped-query attention equals the same model with K/V heads expanded to full
// multi-head attention; the Hugging Face checkpoint equals the GGUF converted from it.
#include <gtest/gtest.h>

#include <cstring>

#include "model/gguf_export.h"
#include "model_test_util.h"

namespace hinge {
namespace {

using testing::load_or_die;
using testing::relative_error;
using testing::shared_path;

constexpr double kTolerance = 1e-4;

// A fixed 200-token sequence: the model's own greedy continuation (a realistic sequence).
std::vector<int32_t> sequence_200(const LoadedModel& m, int32_t bos) {
  std::vector<int32_t> seq = {bos};
  auto more = testing::greedy(m, seq, 199);
  seq.insert(seq.end(), more.begin(), more.end());
  return seq;
}

// Logits of every position, computed incrementally (one token at a time through the cache).
std::vector<float> incremental_logits(const LoadedModel& m, const std::vector<int32_t>& seq) {
  ThreadPool pool(2);
  Transformer model(m.config, m.weights, pool, 8);
  KvCache cache(m.config, static_cast<int64_t>(seq.size()));
  const size_t V = static_cast<size_t>(m.config.n_vocab);
  std::vector<float> all(seq.size() * V);
  for (size_t i = 0; i < seq.size(); ++i) {
    const int32_t one[1] = {seq[i]};
    EXPECT_TRUE(model.forward(one, cache, &all[i * V]).ok());
  }
  return all;
}

void expect_cache_equals_recompute(const LoadedModel& m, int32_t bos) {
  const auto seq = sequence_200(m, bos);
  ASSERT_EQ(seq.size(), 200u);
  const auto inc = incremental_logits(m, seq);
  const size_t V = static_cast<size_t>(m.config.n_vocab);
  ThreadPool pool(2);
  Transformer model(m.config, m.weights, pool, 64);
  std::vector<float> full(V);
  double worst = 0;
  for (size_t i = 0; i < seq.size(); ++i) {
    // No cache reuse: a fresh cache and the whole prefix 0..i in one pass.
    KvCache fresh(m.config, static_cast<int64_t>(i + 1));
    ASSERT_TRUE(model.forward(std::span(seq.data(), i + 1), fresh, full.data()).ok());
    const double err = relative_error(&inc[i * V], full.data(), static_cast<int64_t>(V));
    worst = std::max(worst, err);
    ASSERT_LE(err, kTolerance) << "position " << i;
  }
  ::testing::Test::RecordProperty("worst_relative_error", std::to_string(worst));
}

TEST(ModelKvCache, Stories260kIncrementalEqualsRecompute) {
  auto m = load_or_die(shared_path("models/stories260K.gguf"));
  ASSERT_TRUE(m);
  expect_cache_equals_recompute(*m, 1);
}

TEST(ModelKvCache, TinyStories656kIncrementalEqualsRecompute) {
  auto m = load_or_die(shared_path("models/tinystories-656k"));
  ASSERT_TRUE(m);
  expect_cache_equals_recompute(*m, 1);
}

// all_logits mode gives the same rows as the per-position computation.
TEST(ModelKvCache, AllLogitsMatchesIncremental) {
  auto m = load_or_die(shared_path("models/stories260K.gguf"));
  ASSERT_TRUE(m);
  const auto seq = sequence_200(*m, 1);
  const auto inc = incremental_logits(*m, seq);
  ThreadPool pool(2);
  Transformer model(m->config, m->weights, pool, 32);
  KvCache cache(m->config, 200);
  std::vector<float> all(inc.size());
  ASSERT_TRUE(model.forward(seq, cache, all.data(), /*all_logits=*/true).ok());
  const int64_t V = m->config.n_vocab;
  for (size_t i = 0; i < seq.size(); ++i)
    ASSERT_LE(relative_error(&all[i * V], &inc[i * V], V), kTolerance) << "position " << i;
}

// GQA check: expanding each KV head into the query heads that share it (n_kv_heads = n_heads,
// K/V weight rows repeated) is plain multi-head attention and must give the same logits.
TEST(ModelKvCache, GroupedQueryAttentionEqualsExpandedHeads) {
  for (const std::string& path : {shared_path("models/stories260K.gguf"),
                                 shared_path("models/tinystories-656k")}) {
    auto m = load_or_die(path);
    ASSERT_TRUE(m);
    const ModelConfig& c = m->config;
    ASSERT_LT(c.n_kv_heads, c.n_heads) << "test model must use GQA";
    const int64_t group = c.n_heads / c.n_kv_heads;
    ModelConfig mha = c;
    mha.n_kv_heads = c.n_heads;
    ModelWeights w = m->weights;
    std::vector<std::vector<uint8_t>> storage;
    auto expand = [&](const kernels::MatrixView& src) {
      kernels::MatrixView dst = src;
      dst.rows = src.rows * group;
      auto& buf = storage.emplace_back(dst.row_bytes * static_cast<size_t>(dst.rows));
      for (int64_t h = 0; h < c.n_heads; ++h)  // query head h reads kv head h / group
        std::memcpy(buf.data() + h * c.head_dim * src.row_bytes,
                    static_cast<const uint8_t*>(src.data) + (h / group) * c.head_dim * src.row_bytes,
                    c.head_dim * src.row_bytes);
      dst.data = buf.data();
      return dst;
    };
    storage.reserve(2 * w.layers.size());
    for (auto& l : w.layers) {
      l.wk = expand(l.wk);
      l.wv = expand(l.wv);
    }
    LoadedModel expanded;
    expanded.config = mha;
    expanded.weights = w;
    const auto seq = sequence_200(*m, 1);
    const auto a = incremental_logits(*m, std::vector<int32_t>(seq.begin(), seq.begin() + 64));
    const auto b = incremental_logits(expanded, std::vector<int32_t>(seq.begin(), seq.begin() + 64));
    const int64_t V = c.n_vocab;
    for (size_t i = 0; i < 64; ++i)
      ASSERT_LE(relative_error(&a[i * V], &b[i * V], V), kTolerance) << path << " position " << i;
  }
}

// Acceptance 3: the HF directory (rotate-half RoPE, safetensors, tokenizer.json) and the GGUF
// that hinge writes from it (Q/K permuted for interleaved RoPE) give the same logits.
TEST(ModelHf, TinyStories656kEqualsConvertedGguf) {
  auto hf = load_or_die(shared_path("models/tinystories-656k"));
  ASSERT_TRUE(hf);
  EXPECT_EQ(hf->config.rope.style, kernels::RopeStyle::kNeox);
  EXPECT_TRUE(hf->config.tied_output);
  const std::string out = testing::temp_dir() + "/tinystories-656k.gguf";
  ASSERT_TRUE(export_gguf(*hf, out).ok());
  auto gg = load_or_die(out);
  ASSERT_TRUE(gg);
  EXPECT_EQ(gg->config.rope.style, kernels::RopeStyle::kInterleaved);
  EXPECT_EQ(gg->vocab.tokens, hf->vocab.tokens);
  const auto seq = sequence_200(*hf, 1);
  const auto a = incremental_logits(*hf, seq);
  const auto b = incremental_logits(*gg, seq);
  const int64_t V = hf->config.n_vocab;
  for (size_t i = 0; i < seq.size(); ++i)
    ASSERT_LE(relative_error(&b[i * V], &a[i * V], V), kTolerance) << "position " << i;
}

}  // namespace
}  // namespace hinge
