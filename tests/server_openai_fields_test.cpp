// OpenAI request fields beyond the basics (src/server/openai_request.h): logit_bias, echo,
// best_of, max_tokens 0, and the unsupported fields that are a 400 instead of being ignored;
// the response side of echo (null first logprob) and best_of's selection.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "openai_request_test_util.h"
#include "server/openai_request.h"
#include "server/openai_response.h"

namespace hinge::server {
namespace {

using request_test::chat;
using request_test::chat_error;
using request_test::completion;
using request_test::completion_error;
using request_test::expect_error;


TEST(ServerOpenaiFields, LogitBiasParsesOnBothEndpoints) {
  for (bool is_chat : {true, false}) {
    const std::string extra = R"("logit_bias": {"50256": -100, "7": 2.5, "0": 100, "0012": 0})";
    auto r = is_chat ? parse_chat_request(chat(extra)) : parse_completion_request(completion(extra));
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_EQ(r->sampling.logit_bias,
              (std::vector<LogitBias>{{50256, -100.0f}, {7, 2.5f}, {0, 100.0f}, {12, 0.0f}}));
    EXPECT_TRUE(r->sampling.validate().ok());
  }
  auto none = parse_chat_request(chat(R"("logit_bias": null)"));
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->sampling.logit_bias.empty());
  EXPECT_TRUE(parse_chat_request(chat(R"("logit_bias": {})"))->sampling.logit_bias.empty());
}

TEST(ServerOpenaiFields, LogitBiasErrorsNameTheEntry) {
  chat_error(R"("logit_bias": [1, 2])", "logit_bias", "an object");
  chat_error(R"("logit_bias": {"abc": 1})", "logit_bias", "token ids");
  chat_error(R"("logit_bias": {"-5": 1})", "logit_bias", "token ids");
  chat_error(R"("logit_bias": {"": 1})", "logit_bias", "token ids");
  chat_error(R"("logit_bias": {"1.5": 1})", "logit_bias", "token ids");
  chat_error(R"("logit_bias": {"99999999999": 1})", "logit_bias", "token ids");
  chat_error(R"("logit_bias": {"2147483648": 1})", "logit_bias", "token ids");
  chat_error(R"("logit_bias": {"12": 101})", "logit_bias.12", "[-100, 100]");
  chat_error(R"("logit_bias": {"12": -100.5})", "logit_bias.12", "[-100, 100]");
  chat_error(R"("logit_bias": {"12": "high"})", "logit_bias.12", "a number");
  chat_error(R"("logit_bias": {"12": null})", "logit_bias.12", "a number");
  completion_error(R"("logit_bias": {"12": 1, "012": 2})", "logit_bias.012", "more than once");
  // The key that is not an id is never quoted back.
  auto r = parse_chat_request(chat(R"("logit_bias": {"secret words": 1})"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message.find("secret"), std::string::npos) << r.error().message;
  // OpenAI's limit: 300 entries.
  std::string many = R"("logit_bias": {)";
  for (int i = 0; i < kMaxLogitBias; ++i) many += (i ? ", \"" : "\"") + std::to_string(i) + "\": 1";
  EXPECT_EQ(parse_chat_request(chat(many + "}"))->sampling.logit_bias.size(), 300u);
  chat_error(many + R"(, "300": 1})", "logit_bias", "at most 300");
}

TEST(ServerOpenaiFields, EchoBestOfAndMaxTokensZero) {
  auto d = parse_completion_request(completion(R"("n": 2)"));
  ASSERT_TRUE(d.ok());
  EXPECT_FALSE(d->echo);
  EXPECT_EQ(d->best_of, 2);  // absent: n
  auto r = parse_completion_request(completion(R"("echo": true, "best_of": 5, "n": 3)"));
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_TRUE(r->echo);
  EXPECT_EQ(r->best_of, 5);
  EXPECT_EQ(r->n, 3);
  EXPECT_EQ(parse_completion_request(completion(R"("best_of": 16)"))->best_of, 16);
  completion_error(R"("best_of": 17)", "best_of", "[1, 16]");
  completion_error(R"("best_of": 0)", "best_of", "[1, 16]");
  completion_error(R"("best_of": 2, "n": 3)", "best_of", "must be >= n");
  completion_error(R"("best_of": 2, "stream": true)", "best_of", "stream");
  EXPECT_TRUE(parse_completion_request(completion(R"("best_of": 2, "n": 2, "stream": true)")).ok());
  completion_error(R"("echo": 1)", "echo", "a boolean");
  // max_tokens 0 scores the prompt: only with echo, only on completions.
  auto s = parse_completion_request(completion(R"("echo": true, "max_tokens": 0, "logprobs": 2)"));
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_EQ(s->max_tokens, 0);
  completion_error(R"("max_tokens": 0)", "max_tokens", "echo");
  completion_error(R"("max_tokens": -1)", "max_tokens", "[0, 2147483647]");
  chat_error(R"("max_tokens": 0)", "max_tokens", "[1, 2147483647]");
  // Not OpenAI chat fields: ignored there.
  auto c = parse_chat_request(chat(R"("echo": true, "best_of": 3, "suffix": "x")"));
  ASSERT_TRUE(c.ok());
  EXPECT_FALSE(c->echo);
  EXPECT_EQ(c->best_of, 1);
}

TEST(ServerOpenaiFields, UnsupportedOpenAiFieldsAre400sNamingThem) {
  completion_error(R"("suffix": "and then")", "suffix", "not supported");
  EXPECT_TRUE(parse_completion_request(completion(R"("suffix": "")")).ok());
  EXPECT_TRUE(parse_completion_request(completion(R"("suffix": null)")).ok());
  chat_error(R"("functions": [{"name": "f"}])", "functions", "use 'tools'");
  chat_error(R"("function_call": "auto")", "function_call", "use 'tool_choice'");
  // Structured outputs compile to a grammar (server/structured_output.h); malformed ones are 400s.
  EXPECT_TRUE(parse_chat_request(chat(R"("response_format": {"type": "json_object"})"))->structured.grammar);
  chat_error(R"("response_format": {"type": "json_schema", "json_schema": {}})",
             "response_format.json_schema.name", "required");
  chat_error(R"("response_format": {"type": "yaml"})", "response_format.type", "json_schema");
  chat_error(R"("response_format": "json")", "response_format", "an object");
  EXPECT_TRUE(parse_chat_request(chat(R"("response_format": {"type": "text"})")).ok());
  chat_error(R"("modalities": ["text", "audio"])", "modalities", "not supported");
  EXPECT_TRUE(parse_chat_request(chat(R"("modalities": ["text"])")).ok());
  chat_error(R"("audio": {"voice": "alloy", "format": "wav"})", "audio", "not supported");
  chat_error(R"("web_search_options": {})", "web_search_options", "not supported");
  // Harmless OpenAI fields and fields that are not OpenAI's stay ignored.
  EXPECT_TRUE(parse_chat_request(chat(
                  R"("metadata": {"a": "b"}, "store": true, "service_tier": "auto",
                     "parallel_tool_calls": false, "prediction": {"type": "content"},
                     "reasoning_effort": "low", "my_extension": 1)"))
                  .ok());
  EXPECT_TRUE(parse_completion_request(completion(R"("user": "u", "functions": [1])")).ok());
}

TEST(ServerOpenaiFields, EchoedFirstTokenHasNullLogprobs) {
  std::vector<LogprobEntry> e(3);
  e[0] = {"Once", 0, {}, /*no_logprob=*/true};
  e[1] = {" upon", -0.5f, {{" upon", -0.5f}, {" a", -2.0f}}};
  e[2] = {" a", -0.25f, {}};
  const auto j = completion_logprobs_json(e, 0);
  EXPECT_EQ(j["tokens"].dump(), R"(["Once"," upon"," a"])");
  EXPECT_EQ(j["token_logprobs"].dump(), "[null,-0.5,-0.25]");
  EXPECT_TRUE(j["top_logprobs"][0].is_null());
  EXPECT_EQ(j["top_logprobs"][1].dump(), R"({" upon":-0.5," a":-2.0})");
  EXPECT_EQ(j["text_offset"].dump(), "[0,4,9]");
}

TEST(ServerOpenaiFields, BestOfPicksTheHighestCumulativeLogprobs) {
  const std::vector<double> s = {-3.0, -1.0, -2.0, -1.0, -7.5};
  EXPECT_EQ(best_of_indices(s, 1), (std::vector<size_t>{1}));
  EXPECT_EQ(best_of_indices(s, 2), (std::vector<size_t>{1, 3}));  // tie: lower index first
  EXPECT_EQ(best_of_indices(s, 4), (std::vector<size_t>{1, 3, 2, 0}));
  EXPECT_EQ(best_of_indices(s, 9).size(), 5u);
  EXPECT_TRUE(best_of_indices(s, 0).empty());
  EXPECT_TRUE(best_of_indices({}, 1).empty());
}

}  // namespace
}  // namespace hinge::server
