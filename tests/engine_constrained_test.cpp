// Constrained decoding in the engine (engine/constrained.h): a JSON schema holds for every
// sample through preemption by recompute (a KV cache too small for the batch), parallel
// samples (n = 2) and prefix-cache hits (a shared prompt); each ends by itself ("stop") within
// max_tokens; the mask cache serves most steps.
#include <gtest/gtest.h>

#include <map>
#include <random>

#include <nlohmann/json.hpp>

#include "grammar/json_schema.h"
#include "hinge/engine.h"
#include "model_test_util.h"
#include "tokenizer/tokenizer.h"

namespace hinge {
namespace {

TEST(EngineConstrained, SchemaHoldsThroughPreemptionSamplesAndThePrefixCache) {
  auto m = testing::load_or_die(testing::shared_path("models/stories260K.gguf"));
  ASSERT_TRUE(m);
  auto tok = std::move(Tokenizer::create(m->vocab)).value();
  const auto schema = nlohmann::ordered_json::parse(R"({"type": "object", "properties": {
      "word": {"type": "string", "maxLength": 8}, "n": {"type": "integer"},
      "ok": {"type": "boolean"}}, "required": ["word", "n"], "additionalProperties": false})");
  auto g = grammar::Grammar::parse(grammar::json_schema_to_gbnf(schema).value());
  ASSERT_TRUE(g.ok()) << g.status().message();
  auto shared = std::make_shared<const grammar::Grammar>(std::move(g).value());

  EngineConfig c = testing::small_f32_engine_config(1, 64 << 20);
  c.max_num_seqs = 8;
  c.enable_prefix_cache = true;
  auto probe = Engine::create(*m, tok.get(), c);
  ASSERT_TRUE(probe.ok());
  c.kv_memory_bytes = 20 * (*probe)->stats().kv_bytes_per_block;  // too small for the batch
  auto made = Engine::create(*m, tok.get(), c);
  ASSERT_TRUE(made.ok()) << made.status().message();
  Engine& e = **made;
  const GenerateRequest base = testing::seeded_request(5, 40, 90);  // a shared 40-token prompt
  std::vector<RequestId> ids;
  for (int i = 0; i < 8; ++i) {
    GenerateRequest r = base;
    r.prompt_token_ids.push_back(3 + i);  // its own last token
    r.sampling.temperature = 1.0f;
    r.sampling.top_k = 0;
    r.sampling.top_p = 1.0f;
    r.sampling.min_p = 0.0f;
    r.sampling.seed = 100 + static_cast<uint64_t>(i);
    r.sampling.ignore_eos = true;  // a constrained sample still ends where its grammar does
    r.sampling.grammar = shared;
    r.n = i < 2 ? 2 : 1;
    auto id = e.add_request(r);
    ASSERT_TRUE(id.ok()) << id.status().message();
    ids.push_back(*id);
  }
  std::map<std::pair<uint64_t, int32_t>, std::vector<int32_t>> out;
  std::map<std::pair<uint64_t, int32_t>, FinishReason> why;
  std::vector<RequestDelta> deltas;
  for (int guard = 0; e.has_unfinished() && guard < 100000; ++guard) {
    ASSERT_TRUE(e.step(&deltas).ok());
    for (const RequestDelta& d : deltas) {
      auto& t = out[{d.id.value, d.index}];
      t.insert(t.end(), d.token_ids.begin(), d.token_ids.end());
      if (d.finished()) why[{d.id.value, d.index}] = d.finish_reason;
    }
  }
  ASSERT_EQ(out.size(), 10u);  // 8 requests, two of them with 2 samples
  for (const auto& [key, tokens] : out) {
    std::string text;
    int32_t prev = base.prompt_token_ids.back();
    for (int32_t t : tokens) {
      text += tok->piece_after(prev, t);
      prev = t;
    }
    const auto j = nlohmann::json::parse(text, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << text;
    EXPECT_TRUE(j.is_object() && j["word"].is_string() && j["n"].is_number_integer()) << text;
    EXPECT_EQ(why[key], FinishReason::kStop) << text;
  }
  const EngineStats s = e.stats();
  EXPECT_GT(s.preemptions, 0) << "the test needs preemption";
  EXPECT_GT(s.kv.num_prefix_hit_tokens, 0) << "the test needs prefix hits";
  EXPECT_GT(s.masks, 0);
  EXPECT_GT(s.mask_cache_hits, s.masks / 2);
  // A grammar needs the engine's tokenizer.
  auto bare = Engine::create(*m, nullptr, testing::small_f32_engine_config());
  ASSERT_TRUE(bare.ok());
  GenerateRequest r = base;
  r.sampling.grammar = shared;
  EXPECT_FALSE((*bare)->add_request(r).ok());
}

}  // namespace
}  // namespace hinge
