// hinge serve's HTTP layer end to end on a loopback port: every bad-input case gets its 4xx
// with OpenAI's error JSON and the server keeps serving; keep-alive; streaming; a client that
// disconnects mid-stream frees its KV blocks; admission answers 429 / 503 with Retry-After;
// /metrics names and counters; draining.
#include <gtest/gtest.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <thread>

#include "server/engine_thread.h"
#include "http_test_client.h"
#include "model_test_util.h"
#include "server/api_server.h"
#include "http/server.h"

namespace hinge {
namespace {

using testing::HttpConn;
using testing::http_call;
using testing::load_or_die;
using testing::shared_path;

struct Server {
  std::unique_ptr<LoadedModel> model;
  std::unique_ptr<Tokenizer> tok;
  std::unique_ptr<EngineThread> engine;
  Engine* raw_engine = nullptr;  // owned by `engine`; for fail_next_steps_for_testing only
  std::unique_ptr<server::ApiServer> api;
  std::unique_ptr<http::Server> http;
  uint16_t port = 0;

  explicit Server(sched::AdmissionConfig ac = {}, int64_t kv_bytes = 8 << 20, size_t max_body = 1 << 20,
                  const std::string& chat_template = "") {
    model = load_or_die(shared_path("models/stories260K.gguf"));
    HINGE_CHECK(model != nullptr);
    tok = std::move(Tokenizer::create(model->vocab)).value();
    EngineConfig c;
    c.threads = 1;
    c.kv_memory_bytes = kv_bytes;
    c.max_model_len = 512;
    c.detokenize = false;
    auto e = std::move(Engine::create(*model, tok.get(), c)).value();
    raw_engine = e.get();
    engine = std::make_unique<EngineThread>(std::move(e), ac);
    server::ApiServerConfig sc;
    sc.model_name = "stories";
    sc.n_vocab = static_cast<int32_t>(model->config.n_vocab);
    sc.history_interval_s = 0.2;
    api = std::move(server::ApiServer::create(sc, *tok, chat_template, *engine)).value();
    http::ServerConfig hc;
    hc.port = 0;
    hc.max_body_bytes = max_body;
    http = std::move(http::Server::start(hc, [this](http::HttpRequest r, http::ExchangePtr ex) {
             api->handle(std::move(r), std::move(ex));
           })).value();
    port = http->port();
  }
  ~Server() {
    engine->stop();
    http->stop();
  }
  bool wait_idle(double seconds = 10) { return engine->wait_idle(seconds); }
};

// The body is OpenAI's error object.
void expect_error(const std::optional<testing::HttpReply>& r, int status, const std::string& what) {
  ASSERT_TRUE(r.has_value()) << what << ": no reply";
  EXPECT_EQ(r->status, status) << what << ": " << r->body;
  const auto j = nlohmann::json::parse(r->body, nullptr, false);
  ASSERT_TRUE(j.is_object() && j.contains("error")) << what << ": " << r->body;
  const auto& e = j["error"];
  EXPECT_TRUE(e.contains("message") && e["message"].is_string() && !e["message"].get<std::string>().empty()) << what;
  EXPECT_TRUE(e.contains("type") && e["type"].is_string()) << what;
  EXPECT_TRUE(e.contains("param")) << what;
  EXPECT_TRUE(e.contains("code")) << what;
}

TEST(ServerHttp, BadInputGetsOpenAiErrorsAndTheServerKeepsServing) {
  Server s;
  const uint16_t p = s.port;
  const char* chat = "/v1/chat/completions";
  const char* cmpl = "/v1/completions";
  expect_error(http_call(p, "POST", chat, "{\"messages\": [}"), 400, "malformed JSON");
  expect_error(http_call(p, "POST", chat, "[1, 2]"), 400, "not an object");
  expect_error(http_call(p, "POST", chat, R"({"messages": "hi"})"), 400, "wrong type");
  expect_error(http_call(p, "POST", chat, R"({"messages": []})"), 400, "empty messages");
  expect_error(http_call(p, "POST", chat, R"({"messages": [{"role": "user", "content": "x"}], "max_tokens": -5})"), 400, "negative");
  expect_error(http_call(p, "POST", chat, R"({"messages": [{"role": "user", "content": "x"}], "max_tokens": 1e300})"), 400, "huge");
  expect_error(http_call(p, "POST", chat, R"({"messages": [{"role": "user", "content": "x"}], "temperature": "hot"})"), 400, "temperature type");
  expect_error(http_call(p, "POST", chat, R"({"messages": [{"role": "user", "content": "x"}], "top_p": 7})"), 400, "top_p range");
  expect_error(http_call(p, "POST", chat, R"({"messages": [{"role": "user", "content": "x"}], "model": "gpt-9"})"), 404, "unknown model");
  expect_error(http_call(p, "POST", chat, "{\"messages\": [{\"role\": \"user\", \"content\": \"\xff\xfe\"}]}"), 400, "invalid UTF-8");
  expect_error(http_call(p, "POST", cmpl, R"({"prompt": [1, 2, 99999]})"), 400, "token id out of range");
  expect_error(http_call(p, "POST", cmpl, R"({"prompt": [1, -2]})"), 400, "negative token id");
  expect_error(http_call(p, "POST", cmpl, R"({"prompt": "Once", "max_tokens": 100000})"), 400, "over the context");
  expect_error(http_call(p, "POST", cmpl, R"({"prompt": "Once", "n": 1000})"), 400, "n too large");
  expect_error(http_call(p, "POST", cmpl, R"({"prompt": "Once", "logprobs": 50})"), 400, "top logprobs too large");
  expect_error(http_call(p, "POST", cmpl, std::string(2 << 20, ' ')), 413, "oversized body");
  expect_error(http_call(p, "GET", cmpl), 405, "wrong method");
  {
    auto r = http_call(p, "DELETE", "/v1/models");
    expect_error(r, 405, "wrong method on models");
    EXPECT_EQ(r->header("allow"), "GET, HEAD, OPTIONS");
  }
  expect_error(http_call(p, "GET", "/v2/nothing"), 404, "unknown route");
  expect_error(http_call(p, "POST", "/tokenize", R"({"content": 5})"), 400, "tokenize type");
  expect_error(http_call(p, "POST", "/detokenize", R"({"tokens": [1, 100000]})"), 400, "detokenize range");
  {
    HttpConn c(p);
    ASSERT_TRUE(c.send_raw("THIS IS NOT HTTP\r\n\r\n"));
    expect_error(c.read_reply(), 400, "garbage request line");
  }
  // Still serving, and nothing leaked into the engine.
  auto h = http_call(p, "GET", "/health");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->status, 200);
  auto ok = http_call(p, "POST", cmpl, R"({"prompt": "Once upon a time", "max_tokens": 8, "temperature": 0})");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200) << ok->body;
  EXPECT_TRUE(s.wait_idle());
}

// The last "data: {...}" event of an SSE body, parsed.
nlohmann::json last_event(const std::string& body) {
  const size_t last = body.rfind("data: {");
  if (last == std::string::npos) return nullptr;
  return nlohmann::json::parse(body.substr(last + 6, body.find('\n', last) - last - 6), nullptr,
                               false);
}

// A failed engine step (issue 13): the request it was computing gets a 500 with OpenAI's error
// JSON, or, streaming, a final error event and [DONE]; the message holds no prompt text; the
// next request is served.
TEST(ServerHttp, FailedEngineStepIs500OrAFinalSseErrorAndTheNextRequestIsServed) {
  Server s;
  const uint16_t p = s.port;
  const char* cmpl = "/v1/completions";
  const std::string prompt = "Once upon a time";
  auto check_message = [&](const nlohmann::json& e) {
    ASSERT_TRUE(e.is_object());
    EXPECT_EQ(e["type"], "server_error");
    const std::string msg = e["message"];
    EXPECT_EQ(msg.find("Once"), std::string::npos) << msg;
  };
  s.raw_engine->fail_next_steps_for_testing(1);
  auto r = http_call(p, "POST", cmpl, R"({"prompt": "Once upon a time", "max_tokens": 8, "n": 2})");
  expect_error(r, 500, "failed step");
  check_message(nlohmann::json::parse(r->body)["error"]);
  EXPECT_TRUE(s.wait_idle());

  // Streaming, failing before the first token (chat) and in the middle (completions).
  s.raw_engine->fail_next_steps_for_testing(1);
  r = http_call(p, "POST", "/v1/chat/completions",
                R"({"messages": [{"role": "user", "content": "Once upon a time"}], "stream": true,
                    "stream_options": {"include_usage": true}})");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  ASSERT_GE(r->body.size(), 14u);
  EXPECT_EQ(r->body.substr(r->body.size() - 14), "data: [DONE]\n\n") << r->body;
  check_message(last_event(r->body)["error"]);
  EXPECT_EQ(r->body.find("\"finish_reason\":\"error\""), std::string::npos) << r->body;
  {
    HttpConn c(p);
    const nlohmann::json body = {{"prompt", prompt}, {"max_tokens", 480}, {"ignore_eos", true},
                                 {"stream", true}};
    ASSERT_TRUE(c.send("POST", cmpl, body.dump()));
    ASSERT_TRUE(c.read_until("\"text\""));  // tokens are flowing
    s.raw_engine->fail_next_steps_for_testing(1);
    auto sr = c.read_reply();
    ASSERT_TRUE(sr);
    EXPECT_EQ(sr->status, 200);
    ASSERT_GE(sr->body.size(), 14u);
    EXPECT_EQ(sr->body.substr(sr->body.size() - 14), "data: [DONE]\n\n");
    check_message(last_event(sr->body)["error"]);
  }
  EXPECT_TRUE(s.wait_idle());
  EXPECT_LT(s.engine->stats().engine.output_tokens, 480);

  auto ok = http_call(p, "POST", cmpl, R"({"prompt": "Once upon a time", "max_tokens": 8})");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200) << ok->body;
  auto m = http_call(p, "GET", "/metrics");
  ASSERT_TRUE(m);
  EXPECT_NE(m->body.find("finished_reason=\"error\"} 3"), std::string::npos) << m->body;
  EXPECT_TRUE(s.wait_idle());
}

TEST(ServerHttp, KeepAliveTokenizeModelsAndGreedyMatchesTheEngine) {
  Server s;
  HttpConn c(s.port);
  ASSERT_TRUE(c.send("POST", "/tokenize", R"({"content": "Once upon a time", "add_special": true})"));
  auto t = c.read_reply();
  ASSERT_TRUE(t);
  ASSERT_EQ(t->status, 200) << t->body;
  const auto ids = nlohmann::json::parse(t->body)["tokens"].get<std::vector<int32_t>>();
  EXPECT_EQ(ids, s.tok->encode("Once upon a time", true, true));
  // Same connection: models, then a greedy completion from token ids.
  ASSERT_TRUE(c.send("GET", "/v1/models"));
  auto m = c.read_reply();
  ASSERT_TRUE(m);
  EXPECT_EQ(nlohmann::json::parse(m->body)["data"][0]["id"], "stories");
  nlohmann::json body = {{"prompt", ids}, {"max_tokens", 24}, {"temperature", 0}, {"ignore_eos", true}};
  ASSERT_TRUE(c.send("POST", "/v1/completions", body.dump()));
  auto r = c.read_reply();
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const auto j = nlohmann::json::parse(r->body);
  const auto expect = testing::greedy(*s.model, ids, 24);
  StreamingDetokenizer detok(*s.tok);
  for (int32_t id : ids) detok.push_context(id);
  std::string text;
  for (int32_t id : expect) text += detok.push(id);
  text += detok.flush();
  EXPECT_EQ(j["choices"][0]["text"], text);
  EXPECT_EQ(j["usage"]["completion_tokens"], 24);
  EXPECT_EQ(j["usage"]["prompt_tokens"], static_cast<int>(ids.size()));
  // Detokenize of the prompt ids round-trips the text (with the SentencePiece leading space).
  ASSERT_TRUE(c.send("POST", "/detokenize", nlohmann::json({{"tokens", ids}}).dump()));
  auto d = c.read_reply();
  ASSERT_TRUE(d);
  EXPECT_EQ(nlohmann::json::parse(d->body)["content"], " Once upon a time");
}

TEST(ServerHttp, StreamingEndsWithDoneAndCachedTokensOnRepeat) {
  Server s;
  nlohmann::json body = {{"prompt", "Once upon a time there was a girl who liked to play in the park with her friends every day."},
                         {"max_tokens", 6}, {"temperature", 0}, {"stream", true},
                         {"stream_options", {{"include_usage", true}}}};
  for (int round = 0; round < 2; ++round) {
    auto r = http_call(s.port, "POST", "/v1/completions", body.dump());
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200);
    EXPECT_EQ(r->header("content-type"), "text/event-stream");
    ASSERT_GE(r->body.size(), 14u);
    EXPECT_EQ(r->body.substr(r->body.size() - 14), "data: [DONE]\n\n");
    // The chunk before [DONE] carries the usage.
    const size_t last = r->body.rfind("data: {");
    const auto usage = nlohmann::json::parse(r->body.substr(last + 6, r->body.find('\n', last) - last - 6));
    EXPECT_TRUE(usage["choices"].empty());
    EXPECT_EQ(usage["usage"]["completion_tokens"], 6);
    const int cached = usage["usage"]["prompt_tokens_details"]["cached_tokens"];
    const int prompt = usage["usage"]["prompt_tokens"];
    ASSERT_GT(prompt, 17);
    // The repeat hits every full block of 16 but the one holding the last prompt token.
    EXPECT_EQ(cached, round == 0 ? 0 : (prompt - 1) / 16 * 16) << prompt << " prompt tokens";
  }
}

TEST(ServerHttp, DisconnectMidStreamFreesTheBlocks) {
  Server s;
  {
    HttpConn c(s.port);
    nlohmann::json body = {{"prompt", "Once upon a time"}, {"max_tokens", 480}, {"ignore_eos", true},
                           {"stream", true}};
    ASSERT_TRUE(c.send("POST", "/v1/completions", body.dump()));
    ASSERT_TRUE(c.read_until("\"text\""));  // tokens are flowing
    EXPECT_GT(s.engine->stats().engine.kv_blocks_used + s.engine->num_active(), 0);
  }  // the client goes away
  EXPECT_TRUE(s.wait_idle(5));
  // Aborted, not run to the end.
  EXPECT_LT(s.engine->stats().engine.output_tokens, 480);
}

TEST(ServerHttp, StopStringsLogprobsAndParallelSamples) {
  Server s;
  // Greedy text first, then a stop word inside it.
  auto base = http_call(s.port, "POST", "/v1/completions",
                        R"({"prompt": "Once upon a time", "max_tokens": 30, "temperature": 0})");
  ASSERT_TRUE(base);
  const std::string text = nlohmann::json::parse(base->body)["choices"][0]["text"];
  const size_t at = text.find(" girl");
  ASSERT_NE(at, std::string::npos) << text;
  nlohmann::json body = {{"prompt", "Once upon a time"}, {"max_tokens", 30}, {"temperature", 0},
                         {"stop", {" girl"}}, {"n", 2}, {"logprobs", 3}};
  auto r = http_call(s.port, "POST", "/v1/completions", body.dump());
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const auto j = nlohmann::json::parse(r->body);
  ASSERT_EQ(j["choices"].size(), 2u);
  for (const auto& c : j["choices"]) {
    EXPECT_EQ(c["text"], text.substr(0, at));
    EXPECT_EQ(c["finish_reason"], "stop");
    const auto& lp = c["logprobs"];
    ASSERT_TRUE(lp.is_object());
    ASSERT_EQ(lp["tokens"].size(), lp["token_logprobs"].size());
    ASSERT_EQ(lp["tokens"].size(), lp["top_logprobs"].size());
    for (size_t k = 0; k < lp["tokens"].size(); ++k) {
      const double v = lp["token_logprobs"][k];
      EXPECT_LE(v, 0.0);
      // Greedy: the sampled token is the most likely one.
      double best = -1e9;
      for (const auto& [tok, p] : lp["top_logprobs"][k].items()) best = std::max(best, p.get<double>());
      EXPECT_DOUBLE_EQ(v, best);
      EXPECT_GE(lp["top_logprobs"][k].size(), 1u);
    }
  }
  // Completion tokens count what was returned (up to the stop), per choice.
  EXPECT_EQ(j["usage"]["completion_tokens"].get<int>(),
            2 * static_cast<int>(j["choices"][0]["logprobs"]["tokens"].size()));
  EXPECT_TRUE(s.wait_idle());
  // Chat logprobs shape.
  auto chat = http_call(s.port, "POST", "/v1/chat/completions",
                        R"({"messages": [{"role": "user", "content": "Once"}], "max_tokens": 3,
                            "temperature": 0, "logprobs": true, "top_logprobs": 2})");
  ASSERT_TRUE(chat);
  const auto cj = nlohmann::json::parse(chat->body);
  const auto& content = cj["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(content.size(), 3u) << chat->body;
  EXPECT_EQ(content[0]["top_logprobs"].size(), 2u);
  EXPECT_TRUE(content[0]["bytes"].is_array());
}

// Streams one long request for `user`, returns the connection once its first token arrived.
std::unique_ptr<HttpConn> start_long_stream(uint16_t port, const std::string& user) {
  auto c = std::make_unique<HttpConn>(port);
  nlohmann::json body = {{"prompt", "Once upon a time"}, {"max_tokens", 480}, {"ignore_eos", true},
                         {"stream", true}, {"user", user}};
  if (!c->send("POST", "/v1/completions", body.dump()) || !c->read_until("\"text\"")) return nullptr;
  return c;
}

TEST(ServerHttp, PerUserCapAnswers429WithRetryAfter) {
  sched::AdmissionConfig ac;
  ac.max_concurrent_per_user = 1;
  Server s(ac);
  // The long stream normally outlives the second request by far; retry if it did not.
  bool saw_429 = false;
  for (int attempt = 0; attempt < 5 && !saw_429; ++attempt) {
    auto a = start_long_stream(s.port, "alice");
    ASSERT_TRUE(a);
    auto b = http_call(s.port, "POST", "/v1/completions",
                       R"({"prompt": "Once", "max_tokens": 4, "user": "alice"})");
    ASSERT_TRUE(b);
    ASSERT_TRUE(b->status == 429 || b->status == 200) << b->body;
    if (b->status == 429) {
      saw_429 = true;
      expect_error(b, 429, "per-user cap");
      EXPECT_GE(std::stoi(b->header("retry-after")), 1);
      // Another user is not limited.
      auto c = http_call(s.port, "POST", "/v1/completions",
                         R"({"prompt": "Once", "max_tokens": 4, "user": "bob"})");
      ASSERT_TRUE(c);
      EXPECT_EQ(c->status, 200) << c->body;
    }
  }
  EXPECT_TRUE(saw_429);
  EXPECT_TRUE(s.wait_idle());
}

TEST(ServerHttp, FullPoolAndNoQueueAnswers503WithRetryAfterAndTooLargeIs400) {
  sched::AdmissionConfig ac;
  ac.max_queue = 0;
  ac.max_request_share = 1.0;
  ac.headroom_fraction = 0;
  ac.interactive_reserve_fraction = 0;
  // 40 blocks of 16 tokens (stories260K f16 KV: 640 bytes per token): one 497-token request
  // (32 blocks) leaves too little for another.
  Server s(ac, /*kv_bytes=*/40 * 16 * 640);
  ASSERT_EQ(s.engine->num_blocks(), 40);
  bool saw_503 = false;
  for (int attempt = 0; attempt < 5 && !saw_503; ++attempt) {
    auto a = start_long_stream(s.port, "");
    ASSERT_TRUE(a);
    auto b = http_call(s.port, "POST", "/v1/completions", R"({"prompt": "Once", "max_tokens": 200})");
    ASSERT_TRUE(b);
    ASSERT_TRUE(b->status == 503 || b->status == 200) << b->body;
    if (b->status == 503) {
      saw_503 = true;
      expect_error(b, 503, "no room and no queue");
      EXPECT_GE(std::stoi(b->header("retry-after")), 1);
    }
  }
  EXPECT_TRUE(saw_503);
  // Could never fit: 400 naming the limit.
  auto big = http_call(s.port, "POST", "/v1/completions",
                       R"({"prompt": "Once", "max_tokens": 500, "n": 2})");
  expect_error(big, 400, "too large");
  EXPECT_NE(big->body.find("blocks"), std::string::npos);
  EXPECT_TRUE(s.wait_idle());
  // The counters add up: every generation request was accepted or rejected.
  auto m = http_call(s.port, "GET", "/metrics");
  ASSERT_TRUE(m);
  EXPECT_EQ(s.api->metrics().received(), s.api->metrics().accepted() + s.api->metrics().rejected_total());
}

TEST(ServerHttp, MetricsExposeTheVllmStyleNames) {
  Server s;
  ASSERT_TRUE(http_call(s.port, "POST", "/v1/completions", R"({"prompt": "Once", "max_tokens": 4})"));
  auto m = http_call(s.port, "GET", "/metrics");
  ASSERT_TRUE(m);
  EXPECT_EQ(m->status, 200);
  EXPECT_NE(m->header("content-type").find("text/plain"), std::string::npos);
  for (const char* name :
       {"hinge:num_requests_running", "hinge:num_requests_waiting", "hinge:kv_cache_usage_perc",
        "hinge:kv_blocks_free", "hinge:prefix_cache_queries_total", "hinge:prefix_cache_hits_total",
        "hinge:num_preemptions_total", "hinge:requests_rejected_total{", "hinge:prompt_tokens_total",
        "hinge:generation_tokens_total", "hinge:time_to_first_token_seconds_bucket",
        "hinge:inter_token_latency_seconds_bucket", "hinge:e2e_request_latency_seconds_count",
        "hinge:request_queue_time_seconds_sum"})
    EXPECT_NE(m->body.find(name), std::string::npos) << name;
  EXPECT_NE(m->body.find("hinge:generation_tokens_total{model_name=\"stories\"} 4"), std::string::npos);
  // Dashboard and its feed.
  auto page = http_call(s.port, "GET", "/");
  ASSERT_TRUE(page);
  EXPECT_NE(page->body.find("/v1/stats"), std::string::npos);
  auto st = http_call(s.port, "GET", "/v1/stats");
  ASSERT_TRUE(st);
  const auto j = nlohmann::json::parse(st->body);
  EXPECT_EQ(j["kv"]["map"].get<std::string>().size(), static_cast<size_t>(j["kv"]["blocks_total"].get<int>()));
}

TEST(ServerHttp, DrainingRefusesNewWorkAndHealthSays503) {
  Server s;
  s.api->begin_shutdown();
  auto h = http_call(s.port, "GET", "/health");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->status, 503);
  auto r = http_call(s.port, "POST", "/v1/completions", R"({"prompt": "Once", "max_tokens": 4})");
  expect_error(r, 503, "draining");
  EXPECT_FALSE(r->header("retry-after").empty());
}

}  // namespace
}  // namespace hinge

namespace hinge {
namespace {

// Tools with a tool-call template (Qwen 2.5's, hermes): stories260K writes text, which comes
// back as content with finish_reason "stop" (no half-parsed call, streaming or not); the
// history's calls and results render; what cannot be honoured yet is a 400, never a guess.
TEST(ServerHttp, ToolsWithATemplateThatCallsThem) {
  const std::string qwen = testing::read_file(shared_path("chat-templates/Qwen-Qwen2.5-7B-Instruct.jinja"));
  ASSERT_FALSE(qwen.empty());
  Server s({}, 8 << 20, 1 << 20, qwen);
  EXPECT_EQ(s.api->tool_format(), ToolFormat::kHermes);
  // (Short: the template's tool preamble and stories260K's small vocabulary fill its 512 tokens.)
  const nlohmann::json tools = nlohmann::json::parse(R"([{"type": "function", "function": {"name": "get_weather"}}])");
  nlohmann::json body = {{"messages", {{{"role", "user"}, {"content", "Once upon a time"}}}},
                         {"tools", tools}, {"max_tokens", 12}, {"temperature", 0}};
  auto r = http_call(s.port, "POST", "/v1/chat/completions", body.dump());
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const auto j = nlohmann::json::parse(r->body);
  const auto& msg = j["choices"][0]["message"];
  EXPECT_TRUE(msg["content"].is_string());
  EXPECT_FALSE(msg.contains("tool_calls"));
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
  // Streamed: the same text in content deltas, no tool_calls key anywhere.
  body["stream"] = true;
  auto st = http_call(s.port, "POST", "/v1/chat/completions", body.dump());
  ASSERT_TRUE(st);
  ASSERT_EQ(st->status, 200);
  std::string streamed;
  for (size_t at = st->body.find("data: {"); at != std::string::npos; at = st->body.find("data: {", at + 1)) {
    const auto c = nlohmann::json::parse(st->body.substr(at + 6, st->body.find('\n', at) - at - 6));
    const auto& d = c["choices"][0]["delta"];
    EXPECT_FALSE(d.contains("tool_calls"));
    if (d.contains("content")) streamed += d["content"].get<std::string>();
  }
  EXPECT_EQ(streamed, msg["content"].get<std::string>());
  // A conversation with a call and its result in the history renders and runs.
  body["stream"] = false;
  body["messages"] = nlohmann::json::parse(R"([
      {"role": "system", "content": "Be brief."},
      {"role": "user", "content": "Paris?"},
      {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function",
        "function": {"name": "get_weather", "arguments": "{\"l\": \"P\"}"}}]},
      {"role": "tool", "tool_call_id": "c1", "content": "21"}])");
  body["max_tokens"] = 4;
  r = http_call(s.port, "POST", "/v1/chat/completions", body.dump());
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
  // tool_choice required with too few tokens for a call: it ends at max_tokens, "length", and
  // the unfinished call is content, not a half call (tests/serve/structured_outputs.py has the
  // calls that fit, in every format).
  body["tool_choice"] = "required";
  r = http_call(s.port, "POST", "/v1/chat/completions", body.dump());
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const auto req = nlohmann::json::parse(r->body)["choices"][0];
  EXPECT_EQ(req["finish_reason"], "length");
  EXPECT_FALSE(req["message"].contains("tool_calls"));
  const std::string started = req["message"]["content"].get<std::string>();
  EXPECT_FALSE(started.empty());
  EXPECT_EQ(std::string("<tool_call>\n{\"name\": \"get_weather\"").rfind(started, 0), 0u) << r->body;
  // tool_choice none: tools go to the template, replies are text.
  body["tool_choice"] = "none";
  r = http_call(s.port, "POST", "/v1/chat/completions", body.dump());
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
}

// /v1/completions/render and /v1/chat/completions/render: the prompt's token ids as the
// server computes them (what a request then counts as prompt_tokens), nothing generated.
TEST(ServerHttp, RenderGivesThePromptTokensWithoutGenerating) {
  const std::string qwen = testing::read_file(shared_path("chat-templates/Qwen-Qwen2.5-7B-Instruct.jinja"));
  Server s({}, 8 << 20, 1 << 20, qwen);
  const nlohmann::json chat = {{"messages", {{{"role", "system"}, {"content", "Be brief."}},
                                             {{"role", "user"}, {"content", "Once upon a time"}}}},
                               {"max_tokens", 1}};
  auto r = http_call(s.port, "POST", "/v1/chat/completions/render", chat.dump());
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const auto j = nlohmann::json::parse(r->body);
  EXPECT_EQ(j["request_id"].get<std::string>().rfind("chatcmpl-", 0), 0u);
  EXPECT_EQ(j["model"], "stories");
  const size_t n = j["token_ids"].size();
  EXPECT_EQ(j["prompt_tokens"], n);
  auto g = http_call(s.port, "POST", "/v1/chat/completions", chat.dump());
  ASSERT_TRUE(g);
  EXPECT_EQ(nlohmann::json::parse(g->body)["usage"]["prompt_tokens"], n);  // the same prompt
  // Completions: text as /tokenize with special tokens; ids as given.
  r = http_call(s.port, "POST", "/v1/completions/render", R"({"prompt": "Once upon a time"})");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  auto t = http_call(s.port, "POST", "/tokenize", R"({"prompt": "Once upon a time"})");
  ASSERT_TRUE(t);
  EXPECT_EQ(nlohmann::json::parse(r->body)["token_ids"], nlohmann::json::parse(t->body)["tokens"]);
  r = http_call(s.port, "POST", "/v1/completions/render", R"({"prompt": [1, 5, 9]})");
  ASSERT_TRUE(r);
  EXPECT_EQ(nlohmann::json::parse(r->body)["token_ids"], nlohmann::json::parse("[1, 5, 9]"));
  expect_error(http_call(s.port, "POST", "/v1/completions/render", R"({"prompt": [1, 99999]})"), 400, "id range");
  expect_error(http_call(s.port, "POST", "/v1/completions/render", R"({"prompt": "x", "model": "other"})"), 404,
               "model");
  expect_error(http_call(s.port, "POST", "/v1/chat/completions/render", R"({"messages": []})"), 400, "messages");
}

TEST(ServerHttp, ToolsWithATemplateWithoutToolSyntaxAre400) {
  const std::string gemma = testing::read_file(shared_path("chat-templates/google-gemma-2-2b-it.jinja"));
  Server s({}, 8 << 20, 1 << 20, gemma);
  EXPECT_EQ(s.api->tool_format(), ToolFormat::kNone);
  const nlohmann::json body = {{"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"max_tokens", 4},
                               {"tools", nlohmann::json::parse(R"([{"type": "function", "function": {"name": "f"}}])")}};
  auto r = http_call(s.port, "POST", "/v1/chat/completions", body.dump());
  expect_error(r, 400, "no tool syntax");
  EXPECT_NE(r->body.find("--tool-format"), std::string::npos) << r->body;
}

}  // namespace
}  // namespace hinge
