// OpenAI-compatible protocol layer: request parsing/validation, response and SSE builders,
// error JSON (src/server/openai_request.h, openai_response.h, api_error.h).
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "common/utf8.h"
#include "server/api_error.h"
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

using OJson = nlohmann::ordered_json;

OpenAiRequest chat_ok(const std::string& body) {
  auto r = parse_chat_request(body);
  EXPECT_TRUE(r.ok()) << body << " -> " << (r.ok() ? "" : r.error().message);
  return r.ok() ? std::move(r).value() : OpenAiRequest{};
}
OpenAiRequest completion_ok(const std::string& body) {
  auto r = parse_completion_request(body);
  EXPECT_TRUE(r.ok()) << body << " -> " << (r.ok() ? "" : r.error().message);
  return r.ok() ? std::move(r).value() : OpenAiRequest{};
}


// ---- request: defaults and happy paths ---------------------------------------------------------

TEST(ServerOpenaiRequest, DefaultsAreOpenAisNotTheCli) {
  OpenAiRequest r = chat_ok(R"({"messages": [{"role": "user", "content": "hi"}]})");
  EXPECT_EQ(r.endpoint, Endpoint::kChatCompletions);
  EXPECT_EQ(r.model, "");
  EXPECT_FLOAT_EQ(r.sampling.temperature, 1.0f);
  EXPECT_FLOAT_EQ(r.sampling.top_p, 1.0f);
  EXPECT_EQ(r.sampling.top_k, 0);
  EXPECT_FLOAT_EQ(r.sampling.min_p, 0.0f);
  EXPECT_FLOAT_EQ(r.sampling.repetition_penalty, 1.0f);
  EXPECT_FLOAT_EQ(r.sampling.presence_penalty, 0.0f);
  EXPECT_FLOAT_EQ(r.sampling.frequency_penalty, 0.0f);
  EXPECT_EQ(r.sampling.penalty_last_n, -1);
  EXPECT_TRUE(r.sampling.stop.empty());
  EXPECT_FALSE(r.sampling.ignore_eos);
  EXPECT_FALSE(r.seed.has_value());
  EXPECT_FALSE(r.max_tokens.has_value());
  EXPECT_EQ(r.n, 1);
  EXPECT_FALSE(r.logprobs);
  EXPECT_EQ(r.top_logprobs, 0);
  EXPECT_FALSE(r.stream);
  EXPECT_FALSE(r.include_usage);
  EXPECT_EQ(r.user, "");
  EXPECT_EQ(r.priority, sched::Priority::kInteractive);
  EXPECT_TRUE(r.tools.is_null());
  EXPECT_TRUE(r.tool_choice.is_null());
  EXPECT_TRUE(r.sampling.validate().ok());
}

TEST(ServerOpenaiRequest, EveryFieldMapped) {
  OpenAiRequest r = chat_ok(R"({
    "model": "tiny", "messages": [{"role": "system", "content": "s"},
                                  {"role": "user", "content": "u"}],
    "max_tokens": 7, "temperature": 0.5, "top_p": 0.9, "top_k": 40, "min_p": 0.1,
    "seed": 42, "stop": ["a", "b"], "n": 3, "presence_penalty": -2, "frequency_penalty": 2,
    "repetition_penalty": 1.3, "logprobs": true, "top_logprobs": 5, "ignore_eos": true,
    "stream": true, "stream_options": {"include_usage": true}, "user": "alice",
    "priority": "batch", "tools": [{"type": "function", "function": {"name": "f",
    "parameters": {"type": "object", "properties": {"z": {}, "a": {}}}}}],
    "tool_choice": "auto", "unknown_field": {"ignored": [1, 2]}})");
  EXPECT_EQ(r.model, "tiny");
  ASSERT_EQ(r.messages.size(), 2u);
  EXPECT_EQ(r.messages[1]["content"], "u");
  EXPECT_EQ(r.max_tokens, 7);
  EXPECT_FLOAT_EQ(r.sampling.temperature, 0.5f);
  EXPECT_FLOAT_EQ(r.sampling.top_p, 0.9f);
  EXPECT_EQ(r.sampling.top_k, 40);
  EXPECT_FLOAT_EQ(r.sampling.min_p, 0.1f);
  EXPECT_EQ(r.seed, 42u);
  EXPECT_EQ(r.sampling.stop, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(r.n, 3);
  EXPECT_FLOAT_EQ(r.sampling.presence_penalty, -2.0f);
  EXPECT_FLOAT_EQ(r.sampling.frequency_penalty, 2.0f);
  EXPECT_FLOAT_EQ(r.sampling.repetition_penalty, 1.3f);
  EXPECT_TRUE(r.logprobs);
  EXPECT_EQ(r.top_logprobs, 5);
  EXPECT_TRUE(r.sampling.ignore_eos);
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);
  EXPECT_EQ(r.user, "alice");
  EXPECT_EQ(r.priority, sched::Priority::kBatch);
  // Tools pass through with their key order ("z" before "a").
  EXPECT_EQ(r.tools.dump(),
            R"([{"type":"function","function":{"name":"f","parameters":{"type":"object",)"
            R"("properties":{"z":{},"a":{}}}}}])");
  EXPECT_EQ(r.tool_choice, "auto");
}

TEST(ServerOpenaiRequest, NumericEdgesAndAliases) {
  EXPECT_EQ(chat_ok(chat(R"("top_k": -1)")).sampling.top_k, 0);
  EXPECT_EQ(chat_ok(chat(R"("top_k": 0)")).sampling.top_k, 0);
  EXPECT_FLOAT_EQ(chat_ok(chat(R"("temperature": 0)")).sampling.temperature, 0.0f);
  EXPECT_FLOAT_EQ(chat_ok(chat(R"("temperature": 2)")).sampling.temperature, 2.0f);
  EXPECT_FLOAT_EQ(chat_ok(chat(R"("top_p": 1)")).sampling.top_p, 1.0f);
  EXPECT_FLOAT_EQ(chat_ok(chat(R"("repetition_penalty": 10)")).sampling.repetition_penalty, 10);
  EXPECT_EQ(chat_ok(chat(R"("max_tokens": 2.0)")).max_tokens, 2);  // integral float
  EXPECT_EQ(chat_ok(chat(R"("max_tokens": 2147483647)")).max_tokens, 2147483647);
  EXPECT_EQ(chat_ok(chat(R"("max_completion_tokens": 9)")).max_tokens, 9);
  EXPECT_EQ(chat_ok(chat(R"("max_tokens": 5, "max_completion_tokens": 9)")).max_tokens, 9);
  EXPECT_EQ(chat_ok(chat(R"("n": 16)")).n, 16);
  EXPECT_EQ(chat_ok(chat(R"("seed": -1)")).seed, std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(chat_ok(chat(R"("seed": 18446744073709551615)")).seed,
            std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(chat_ok(chat(R"("seed": 3.0)")).seed, 3u);
  EXPECT_EQ(chat_ok(chat(R"("stop": "END")")).sampling.stop, std::vector<std::string>{"END"});
  EXPECT_TRUE(chat_ok(chat(R"("stop": [])")).sampling.stop.empty());
  EXPECT_EQ(chat_ok(chat("\"stop\": \"" + std::string(1024, 'x') + "\"")).sampling.stop.size(), 1u);
  // null means "not given" for every optional field.
  OpenAiRequest r = chat_ok(chat(
      R"("temperature": null, "seed": null, "stop": null, "n": null, "max_tokens": null,)"
      R"( "stream": null, "stream_options": null, "tools": null, "user": null, "logprobs": null)"));
  EXPECT_FLOAT_EQ(r.sampling.temperature, 1.0f);
  EXPECT_FALSE(r.seed.has_value());
  EXPECT_FALSE(r.max_tokens.has_value());
  EXPECT_TRUE(r.tools.is_null());
  // top_logprobs 0 needs no logprobs; stream without include_usage.
  EXPECT_EQ(chat_ok(chat(R"("top_logprobs": 0)")).top_logprobs, 0);
  EXPECT_FALSE(chat_ok(chat(R"("stream": true, "stream_options": {})")).include_usage);
  EXPECT_EQ(chat_ok(chat(R"("priority": "interactive")")).priority, sched::Priority::kInteractive);
  const OpenAiRequest named = chat_ok(chat(
      R"("tools": [{"type": "function", "function": {"name": "f"}}], )"
      R"("tool_choice": {"type": "function", "function": {"name": "f"}}, "parallel_tool_calls": false)"));
  EXPECT_TRUE(named.tool_choice.is_object());
  EXPECT_EQ(named.tool_choice_mode, OpenAiRequest::ToolChoice::kFunction);
  EXPECT_EQ(named.tool_choice_function, "f");
  EXPECT_FALSE(named.parallel_tool_calls);
  EXPECT_EQ(chat_ok(chat(R"("tool_choice": "none")")).tool_choice_mode, OpenAiRequest::ToolChoice::kNone);
  EXPECT_EQ(chat_ok(chat(R"("tool_choice": "auto")")).tool_choice_mode, OpenAiRequest::ToolChoice::kAuto);
}

// ---- request: type and range errors ------------------------------------------------------------

TEST(ServerOpenaiRequest, WrongTypesNameTheFieldAndTheExpectedType) {
  struct Case {
    const char* field;
    const char* value;
    const char* expected;
  };
  const Case cases[] = {
      {"model", "5", "a string"},
      {"temperature", "\"hot\"", "a number"},
      {"top_p", "true", "a number"},
      {"min_p", "[]", "a number"},
      {"presence_penalty", "{}", "a number"},
      {"frequency_penalty", "\"0\"", "a number"},
      {"repetition_penalty", "false", "a number"},
      {"top_k", "1.5", "an integer"},
      {"top_k", "\"5\"", "an integer"},
      {"seed", "\"x\"", "an integer"},
      {"seed", "1.5", "an integer"},
      {"n", "\"2\"", "an integer"},
      {"max_tokens", "\"10\"", "an integer"},
      {"max_completion_tokens", "1.5", "an integer"},
      {"stop", "5", "a string or an array of strings"},
      {"logprobs", "1", "a boolean"},
      {"top_logprobs", "\"1\"", "an integer"},
      {"ignore_eos", "1", "a boolean"},
      {"stream", "\"yes\"", "a boolean"},
      {"user", "5", "a string"},
      {"priority", "1", "a string"},
      {"tools", "{}", "an array"},
      {"tool_choice", "5", "a string or an object"},
  };
  for (const Case& c : cases)
    chat_error("\"" + std::string(c.field) + "\": " + c.value, c.field, c.expected);
  chat_error(R"("stop": ["a", 1])", "stop[1]", "a string");
  chat_error(R"("tools": [1])", "tools[0]", "a tool object");
  chat_error(R"("stream": true, "stream_options": 1)", "stream_options", "an object");
  chat_error(R"("stream": true, "stream_options": {"include_usage": "yes"})",
             "stream_options.include_usage", "a boolean");
  completion_error(R"("logprobs": true)", "logprobs", "an integer");
}

TEST(ServerOpenaiRequest, OutOfRangeNumbersSayTheRange) {
  struct Case {
    const char* field;
    const char* value;
    const char* range;
  };
  const Case cases[] = {
      {"temperature", "-0.1", "[0, 2]"},
      {"temperature", "2.01", "[0, 2]"},
      {"temperature", "1e308", "[0, 2]"},
      {"top_p", "0", "(0, 1]"},
      {"top_p", "1.5", "(0, 1]"},
      {"top_p", "1e-50", "(0, 1]"},  // positive as a double, 0 as a float
      {"min_p", "1.1", "[0, 1]"},
      {"min_p", "-1e308", "[0, 1]"},
      {"presence_penalty", "2.5", "[-2, 2]"},
      {"frequency_penalty", "-3", "[-2, 2]"},
      {"repetition_penalty", "0", "(0, 10]"},
      {"repetition_penalty", "11", "(0, 10]"},
      {"top_k", "-2", ">= -1"},
      {"top_k", "99999999999999999999", ">= -1"},
      {"n", "0", "[1, 16]"},
      {"n", "17", "[1, 16]"},
      {"n", "1e308", "[1, 16]"},
      {"max_tokens", "0", "[1, 2147483647]"},
      {"max_tokens", "-5", "[1, 2147483647]"},
      {"max_tokens", "4294967296", "[1, 2147483647]"},
      {"max_tokens", "18446744073709551615", "[1, 2147483647]"},
      {"max_tokens", "1e308", "[1, 2147483647]"},
      {"max_completion_tokens", "0", "[1, 2147483647]"},
      {"top_logprobs", "21", "[0, 20]"},
      {"seed", "1e308", "18446744073709551615]"},
      {"seed", "-1e19", "[-9223372036854775808"},
  };
  for (const Case& c : cases)
    chat_error("\"" + std::string(c.field) + "\": " + c.value, c.field, c.range);
  completion_error(R"("logprobs": 21)", "logprobs", "[0, 20]");
  completion_error(R"("logprobs": -1)", "logprobs", "[0, 20]");
}

TEST(ServerOpenaiRequest, StopStringLimits) {
  std::string many = "\"stop\": [";
  for (int i = 0; i < 17; ++i) many += (i ? ",\"s" : "\"s") + std::to_string(i) + "\"";
  chat_error(many + "]", "stop", "at most 16");
  chat_error(R"("stop": "")", "stop", "must not be empty");
  chat_error(R"("stop": ["a", ""])", "stop[1]", "must not be empty");
  chat_error("\"stop\": [\"" + std::string(1025, 'x') + "\"]", "stop[0]", "1024 bytes");
}

TEST(ServerOpenaiRequest, StreamOptionsNeedStream) {
  chat_error(R"("stream_options": {"include_usage": true})", "stream_options",
             "only allowed when 'stream' is true");
  chat_error(R"("stream": false, "stream_options": {"include_usage": true})", "stream_options",
             "only allowed when 'stream' is true");
  completion_error(R"("stream_options": {"include_usage": false})", "stream_options",
                   "only allowed when 'stream' is true");
}

TEST(ServerOpenaiRequest, LogprobsSettings) {
  chat_error(R"("top_logprobs": 3)", "top_logprobs", "'logprobs' must be true");
  chat_error(R"("logprobs": false, "top_logprobs": 3)", "top_logprobs", "'logprobs' must be true");
  OpenAiRequest c = completion_ok(completion(R"("logprobs": 3)"));
  EXPECT_TRUE(c.logprobs);
  EXPECT_EQ(c.top_logprobs, 3);
  OpenAiRequest z = completion_ok(completion(R"("logprobs": 0)"));
  EXPECT_TRUE(z.logprobs);
  EXPECT_EQ(z.top_logprobs, 0);
  EXPECT_FALSE(completion_ok(completion()).logprobs);
}

TEST(ServerOpenaiRequest, Priority) {
  chat_error(R"("priority": "urgent")", "priority", "'interactive' or 'batch'");
}

// ---- request: body-level errors ----------------------------------------------------------------

TEST(ServerOpenaiRequest, MalformedJsonNamesTheByteOffset) {
  expect_error(parse_chat_request(R"({"a": })"), "", "at byte 6", "missing value");
  expect_error(parse_chat_request("{} x"), "", "at byte 3", "trailing garbage");
  expect_error(parse_chat_request(""), "", "at byte 0", "empty body");
  expect_error(parse_completion_request(R"({"prompt": "x)"), "", "Invalid JSON", "unterminated");
  expect_error(parse_chat_request(R"({"n": 1e400})"), "", "out of range", "1e400");
}

TEST(ServerOpenaiRequest, BodyMustBeAnObject) {
  for (const char* body : {"[]", "\"str\"", "42", "null", "true"}) {
    expect_error(parse_chat_request(body), "", "must be a JSON object", body);
    expect_error(parse_completion_request(body), "", "must be a JSON object", body);
    expect_error(parse_tokenize_request(body), "", "must be a JSON object", body);
    expect_error(parse_detokenize_request(body), "", "must be a JSON object", body);
  }
}

TEST(ServerOpenaiRequest, HostileStructureIsRejectedBeforeParsing) {
  std::string deep(kMaxJsonDepth + 1, '[');
  expect_error(parse_chat_request(deep), "", "nesting deeper than", "deep");
  // Brackets inside strings do not count; nesting up to the limit is fine.
  std::string nested = "{\"x\": " + std::string(kMaxJsonDepth - 1, '[') +
                       std::string(kMaxJsonDepth - 1, ']') + ", \"s\": \"[[[[{{{{\", " +
                       chat().substr(1);
  EXPECT_TRUE(parse_chat_request(nested).ok());
  std::string wide = "{";
  for (int i = 0; i <= kMaxObjectMembers; ++i) wide += "\"k" + std::to_string(i) + "\": 0,";
  wide += R"("messages": [{"role": "user", "content": "hi"}]})";
  expect_error(parse_chat_request(wide), "", "more than 4096 members", "wide");
  // A long array is not limited (token-id prompts).
  std::string ids = R"({"prompt": [)";
  for (int i = 0; i < 10000; ++i) ids += (i ? ",7" : "7");
  EXPECT_EQ(completion_ok(ids + "]}").prompt_token_ids.size(), 10000u);
}

TEST(ServerOpenaiRequest, InvalidUtf8IsRejected) {
  const std::string bad[] = {"\xff", "\xc0\xaf", "\xed\xa0\x80", "\xe4\xb8"};
  for (const std::string& b : bad) {
    auto r = parse_chat_request(R"({"messages": [{"role": "user", "content": ")" + b + "\"}]}");
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().http_status, 400);
    // The message never echoes the request's bytes back.
    EXPECT_EQ(r.error().message.find(b), std::string::npos);
    EXPECT_TRUE(is_valid_utf8(api_error_body(r.error())));
  }
  expect_error(parse_chat_request(R"({"messages": [{"role": "user", "content": "\ud800"}]})"), "",
               "surrogate", "lone surrogate escape");
}

TEST(ServerOpenaiRequest, Utf8Validator) {
  EXPECT_TRUE(is_valid_utf8(""));
  EXPECT_TRUE(is_valid_utf8("ascii"));
  EXPECT_TRUE(is_valid_utf8("\xc3\xa9 \xe4\xb8\xad \xf0\x9f\x98\x80 \xf4\x8f\xbf\xbf"));
  EXPECT_TRUE(is_valid_utf8(std::string("a\0b", 3)));
  for (const char* s : {"\xff", "\x80", "\xc0\xaf", "\xc1\xbf", "\xe0\x80\xaf", "\xed\xa0\x80",
                        "\xf0\x80\x80\x80", "\xf4\x90\x80\x80", "\xf5\x80\x80\x80", "\xe4\xb8",
                        "\xc3", "\xe4\x41\xad", "\xf0\x9f\x98\x41"})
    EXPECT_FALSE(is_valid_utf8(s)) << testing::PrintToString(s);
}

// ---- request: messages -------------------------------------------------------------------------

TEST(ServerOpenaiRequest, MessagesValidation) {
  auto err = [](const std::string& messages, const std::string& param, const std::string& needle) {
    expect_error(parse_chat_request("{\"messages\": " + messages + "}"), param, needle, messages);
  };
  expect_error(parse_chat_request("{}"), "messages", "required", "missing");
  err("null", "messages", "required");
  err("\"hi\"", "messages", "an array");
  err("[]", "messages", "non-empty");
  err("[1]", "messages[0]", "a message object");
  err(R"([{"content": "x"}])", "messages[0].role", "required");
  err(R"([{"role": 5, "content": "x"}])", "messages[0].role", "a string");
  err(R"([{"role": "user", "content": "x"}, {"role": "wizard", "content": "x"}])",
      "messages[1].role", "'system', 'user', 'assistant', 'tool', 'developer'");
  err(R"([{"role": "user"}])", "messages[0].content", "required");
  err(R"([{"role": "user", "content": null}])", "messages[0].content", "required");
  err(R"([{"role": "assistant", "content": null}])", "messages[0].content", "tool_calls");
  err(R"([{"role": "user", "content": 5}])", "messages[0].content",
      "a string or an array of text parts");
  err(R"([{"role": "user", "content": []}])", "messages[0].content", "must not be empty");
  err(R"([{"role": "user", "content": [{"type": "text", "text": "a"},
          {"type": "image_url", "image_url": {"url": "x"}}]}])",
      "messages[0].content[1].type", "'text'");
  err(R"([{"role": "user", "content": ["a"]}])", "messages[0].content[0]", "a content part");
  err(R"([{"role": "user", "content": [{"type": "text"}]}])", "messages[0].content[0].text",
      "required");
  err(R"([{"role": "user", "content": [{"type": "text", "text": 1}]}])",
      "messages[0].content[0].text", "a string");
  err(R"([{"role": "user", "content": "x", "name": 5}])", "messages[0].name", "a string");
  err(R"([{"role": "tool", "content": "x", "tool_call_id": 5}])", "messages[0].tool_call_id",
      "a string");
  err(R"([{"role": "assistant", "content": "x", "tool_calls": {}}])", "messages[0].tool_calls",
      "an array");
  err(R"([{"role": "user", "content": "x", "tool_calls": []}])", "messages[0].tool_calls",
      "only assistant");
}

TEST(ServerOpenaiRequest, MessagesNormalizedForTheTemplate) {
  OpenAiRequest r = chat_ok(R"({"messages": [
    {"role": "developer", "content": "d"},
    {"role": "system", "content": ""},
    {"role": "user", "zeta": 1, "content": [{"type": "text", "text": "a"},
                                            {"type": "text", "text": "b\u00e9"}], "alpha": 2},
    {"role": "assistant", "tool_calls": [{"id": "c1", "type": "function",
      "function": {"name": "f", "arguments": "{}"}}]},
    {"role": "tool", "tool_call_id": "c1", "name": "f", "content": "{\"t\": 1}"},
    {"role": "assistant", "content": null, "tool_calls": [{"id": "c2", "type": "function",
      "function": {"name": "g", "arguments": {"k": [1]}}}]}]})");
  ASSERT_EQ(r.messages.size(), 6u);
  // Parts joined with "\n"; other keys kept in their order.
  EXPECT_EQ(r.messages[2].dump(),
            "{\"role\":\"user\",\"zeta\":1,\"content\":\"a\\nb\xc3\xa9\","
            "\"alpha\":2}");
  EXPECT_TRUE(r.messages[3].contains("content"));
  EXPECT_TRUE(r.messages[3]["content"].is_null());
  EXPECT_EQ(r.messages[3]["tool_calls"][0]["id"], "c1");
  EXPECT_EQ(r.messages[4]["tool_call_id"], "c1");
  EXPECT_TRUE(r.messages[5]["content"].is_null());
  // Arguments stay as given (text or object): the server shapes them for the template.
  EXPECT_EQ(r.messages[3]["tool_calls"][0]["function"]["arguments"], "{}");
  EXPECT_EQ(r.messages[5]["tool_calls"][0]["function"]["arguments"]["k"][0], 1);
}

TEST(ServerOpenaiRequest, ToolsToolChoiceAndHistoryCallsAreChecked) {
  auto err = [](const std::string& extra, const std::string& param, const std::string& what) {
    auto r = parse_chat_request(R"({"messages": [{"role": "user", "content": "x"}], )" + extra + "}");
    ASSERT_FALSE(r.ok()) << extra;
    EXPECT_EQ(r.error().param, param) << extra;
    EXPECT_NE(r.error().message.find(what), std::string::npos) << r.error().message;
  };
  const std::string tools = R"("tools": [{"type": "function", "function": {"name": "get_weather"}}])";
  err(R"("tools": [{"type": "retrieval"}])", "tools[0].type", "'function'");
  err(R"("tools": [{"type": "function"}])", "tools[0].function", "required");
  err(R"("tools": [{"type": "function", "function": {"name": "a b"}}])", "tools[0].function.name", "1 to 64");
  err(R"("tools": [{"type": "function", "function": {"name": "f", "parameters": []}}])",
      "tools[0].function.parameters", "JSON Schema");
  err(R"("tools": [{"type": "function", "function": {"name": "f"}}, {"type": "function", "function": {"name": "f"}}])",
      "tools[1].function.name", "two tools");
  err(tools + R"(, "tool_choice": "sometimes")", "tool_choice", "'required'");
  err(tools + R"(, "tool_choice": {"type": "function", "function": {"name": "other"}})",
      "tool_choice.function.name", "no tool named 'other'");
  err(R"("tool_choice": "required")", "tool_choice", "needs 'tools'");
  err(tools + R"(, "parallel_tool_calls": "yes")", "parallel_tool_calls", "a boolean");
  auto herr = [](const std::string& call, const std::string& param, const std::string& what) {
    auto r = parse_chat_request(R"({"messages": [{"role": "user", "content": "x"}, {"role": "assistant", "tool_calls": [)" +
                                call + "]}]}");
    ASSERT_FALSE(r.ok()) << call;
    EXPECT_EQ(r.error().param, param) << call;
    EXPECT_NE(r.error().message.find(what), std::string::npos) << r.error().message;
  };
  herr(R"({"id": "c"})", "messages[1].tool_calls[0].function", "required");
  herr(R"({"function": {"arguments": "{}"}})", "messages[1].tool_calls[0].function.name", "name");
  herr(R"({"function": {"name": "f", "arguments": "{not json"}})", "messages[1].tool_calls[0].function.arguments",
       "JSON object encoded as a string");
  herr(R"({"function": {"name": "f", "arguments": 3}})", "messages[1].tool_calls[0].function.arguments",
       "JSON object");
  // An empty tool_calls array is dropped (templates test whether it is defined).
  auto ok = parse_chat_request(R"({"messages": [{"role": "user", "content": "x"}, {"role": "assistant", "content": "y", "tool_calls": []}]})");
  ASSERT_TRUE(ok.ok());
  EXPECT_FALSE(ok->messages[1].contains("tool_calls"));
}

// ---- request: completions prompt ---------------------------------------------------------------

TEST(ServerOpenaiRequest, CompletionPromptForms) {
  OpenAiRequest t = completion_ok(R"({"prompt": "Once upon"})");
  EXPECT_EQ(t.endpoint, Endpoint::kCompletions);
  EXPECT_FALSE(t.prompt_is_tokens);
  EXPECT_EQ(t.prompt_text, "Once upon");
  OpenAiRequest one = completion_ok(R"({"prompt": ["Once"]})");
  EXPECT_FALSE(one.prompt_is_tokens);
  EXPECT_EQ(one.prompt_text, "Once");
  OpenAiRequest ids = completion_ok(R"({"prompt": [1, 2147483647, 0, 5.0]})");
  EXPECT_TRUE(ids.prompt_is_tokens);
  EXPECT_EQ(ids.prompt_token_ids, (std::vector<int32_t>{1, 2147483647, 0, 5}));
  OpenAiRequest nested = completion_ok(R"({"prompt": [[3, 4]]})");
  EXPECT_TRUE(nested.prompt_is_tokens);
  EXPECT_EQ(nested.prompt_token_ids, (std::vector<int32_t>{3, 4}));

  auto err = [](const std::string& prompt, const std::string& param, const std::string& needle) {
    expect_error(parse_completion_request("{\"prompt\": " + prompt + "}"), param, needle, prompt);
  };
  expect_error(parse_completion_request("{}"), "prompt", "required", "missing");
  err("\"\"", "prompt", "must not be empty");
  err("[]", "prompt", "must not be empty");
  err("[\"\"]", "prompt", "must not be empty");
  err("[[]]", "prompt[0]", "must not be empty");
  err(R"(["a", "b"])", "prompt", "batched prompts are not supported");
  err(R"([[1], [2]])", "prompt", "batched prompts are not supported");
  err("5", "prompt", "a string, an array of token ids, or an array with exactly one string");
  err("{}", "prompt", "a string, an array of token ids");
  err("[1, -2]", "prompt[1]", "a token id (an integer >= 0)");
  err("[1, 3000000000]", "prompt[1]", "a token id");
  err("[1, 2.5]", "prompt[1]", "an integer");
  err("[1, \"a\"]", "prompt[1]", "an integer");
  err("[[1, -1]]", "prompt[0][1]", "a token id");
  // Chat fields do not apply; the shared sampling fields do.
  OpenAiRequest s = completion_ok(completion(R"("temperature": 0, "max_tokens": 16, "n": 2)"));
  EXPECT_FLOAT_EQ(s.sampling.temperature, 0.0f);
  EXPECT_EQ(s.max_tokens, 16);
  EXPECT_EQ(s.n, 2);
  EXPECT_TRUE(s.messages.empty());
}

// ---- tokenize / detokenize ---------------------------------------------------------------------

TEST(ServerOpenaiRequest, TokenizeAndDetokenize) {
  auto tok = [](const std::string& body) {
    auto r = parse_tokenize_request(body);
    EXPECT_TRUE(r.ok()) << body;
    return r.ok() ? std::move(r).value() : TokenizeRequest{};
  };
  TokenizeRequest a = tok(R"({"content": "hi"})");
  EXPECT_EQ(a.text, "hi");
  EXPECT_FALSE(a.add_special);                          // llama-server's default
  EXPECT_TRUE(tok(R"({"prompt": "hi"})").add_special);  // vLLM's default
  EXPECT_TRUE(tok(R"({"content": "hi", "add_special": true})").add_special);
  EXPECT_FALSE(tok(R"({"prompt": "hi", "add_special_tokens": false})").add_special);
  EXPECT_EQ(tok(R"({"content": ""})").text, "");
  expect_error(parse_tokenize_request("{}"), "content", "required", "missing");
  expect_error(parse_tokenize_request(R"({"content": 5})"), "content", "a string", "type");
  expect_error(parse_tokenize_request(R"({"prompt": [1]})"), "prompt", "a string", "type");
  expect_error(parse_tokenize_request(R"({"content": "x", "add_special": "yes"})"), "add_special",
               "a boolean", "flag");

  auto d = parse_detokenize_request(R"({"tokens": [1, 2, 0]})");
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->tokens, (std::vector<int32_t>{1, 2, 0}));
  auto empty = parse_detokenize_request(R"({"tokens": []})");
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->tokens.empty());
  expect_error(parse_detokenize_request("{}"), "tokens", "required", "missing");
  expect_error(parse_detokenize_request(R"({"tokens": "1"})"), "tokens", "an array", "type");
  expect_error(parse_detokenize_request(R"({"tokens": [1, -1]})"), "tokens[1]", "a token id",
               "negative");

  EXPECT_EQ(to_body(tokenize_response(std::vector<int32_t>{5, 0, 7})), R"({"tokens":[5,0,7]})");
  EXPECT_EQ(to_body(detokenize_response("a\"b")), R"({"content":"a\"b"})");
}

// ---- responses ---------------------------------------------------------------------------------

// Exact comparison, key order included.
void expect_json(const OJson& got, const std::string& expected) {
  EXPECT_EQ(to_body(got), OJson::parse(expected).dump());
}

ChoiceOutput choice(std::string text, FinishReason reason) {
  ChoiceOutput c;
  c.text = std::move(text);
  c.finish_reason = reason;
  return c;
}

TEST(ServerOpenaiResponse, FinishReasonsAndUsage) {
  EXPECT_EQ(finish_reason_json(FinishReason::kStop), "stop");
  EXPECT_EQ(finish_reason_json(FinishReason::kLength), "length");
  EXPECT_EQ(finish_reason_json(FinishReason::kAborted), "abort");
  EXPECT_TRUE(finish_reason_json(FinishReason::kNone).is_null());
  const RequestUsage samples[] = {{10, 4, 3}, {10, 4, 5}};
  RequestUsage total = total_usage(samples);
  EXPECT_EQ(total.prompt_tokens, 10);
  EXPECT_EQ(total.cached_tokens, 4);
  EXPECT_EQ(total.completion_tokens, 8);
  expect_json(usage_json(total), R"({"prompt_tokens": 10, "completion_tokens": 8,
      "total_tokens": 18, "prompt_tokens_details": {"cached_tokens": 4}})");
  RequestUsage none = total_usage({});
  EXPECT_EQ(none.prompt_tokens + none.cached_tokens + none.completion_tokens, 0);
}

TEST(ServerOpenaiResponse, ChatCompletionWithTwoChoices) {
  ResponseHeader h{"chatcmpl-abc123", 1700000000, "tiny", false};
  const ChoiceOutput choices[] = {choice("Hello \xc3\xa9", FinishReason::kStop),
                                  choice("Hi", FinishReason::kLength)};
  const RequestUsage samples[] = {{12, 8, 2}, {12, 8, 1}};
  expect_json(chat_completion_response(h, choices, total_usage(samples)), R"({
    "id": "chatcmpl-abc123", "object": "chat.completion", "created": 1700000000, "model": "tiny",
    "choices": [
      {"index": 0, "message": {"role": "assistant", "content": "Hello \u00e9", "refusal": null},
       "logprobs": null, "finish_reason": "stop"},
      {"index": 1, "message": {"role": "assistant", "content": "Hi", "refusal": null},
       "logprobs": null, "finish_reason": "length"}],
    "usage": {"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15,
              "prompt_tokens_details": {"cached_tokens": 8}}})");
}

TEST(ServerOpenaiResponse, TextCompletionWithTwoChoices) {
  ResponseHeader h{"cmpl-9f", 1700000001, "tiny", false};
  const ChoiceOutput choices[] = {choice(" there", FinishReason::kLength), choice("", FinishReason::kAborted)};
  expect_json(completion_response(h, choices, RequestUsage{3, 0, 4}), R"({
    "id": "cmpl-9f", "object": "text_completion", "created": 1700000001, "model": "tiny",
    "choices": [
      {"text": " there", "index": 0, "logprobs": null, "finish_reason": "length"},
      {"text": "", "index": 1, "logprobs": null, "finish_reason": "abort"}],
    "usage": {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7,
              "prompt_tokens_details": {"cached_tokens": 0}}})");
}

std::string data(const std::string& json) {
  return "data: " + OJson::parse(json).dump() + "\n\n";
}

TEST(ServerOpenaiResponse, ChatStreamOneChoiceWithUsage) {
  ResponseHeader h{"chatcmpl-s1", 1700000002, "tiny", true};
  RequestId id{};
  std::vector<RequestDelta> deltas(3);
  deltas[0] = {id, 0, {10, 11}, "Hel", FinishReason::kNone, {5, 0, 2}, {}};
  deltas[1] = {id, 0, {12}, "lo", FinishReason::kNone, {5, 0, 3}, {}};
  deltas[2] = {id, 0, {}, "", FinishReason::kStop, {5, 0, 3}, {}};
  std::string out;
  for (size_t i = 0; i < deltas.size(); ++i)
    append_delta_events(h, Endpoint::kChatCompletions, deltas[i], i == 0, &out);
  out += sse_event(usage_chunk(h, Endpoint::kChatCompletions, deltas.back().usage));
  out += sse_done();
  const std::string head =
      R"("id": "chatcmpl-s1", "object": "chat.completion.chunk", "created": 1700000002,)"
      R"( "model": "tiny",)";
  std::string expected;
  expected += data("{" + head +
                   R"( "choices": [{"index": 0, "delta": {"role": "assistant",)"
                   R"( "content": ""}, "logprobs": null, "finish_reason": null}], "usage": null})");
  expected += data("{" + head +
                   R"( "choices": [{"index": 0, "delta": {"content": "Hel"},)"
                   R"( "logprobs": null, "finish_reason": null}], "usage": null})");
  expected += data("{" + head +
                   R"( "choices": [{"index": 0, "delta": {"content": "lo"},)"
                   R"( "logprobs": null, "finish_reason": null}], "usage": null})");
  expected += data("{" + head +
                   R"( "choices": [{"index": 0, "delta": {},)"
                   R"( "logprobs": null, "finish_reason": "stop"}], "usage": null})");
  expected += data("{" + head +
                   R"( "choices": [], "usage": {"prompt_tokens": 5,)"
                   R"( "completion_tokens": 3, "total_tokens": 8,)"
                   R"( "prompt_tokens_details": {"cached_tokens": 0}}})");
  expected += "data: [DONE]\n\n";
  EXPECT_EQ(out, expected);
}

TEST(ServerOpenaiResponse, ToolCallsAndReasoningInTheMessage) {
  ResponseHeader h{"chatcmpl-t", 1700000003, "tiny", false};
  ChoiceOutput call;
  call.finish_reason = FinishReason::kStop;
  call.reasoning = "need weather";
  call.tool_calls = {{"call_abc", "get_weather", R"({"location":"Paris"})"}};
  const ChoiceOutput text = choice("It is sunny.", FinishReason::kLength);
  const ChoiceOutput choices[] = {call, text};
  expect_json(chat_completion_response(h, choices, RequestUsage{3, 0, 9}), R"({
    "id": "chatcmpl-t", "object": "chat.completion", "created": 1700000003, "model": "tiny",
    "choices": [
      {"index": 0, "message": {"role": "assistant", "content": null, "refusal": null,
        "reasoning_content": "need weather",
        "tool_calls": [{"id": "call_abc", "type": "function",
                        "function": {"name": "get_weather", "arguments": "{\"location\":\"Paris\"}"}}]},
       "logprobs": null, "finish_reason": "tool_calls"},
      {"index": 1, "message": {"role": "assistant", "content": "It is sunny.", "refusal": null},
       "logprobs": null, "finish_reason": "length"}],
    "usage": {"prompt_tokens": 3, "completion_tokens": 9, "total_tokens": 12,
              "prompt_tokens_details": {"cached_tokens": 0}}})");
}

TEST(ServerOpenaiResponse, StreamedToolCallsAreOpenAisDeltas) {
  ResponseHeader h{"chatcmpl-st", 1700000004, "tiny", false};
  ChoicePiece p;
  p.parsed = true;
  p.calls_before = 1;  // this choice already sent one call
  p.any_tool_call = true;
  ReplyEvent content;
  content.text = "Checking.";
  ReplyEvent call;
  call.kind = ReplyEvent::Kind::kToolCall;
  call.call = {"call_x", "add", R"({"a":1})"};
  ReplyEvent thought;
  thought.kind = ReplyEvent::Kind::kReasoning;
  thought.text = "hm";
  p.events = {thought, content, call};
  p.finish_reason = FinishReason::kStop;
  std::string out;
  append_piece_events(h, Endpoint::kChatCompletions, p, false, &out);
  const std::string head =
      R"("id": "chatcmpl-st", "object": "chat.completion.chunk", "created": 1700000004, "model": "tiny",)";
  auto chunk = [&](const std::string& delta, const std::string& finish) {
    return data("{" + head + R"( "choices": [{"index": 0, "delta": )" + delta +
                R"(, "logprobs": null, "finish_reason": )" + finish + "}]}");
  };
  std::string expected = chunk(R"({"reasoning_content": "hm"})", "null");
  expected += chunk(R"({"content": "Checking."})", "null");
  expected += chunk(R"({"tool_calls": [{"index": 1, "id": "call_x", "type": "function",)"
                    R"( "function": {"name": "add", "arguments": ""}}]})", "null");
  expected += chunk(R"({"tool_calls": [{"index": 1, "function": {"arguments": "{\"a\":1}"}}]})", "null");
  expected += chunk("{}", R"("tool_calls")");
  EXPECT_EQ(out, expected);
  // A reply without calls still finishes "stop"; length stays "length".
  ChoicePiece plain;
  plain.parsed = true;
  plain.finish_reason = FinishReason::kLength;
  plain.any_tool_call = true;
  out.clear();
  append_piece_events(h, Endpoint::kChatCompletions, plain, false, &out);
  EXPECT_EQ(out, chunk("{}", R"("length")"));
}

TEST(ServerOpenaiResponse, StreamWithoutUsageAndCompletionChunks) {
  ResponseHeader h{"cmpl-s2", 7, "m", false};
  OJson c = chat_chunk_content(h, 1, "x");
  EXPECT_FALSE(c.contains("usage"));
  EXPECT_EQ(c["choices"][0]["index"], 1);
  RequestDelta d{RequestId{}, 1, {3}, "ab", FinishReason::kLength, {2, 1, 1}, {}};
  std::string out;
  append_delta_events(h, Endpoint::kCompletions, d, true, &out);
  EXPECT_EQ(out, data(R"({"id": "cmpl-s2", "object": "text_completion", "created": 7,
      "model": "m", "choices": [{"text": "ab", "index": 1, "logprobs": null,
      "finish_reason": "length"}]})"));
  // Nothing to say: no event.
  RequestDelta quiet{RequestId{}, 0, {}, "", FinishReason::kNone, {}, {}};
  std::string none;
  append_delta_events(h, Endpoint::kCompletions, quiet, false, &none);
  append_delta_events(h, Endpoint::kChatCompletions, quiet, false, &none);
  EXPECT_EQ(none, "");
  h.include_usage = true;
  expect_json(usage_chunk(h, Endpoint::kCompletions, {2, 1, 1}), R"({"id": "cmpl-s2",
      "object": "text_completion", "created": 7, "model": "m", "choices": [],
      "usage": {"prompt_tokens": 2, "completion_tokens": 1, "total_tokens": 3,
      "prompt_tokens_details": {"cached_tokens": 1}}})");
}

TEST(ServerOpenaiResponse, SerializationNeverThrows) {
  ResponseHeader h{"chatcmpl-x", 0, "m", false};
  std::string s;
  EXPECT_NO_THROW(s = sse_event(chat_chunk_content(h, 0, "bad \xff byte")));
  EXPECT_TRUE(is_valid_utf8(s));
  EXPECT_EQ(s.rfind("data: {", 0), 0u);
  EXPECT_EQ(s.substr(s.size() - 2), "\n\n");
  EXPECT_EQ(sse_done(), "data: [DONE]\n\n");
}

// ---- errors ------------------------------------------------------------------------------------

TEST(ServerOpenaiError, JsonShape) {
  ApiError e = ApiError::invalid_request("top_p", "bad top_p");
  EXPECT_EQ(e.http_status, 400);
  expect_json(api_error_json(e), R"({"error": {"message": "bad top_p",
      "type": "invalid_request_error", "param": "top_p", "code": null}})");
  ApiError nf = ApiError::not_found("The model 'x' does not exist", "model");
  nf.code = "model_not_found";
  EXPECT_EQ(nf.http_status, 404);
  EXPECT_EQ(api_error_body(nf), OJson::parse(R"({"error": {"message":
      "The model 'x' does not exist", "type": "not_found_error", "param": "model",
      "code": "model_not_found"}})")
                                    .dump());
  ApiError se = ApiError::server_error("engine stopped");
  EXPECT_EQ(se.http_status, 500);
  expect_json(api_error_json(se), R"({"error": {"message": "engine stopped",
      "type": "server_error", "param": null, "code": null}})");
  ApiError bad = ApiError::invalid_request("", std::string("x\xff"));
  EXPECT_TRUE(is_valid_utf8(api_error_body(bad)));
}

TEST(ServerOpenaiError, ParserErrorsSerialize) {
  auto r = parse_chat_request(chat(R"("temperature": 3)"));
  ASSERT_FALSE(r.ok());
  OJson j = OJson::parse(api_error_body(r.error()));
  EXPECT_EQ(j["error"]["param"], "temperature");
  EXPECT_EQ(j["error"]["type"], "invalid_request_error");
  EXPECT_TRUE(j["error"]["code"].is_null());
  EXPECT_NE(j["error"]["message"].get<std::string>().find("[0, 2]"), std::string::npos);
}

}  // namespace
}  // namespace hinge::server
