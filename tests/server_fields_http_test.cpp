// hinge serve's less common OpenAI fields end to end on stories260K over a loopback port:
// logit_bias under greedy decoding, echo (text, token and streaming prompts; prompt logprobs
// against the engine's own decode logprobs; max_tokens 0 scoring), best_of against the same
// seed's n samples, and the 400s of unsupported fields.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "server/engine_thread.h"
#include "http_test_client.h"
#include "model_test_util.h"
#include "server/api_server.h"
#include "http/server.h"
#include "tokenizer/tokenizer.h"

namespace hinge {
namespace {

using Json = nlohmann::json;
using testing::http_call;

constexpr const char* kPrompt = "Once upon a time";

struct Server {
  std::unique_ptr<LoadedModel> model;
  std::unique_ptr<Tokenizer> tok;
  std::unique_ptr<EngineThread> engine;
  std::unique_ptr<server::ApiServer> api;
  std::unique_ptr<http::Server> http;
  uint16_t port = 0;

  Server() {
    model = testing::load_or_die(testing::shared_path("models/stories260K.gguf"));
    HINGE_CHECK(model != nullptr);
    tok = std::move(Tokenizer::create(model->vocab)).value();
    EngineConfig c;
    c.threads = 1;
    c.kv_memory_bytes = 8 << 20;
    c.max_model_len = 512;
    c.max_batched_tokens = 8;  // prompts are chunked: prompt logprobs span several steps
    // f32 KV: a prompt position's logits are then those of the decode step at that position
    // (with f16 KV, chunked prefill and decode round differently: ~1e-3 apart).
    c.k_dtype = c.v_dtype = KvDtype::kF32;
    c.detokenize = false;
    engine = std::make_unique<EngineThread>(std::move(Engine::create(*model, tok.get(), c)).value(),
                                            sched::AdmissionConfig{});
    server::ApiServerConfig sc;
    sc.model_name = "stories";
    sc.n_vocab = static_cast<int32_t>(model->config.n_vocab);
    api = std::move(server::ApiServer::create(sc, *tok, "", *engine)).value();
    http::ServerConfig hc;
    hc.port = 0;
    http = std::move(http::Server::start(hc, [this](http::HttpRequest r,
                                                          server::ExchangePtr ex) {
             api->handle(std::move(r), std::move(ex));
           })).value();
    port = http->port();
  }
  ~Server() {
    engine->stop();
    http->stop();
  }
  // POST /v1/completions (or chat), expecting 200; the parsed body.
  Json post(const Json& body, const char* route = "/v1/completions") const {
    auto r = http_call(port, "POST", route, body.dump());
    EXPECT_TRUE(r.has_value());
    if (!r) return {};
    EXPECT_EQ(r->status, 200) << body.dump() << " -> " << r->body;
    return r->status == 200 ? Json::parse(r->body) : Json{};
  }
  // Expects a 400 whose error names `param`.
  void expect_400(const Json& body, const std::string& param,
                  const char* route = "/v1/completions") const {
    auto r = http_call(port, "POST", route, body.dump());
    ASSERT_TRUE(r.has_value());
    EXPECT_EQ(r->status, 400) << body.dump() << " -> " << r->body;
    const Json j = Json::parse(r->body, nullptr, false);
    ASSERT_TRUE(j.is_object() && j.contains("error")) << r->body;
    EXPECT_EQ(j["error"]["param"], param) << r->body;
  }
  // The text of `ids` as the server prints it after `context` (-1: start of text).
  std::string text_of(const std::vector<int32_t>& ids, int32_t context) const {
    StreamingDetokenizer d(*tok);
    d.push_context(context);
    std::string s;
    for (int32_t id : ids) s += d.push(id);
    return s + d.flush();
  }
  std::vector<int32_t> prompt_ids() const { return tok->encode(kPrompt, true, false); }
};

TEST(ServerFieldsHttp, LogitBiasForcesAndBansTokensUnderGreedy) {
  Server s;
  const std::vector<int32_t> prompt = s.prompt_ids();
  const std::vector<int32_t> greedy = testing::greedy(*s.model, prompt, 8);
  const Json base = {{"prompt", kPrompt}, {"max_tokens", 8}, {"temperature", 0},
                     {"ignore_eos", true}, {"logprobs", 2}};
  const Json plain = s.post(base);
  ASSERT_EQ(plain["choices"][0]["text"], s.text_of(greedy, prompt.back()));
  // +100 on one token: every output token is that token (chat and completions).
  const int32_t forced = 400;
  ASSERT_NE(greedy[0], forced);
  Json force = base;
  force["logit_bias"] = {{std::to_string(forced), 100}};
  const Json f = s.post(force);
  EXPECT_EQ(f["choices"][0]["text"], s.text_of(std::vector<int32_t>(8, forced), prompt.back()));
  for (const auto& t : f["choices"][0]["logprobs"]["tokens"]) EXPECT_EQ(t, s.tok->token_to_piece(forced));
  const Json chat = s.post({{"messages", {{{"role", "user"}, {"content", kPrompt}}}},
                            {"max_tokens", 4}, {"temperature", 0}, {"ignore_eos", true},
                            {"logit_bias", {{std::to_string(forced), 100}}}},
                           "/v1/chat/completions");
  EXPECT_EQ(chat["choices"][0]["message"]["content"],
            s.text_of(std::vector<int32_t>(4, forced), prompt.back()));
  // -100 on the greedy token: the first token becomes the runner-up of the unbiased logits
  // (logprobs stay the model's raw ones, so the runner-up is the second of top_logprobs).
  Json ban = base;
  ban["logit_bias"] = {{std::to_string(greedy[0]), -100}};
  const Json b = s.post(ban);
  const auto& top0 = plain["choices"][0]["logprobs"]["top_logprobs"][0];
  ASSERT_EQ(top0.size(), 2u);
  std::string runner_up;
  double best = 0;
  for (const auto& [tok, lp] : top0.items())
    if (tok != s.tok->token_to_piece(greedy[0]) && (runner_up.empty() || lp.get<double>() > best)) {
      runner_up = tok;
      best = lp.get<double>();
    }
  const auto& btokens = b["choices"][0]["logprobs"]["tokens"];
  ASSERT_EQ(btokens.size(), 8u);
  EXPECT_NE(btokens[0], s.tok->token_to_piece(greedy[0]));
  EXPECT_EQ(btokens[0], runner_up);
  EXPECT_NE(b["choices"][0]["text"], plain["choices"][0]["text"]);
  // Ids outside the vocabulary: a 400 naming the entry.
  Json oov = base;
  oov["logit_bias"] = {{"512", 1}};
  s.expect_400(oov, "logit_bias.512");
  Json bad = base;
  bad["logit_bias"] = {{"3", 150}};
  s.expect_400(bad, "logit_bias.3");
}

TEST(ServerFieldsHttp, EchoReturnsThePromptThenTheCompletion) {
  Server s;
  const std::vector<int32_t> prompt = s.prompt_ids();
  const Json base = {{"prompt", kPrompt}, {"max_tokens", 8}, {"temperature", 0}, {"ignore_eos", true}};
  const std::string completion = s.post(base)["choices"][0]["text"];
  ASSERT_FALSE(completion.empty());
  Json echo = base;
  echo["echo"] = true;
  const Json e = s.post(echo);
  EXPECT_EQ(e["choices"][0]["text"], std::string(kPrompt) + completion);
  EXPECT_EQ(e["usage"]["completion_tokens"], 8);
  // A token-id prompt echoes its detokenized text (no leading space after BOS).
  Json by_ids = echo;
  by_ids["prompt"] = prompt;
  EXPECT_EQ(s.post(by_ids)["choices"][0]["text"], std::string(kPrompt) + completion);
  // Streaming: the prompt text comes in the first chunk.
  Json stream = echo;
  stream["stream"] = true;
  stream["logprobs"] = 1;
  auto r = http_call(s.port, "POST", "/v1/completions", stream.dump());
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200);
  std::string joined;
  bool first = true;
  for (size_t at = r->body.find("data: {"); at != std::string::npos;
       at = r->body.find("data: {", at + 1)) {
    const Json chunk = Json::parse(r->body.substr(at + 6, r->body.find('\n', at) - at - 6));
    const std::string text = chunk["choices"][0]["text"];
    if (first) {  // with the prompt tokens' logprobs, the first one null
      EXPECT_EQ(text.rfind(kPrompt, 0), 0u) << text;
      const auto& lp = chunk["choices"][0]["logprobs"];
      ASSERT_GE(lp["tokens"].size(), prompt.size()) << chunk.dump();
      EXPECT_TRUE(lp["token_logprobs"][0].is_null());
      for (size_t i = 1; i < prompt.size(); ++i) EXPECT_LE(lp["token_logprobs"][i].get<double>(), 0.0);
      first = false;
    }
    joined += text;
  }
  EXPECT_EQ(joined, std::string(kPrompt) + completion);
  // max_tokens 0 with echo scores the prompt: its text only, no completion tokens.
  Json score = echo;
  score["max_tokens"] = 0;
  const Json sc = s.post(score);
  EXPECT_EQ(sc["choices"][0]["text"], kPrompt);
  EXPECT_EQ(sc["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(sc["usage"]["completion_tokens"], 0);
  EXPECT_EQ(sc["usage"]["prompt_tokens"], static_cast<int>(prompt.size()));
  Json no_echo = base;
  no_echo["max_tokens"] = 0;
  s.expect_400(no_echo, "max_tokens");
}

TEST(ServerFieldsHttp, EchoLogprobsMatchTheEnginesDecodeLogprobs) {
  Server s;
  // The greedy continuation and its logprobs as the engine reports them while decoding.
  const std::vector<int32_t> p0 = s.prompt_ids();
  const std::vector<int32_t> greedy = testing::greedy(*s.model, p0, 12);
  const Json gen = s.post({{"prompt", p0}, {"max_tokens", 12}, {"temperature", 0},
                           {"ignore_eos", true}, {"logprobs", 3}});
  const Json& glp = gen["choices"][0]["logprobs"];
  ASSERT_EQ(glp["token_logprobs"].size(), 12u);
  // Echo the prompt + that continuation, scoring only: each continuation token's prompt logprob
  // (and its top 3) is what the decode step reported for it at that position.
  std::vector<int32_t> prompt = p0;
  prompt.insert(prompt.end(), greedy.begin(), greedy.end());
  const Json score = {{"prompt", prompt}, {"max_tokens", 0}, {"echo", true}, {"logprobs", 3}};
  for (int round = 0; round < 2; ++round) {  // round 1: the prompt's blocks are in the cache
    const Json e = s.post(score);
    const auto& c = e["choices"][0];
    const auto& lp = c["logprobs"];
    ASSERT_EQ(lp["tokens"].size(), prompt.size()) << e.dump();
    EXPECT_TRUE(lp["token_logprobs"][0].is_null());
    EXPECT_TRUE(lp["top_logprobs"][0].is_null());
    std::string pieces;
    for (size_t i = 0; i < prompt.size(); ++i) {
      EXPECT_EQ(lp["text_offset"][i], static_cast<int>(pieces.size()));
      pieces += lp["tokens"][i].get<std::string>();
      if (i == 0) continue;
      const double v = lp["token_logprobs"][i];
      EXPECT_TRUE(std::isfinite(v));
      EXPECT_LE(v, 0.0);
      EXPECT_GE(lp["top_logprobs"][i].size(), 3u);
    }
    EXPECT_EQ(pieces, c["text"]);
    EXPECT_EQ(c["text"], s.text_of(prompt, -1));
    for (size_t j = 0; j < greedy.size(); ++j) {
      const size_t at = p0.size() + j;
      EXPECT_NEAR(lp["token_logprobs"][at].get<double>(), glp["token_logprobs"][j].get<double>(), 1e-4)
          << "position " << at;
      ASSERT_EQ(lp["top_logprobs"][at].size(), glp["top_logprobs"][j].size());
      for (const auto& [tok, v] : glp["top_logprobs"][j].items()) {
        ASSERT_TRUE(lp["top_logprobs"][at].contains(tok)) << tok;
        EXPECT_NEAR(lp["top_logprobs"][at][tok].get<double>(), v.get<double>(), 1e-4);
      }
    }
    EXPECT_EQ(e["usage"]["prompt_tokens_details"]["cached_tokens"], 0);  // every position computed
  }
  // With a completion: the offsets go on after the prompt's text.
  const Json more = s.post({{"prompt", kPrompt}, {"max_tokens", 3}, {"temperature", 0},
                            {"ignore_eos", true}, {"echo", true}, {"logprobs", 1}});
  const auto& mlp = more["choices"][0]["logprobs"];
  ASSERT_EQ(mlp["tokens"].size(), p0.size() + 3);
  EXPECT_EQ(mlp["text_offset"][p0.size()], static_cast<int>(std::string(kPrompt).size()));
  EXPECT_NEAR(mlp["token_logprobs"][p0.size()].get<double>(), glp["token_logprobs"][0].get<double>(), 1e-4);
}

double sum_logprobs(const Json& choice) {
  double s = 0;
  for (const auto& v : choice["logprobs"]["token_logprobs"]) s += v.get<double>();
  return s;
}

TEST(ServerFieldsHttp, BestOfReturnsTheMostLikelyOfTheSameSeedsSamples) {
  Server s;
  const Json base = {{"prompt", kPrompt}, {"max_tokens", 8}, {"temperature", 1}, {"seed", 42},
                     {"ignore_eos", true}};
  // The four samples of seed 42, with their logprobs.
  Json all = base;
  all["n"] = 4;
  all["logprobs"] = 0;
  const Json a = s.post(all);
  ASSERT_EQ(a["choices"].size(), 4u);
  std::vector<double> sums;
  for (const auto& c : a["choices"]) sums.push_back(sum_logprobs(c));
  const size_t best = std::max_element(sums.begin(), sums.end()) - sums.begin();
  // best_of 4, n 1: the sample with the highest sum; usage counts all four.
  Json b1 = base;
  b1["best_of"] = 4;
  const Json r1 = s.post(b1);
  ASSERT_EQ(r1["choices"].size(), 1u);
  EXPECT_EQ(r1["choices"][0]["text"], a["choices"][best]["text"]);
  EXPECT_EQ(r1["choices"][0]["index"], 0);
  EXPECT_TRUE(r1["choices"][0]["logprobs"].is_null());  // not asked for
  EXPECT_EQ(r1["usage"]["completion_tokens"], 32);
  // best_of 4, n 2 with logprobs: the top two, best first.
  Json b2 = b1;
  b2["n"] = 2;
  b2["logprobs"] = 1;
  const Json r2 = s.post(b2);
  ASSERT_EQ(r2["choices"].size(), 2u);
  std::vector<double> sorted = sums;
  std::sort(sorted.rbegin(), sorted.rend());
  EXPECT_NEAR(sum_logprobs(r2["choices"][0]), sorted[0], 1e-5);
  EXPECT_NEAR(sum_logprobs(r2["choices"][1]), sorted[1], 1e-5);
  EXPECT_EQ(r2["choices"][1]["index"], 1);
  // Not with stream, and never fewer samples than choices.
  Json st = b1;
  st["stream"] = true;
  s.expect_400(st, "best_of");
  Json few = base;
  few["n"] = 3;
  few["best_of"] = 2;
  s.expect_400(few, "best_of");
}

TEST(ServerFieldsHttp, UnsupportedFieldsAre400sNamingTheField) {
  Server s;
  s.expect_400({{"prompt", kPrompt}, {"suffix", " the end."}}, "suffix");
  const Json msgs = {{{"role", "user"}, {"content", "hi"}}};
  s.expect_400({{"messages", msgs}, {"functions", {{{"name", "f"}}}}}, "functions",
               "/v1/chat/completions");
  s.expect_400({{"messages", msgs}, {"function_call", "auto"}}, "function_call",
               "/v1/chat/completions");
  s.expect_400({{"messages", msgs}, {"response_format", {{"type", "json_schema"}}}},
               "response_format.json_schema", "/v1/chat/completions");
  // Still serving.
  const Json ok = s.post({{"messages", msgs}, {"max_tokens", 2}, {"metadata", {{"k", "v"}}},
                          {"store", false}, {"service_tier", "auto"}},
                         "/v1/chat/completions");
  EXPECT_EQ(ok["choices"].size(), 1u);
}

}  // namespace
}  // namespace hinge
