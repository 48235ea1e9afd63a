// chat/reply_parser.h: replies in each family's tool-call syntax become content, reasoning and
// OpenAI-shaped calls; a stream fed in any pieces gives what the whole reply gives; malformed
// calls degrade to content; the template picks the format (chat/tool_format.h).
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "chat/reply_parser.h"
#include "chat/tool_call_syntax.h"
#include "chat/tool_format.h"
#include "chat/tool_grammar.h"
#include "grammar/matcher.h"
#include "chat_test_util.h"
#include "test_util.h"

namespace hinge {
namespace {

ParsedReply whole(ToolFormat f, std::string_view text, bool reasoning_open = false) {
  return parse_reply({.format = f, .reasoning_open = reasoning_open, .id_seed = 42}, text);
}

// The same reply fed in pieces of random sizes (one byte at a time included).
ParsedReply streamed(ToolFormat f, std::string_view text, uint64_t seed, bool reasoning_open = false) {
  return testing::parse_in_pieces({.format = f, .reasoning_open = reasoning_open, .id_seed = 42}, text, seed);
}

void expect_same(const ParsedReply& a, const ParsedReply& b, const std::string& what) {
  EXPECT_EQ(a.content, b.content) << what;
  EXPECT_EQ(a.reasoning_content, b.reasoning_content) << what;
  ASSERT_EQ(a.tool_calls.size(), b.tool_calls.size()) << what;
  for (size_t i = 0; i < a.tool_calls.size(); ++i) {
    EXPECT_EQ(a.tool_calls[i].name, b.tool_calls[i].name) << what;
    EXPECT_EQ(a.tool_calls[i].arguments, b.tool_calls[i].arguments) << what;
    EXPECT_EQ(a.tool_calls[i].id, b.tool_calls[i].id) << what;
  }
}

struct Case {
  Case(ToolFormat f, std::string t, std::string c, std::vector<std::pair<std::string, std::string>> k,
       std::string r = "", bool open = false)
      : format(f), text(std::move(t)), content(std::move(c)), calls(std::move(k)), reasoning(std::move(r)),
        reasoning_open(open) {}
  ToolFormat format;
  std::string text;
  std::string content;
  std::vector<std::pair<std::string, std::string>> calls;  // name, arguments
  std::string reasoning;
  bool reasoning_open = false;
};

std::vector<Case> cases() {
  using F = ToolFormat;
  return {
      {F::kHermes, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"location\": \"Paris\"}}\n</tool_call>",
       "", {{"get_weather", R"({"location":"Paris"})"}}},
      {F::kHermes,
       "Let me check.\n<tool_call>\n{\"name\": \"a\", \"arguments\": {\"x\": 1}}\n</tool_call>\n"
       "<tool_call>\n{\"name\": \"b\", \"arguments\": {\"s\": \"<tool_call> \\\"q\\\" é\"}}\n</tool_call>",
       "Let me check.", {{"a", R"({"x":1})"}, {"b", R"({"s":"<tool_call> \"q\" é"})"}}},
      {F::kHermes, "<tool_call>\n{\"name\": \"a\", \"arguments\": {\"x\": 1}\n", "<tool_call>\n{\"name\": \"a\", \"arguments\": {\"x\": 1}", {}},
      {F::kHermes, "Just text, no call.", "Just text, no call.", {}},
      {F::kLlama3Json, R"({"name": "get_weather", "parameters": {"location": "Paris"}})", "",
       {{"get_weather", R"({"location":"Paris"})"}}},
      {F::kLlama3Json, R"(<|python_tag|>{"name": "a", "parameters": {}}; {"name": "b", "parameters": {"k": [1, 2]}})", "",
       {{"a", "{}"}, {"b", R"({"k":[1,2]})"}}},
      {F::kLlama3Json, "<|python_tag|>brave_search.call(query=\"hinge \\\"kv\\\"\", n=3)", "",
       {{"brave_search", R"({"query":"hinge \"kv\"","n":3})"}}},
      {F::kLlama3Json, R"({"answer": 42})", R"({"answer": 42})", {}},
      {F::kLlama3Json, "The weather is {unknown}.", "The weather is {unknown}.", {}},
      {F::kMistral, R"([TOOL_CALLS][{"name": "add", "arguments": {"a": 1, "b": 2}, "id": "abcDEF123"}])", "",
       {{"add", R"({"a":1,"b":2})"}}},
      {F::kMistral, R"([TOOL_CALLS]add[ARGS]{"a": 1, "b": 2})", "", {{"add", R"({"a":1,"b":2})"}}},
      {F::kFunctionaryV31, R"(Sure. <function=search>{"query": "kv cache"}</function>)", "Sure.",
       {{"search", R"({"query":"kv cache"})"}}},
      {F::kFunctionaryV31, "<|python_tag|>print(1 + 1)", "", {{"python", R"j({"code":"print(1 + 1)"})j"}}},
      {F::kFunctionaryV32, "all\nI will look it up.>>>search\n{\"query\": \"kv\"}>>>add\n{\"a\": 1, \"b\": 2}",
       "I will look it up.", {{"search", R"({"query":"kv"})"}, {"add", R"({"a":1,"b":2})"}}},
      {F::kFunctionaryV32, "search\n{\"query\": \"kv\"}", "", {{"search", R"({"query":"kv"})"}}},
      {F::kFunctionaryV32, "Hello there, no recipient", "Hello there, no recipient", {}},
      {F::kCommandR7b,
       "<|START_THINKING|>I need the weather.<|END_THINKING|><|START_ACTION|>[\n    {\"tool_call_id\": \"0\", "
       "\"tool_name\": \"get_weather\", \"parameters\": {\"location\": \"Paris\"}}\n]<|END_ACTION|>",
       "", {{"get_weather", R"({"location":"Paris"})"}}, "I need the weather."},
      {F::kCommandR7b, "<|START_RESPONSE|>It is sunny.<|END_RESPONSE|>", "It is sunny.", {}},
      {F::kCommandRPlus, "Action: ```json\n[{\"tool_name\": \"search\", \"parameters\": {\"query\": \"kv\"}}]\n```",
       "", {{"search", R"({"query":"kv"})"}}},
      {F::kFirefunctionV2, R"( functools[{"name": "a", "arguments": {"x": 1}}, {"name": "b", "arguments": {}}])", "",
       {{"a", R"({"x":1})"}, {"b", "{}"}}},
      {F::kDeepSeekR1, "Thinking about it.</think>\n\nThe answer is 4.", "The answer is 4.", {}, "Thinking about it.", true},
      {F::kDeepSeekR1,
       "<think>\nweather needed\n</think>\n\n<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n"
       "```json\n{\"location\": \"Paris\"}\n```<｜tool▁call▁end｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>add\n"
       "```json\n{\"a\": 1, \"b\": 2}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
       "", {{"get_weather", R"({"location":"Paris"})"}, {"add", R"({"a":1,"b":2})"}}, "weather needed"},
  };
}

TEST(ChatReplyParser, EachFamilysCallsContentAndReasoning) {
  for (const Case& c : cases()) {
    const std::string what = std::string(tool_format_name(c.format)) + ": " + c.text;
    const ParsedReply r = whole(c.format, c.text, c.reasoning_open);
    EXPECT_EQ(r.content, c.content) << what;
    EXPECT_EQ(r.reasoning_content, c.reasoning) << what;
    ASSERT_EQ(r.tool_calls.size(), c.calls.size()) << what;
    for (size_t i = 0; i < c.calls.size(); ++i) {
      EXPECT_EQ(r.tool_calls[i].name, c.calls[i].first) << what;
      EXPECT_EQ(r.tool_calls[i].arguments, c.calls[i].second) << what;
      EXPECT_TRUE(nlohmann::json::parse(r.tool_calls[i].arguments).is_object()) << what;
      if (c.format == ToolFormat::kMistral) EXPECT_EQ(r.tool_calls[i].id.size(), 9u) << what;
      else EXPECT_EQ(r.tool_calls[i].id.rfind("call_", 0), 0u) << what;
    }
  }
}

TEST(ChatReplyParser, AStreamInAnyPiecesGivesTheWholeReply) {
  for (const Case& c : cases())
    for (uint64_t seed = 0; seed < 20; ++seed)
      expect_same(streamed(c.format, c.text, seed, c.reasoning_open), whole(c.format, c.text, c.reasoning_open),
                  std::string(tool_format_name(c.format)) + " seed " + std::to_string(seed) + ": " + c.text);
}

TEST(ChatReplyParser, NoHalfCallIsEverSentAsContent) {
  // Fed a byte at a time, no content event before the call holds a byte of its markup.
  const std::string text = "Checking.\n<tool_call>\n{\"name\": \"a\", \"arguments\": {\"x\": \"<\"}}\n</tool_call>";
  ReplyParser p({.format = ToolFormat::kHermes});
  std::vector<ReplyEvent> events;
  for (char ch : text) p.feed(std::string_view(&ch, 1), &events);
  p.finish(&events);
  ASSERT_GE(events.size(), 2u);
  std::string content;
  for (size_t i = 0; i + 1 < events.size(); ++i) {
    EXPECT_EQ(events[i].kind, ReplyEvent::Kind::kContent);
    content += events[i].text;
  }
  EXPECT_EQ(content, "Checking.");  // sent as it came, the markup never
  EXPECT_EQ(events.back().kind, ReplyEvent::Kind::kToolCall);
  EXPECT_EQ(events.back().call.arguments, R"({"x":"<"})");
  EXPECT_EQ(p.num_tool_calls(), 1);
}

TEST(ChatReplyParser, ToolsOffLeavesTheSyntaxAsText) {
  const std::string text = "<tool_call>\n{\"name\": \"a\", \"arguments\": {}}\n</tool_call>";
  const ParsedReply r = parse_reply({.format = ToolFormat::kHermes, .parse_tools = false}, text);
  EXPECT_EQ(r.content, text);
  EXPECT_TRUE(r.tool_calls.empty());
  // Reasoning is still split off.
  const ParsedReply d =
      parse_reply({.format = ToolFormat::kDeepSeekR1, .parse_tools = false}, "<think>hm</think>ok");
  EXPECT_EQ(d.reasoning_content, "hm");
  EXPECT_EQ(d.content, "ok");
}

TEST(ChatReplyParser, HostileTextNeverCrashesAndKeepsItsBytes) {
  std::mt19937_64 rng(5);
  const std::vector<std::string> atoms = {"<tool_call>", "</tool_call>", "{", "}", "[", "]", "\"", "\\",
                                          "name", ":", ",", "<think>", "</think>", ">>>", "all\n",
                                          "[TOOL_CALLS]", "[ARGS]", "<|python_tag|>", ".call(", ")",
                                          "functools[", "<function=", ">", "x", " ", "\n", "é",
                                          "<｜tool▁calls▁begin｜>", "<｜tool▁sep｜>", "```json"};
  for (int round = 0; round < 300; ++round) {
    std::string text;
    const int n = std::uniform_int_distribution<int>(0, 40)(rng);
    for (int i = 0; i < n; ++i) text += atoms[rng() % atoms.size()];
    for (int f = 0; f <= static_cast<int>(ToolFormat::kDeepSeekR1); ++f) {
      const auto format = static_cast<ToolFormat>(f);
      const ParsedReply a = whole(format, text);
      expect_same(streamed(format, text, static_cast<uint64_t>(round) + 1), a, text);
      for (const ToolCall& c : a.tool_calls) EXPECT_TRUE(nlohmann::json::parse(c.arguments).is_object());
    }
  }
}

TEST(ChatToolFormat, TheSharedTemplatesPickTheirFamilysFormat) {
  const std::vector<std::pair<std::string, ToolFormat>> expected = {
      {"CohereForAI-c4ai-command-r-plus-tool_use.jinja", ToolFormat::kCommandRPlus},
      {"CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja", ToolFormat::kCommandR7b},
      {"NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja", ToolFormat::kHermes},
      {"NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja", ToolFormat::kHermes},
      {"Qwen-Qwen2.5-7B-Instruct.jinja", ToolFormat::kHermes},
      {"deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja", ToolFormat::kDeepSeekR1},
      {"deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja", ToolFormat::kDeepSeekR1},
      {"llama-cpp-deepseek-r1.jinja", ToolFormat::kDeepSeekR1},
      {"fireworks-ai-llama-3-firefunction-v2.jinja", ToolFormat::kFirefunctionV2},
      {"google-gemma-2-2b-it.jinja", ToolFormat::kNone},
      {"meetkai-functionary-medium-v3.1.jinja", ToolFormat::kFunctionaryV31},
      {"meetkai-functionary-medium-v3.2.jinja", ToolFormat::kFunctionaryV32},
      {"meta-llama-Llama-3.1-8B-Instruct.jinja", ToolFormat::kLlama3Json},
      {"meta-llama-Llama-3.2-3B-Instruct.jinja", ToolFormat::kLlama3Json},
      {"meta-llama-Llama-3.3-70B-Instruct.jinja", ToolFormat::kLlama3Json},
      {"microsoft-Phi-3.5-mini-instruct.jinja", ToolFormat::kNone},
      {"mistralai-Mistral-Nemo-Instruct-2407.jinja", ToolFormat::kMistral},
  };
  for (const auto& [file, format] : expected) {
    const std::string src = testing::read_file(testing::shared_path("chat-templates/" + file));
    ASSERT_FALSE(src.empty()) << file;
    EXPECT_EQ(detect_tool_format(src), format) << file << ": " << tool_format_name(detect_tool_format(src));
  }
  for (int f = 0; f <= static_cast<int>(ToolFormat::kDeepSeekR1); ++f) {
    const auto format = static_cast<ToolFormat>(f);
    EXPECT_EQ(tool_format_from_name(tool_format_name(format)), format);
  }
  EXPECT_FALSE(tool_format_from_name("hermes2"));
}

// tool_choice required: the grammar of one call, or of several with parallel_tool_calls, and its
// text parses back into those calls.
TEST(ChatToolGrammar, OneCallOrSeveralAndTheParserReadsThem) {
  const auto tools = nlohmann::ordered_json::parse(R"([
    {"type": "function", "function": {"name": "add", "parameters": {"type": "object",
      "properties": {"a": {"type": "integer"}}, "required": ["a"]}}},
    {"type": "function", "function": {"name": "ping"}}])");
  const std::string one = "<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 3}}\n</tool_call>";
  const std::string two = one + "\n<tool_call>\n{\"name\": \"ping\", \"arguments\": {\"x\": [1]}}\n</tool_call>";
  auto run = [&](bool parallel, const std::string& only, const std::string& text) {
    auto gbnf = tool_call_gbnf(ToolFormat::kHermes, tools, only, parallel, false);
    EXPECT_TRUE(gbnf.ok()) << gbnf.status().message();
    auto g = grammar::Grammar::parse(*gbnf);
    EXPECT_TRUE(g.ok()) << g.status().message() << "\n" << *gbnf;
    grammar::Matcher m(std::make_shared<const grammar::Grammar>(std::move(g).value()));
    return m.accept(text) && m.can_end();
  };
  EXPECT_TRUE(run(false, "", one));
  EXPECT_FALSE(run(false, "", two));   // one call only
  EXPECT_TRUE(run(true, "", two));
  EXPECT_FALSE(run(true, "ping", one));  // the named function only
  EXPECT_FALSE(run(false, "", "Sure. " + one));  // calls, no text
  const ParsedReply r = whole(ToolFormat::kHermes, two);
  ASSERT_EQ(r.tool_calls.size(), 2u);
  EXPECT_EQ(r.tool_calls[1].arguments, R"({"x":[1]})");
  // A schema outside the subset is an error naming the tool.
  auto bad = tool_call_gbnf(ToolFormat::kHermes, nlohmann::ordered_json::parse(R"([{"type": "function",
      "function": {"name": "f", "parameters": {"type": "string", "pattern": "a"}}}])"), "", true, false);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("tools[0]"), std::string::npos);
  EXPECT_FALSE(tool_call_gbnf(ToolFormat::kNone, tools, "", true, false).ok());
}

TEST(ChatToolSyntax, JsonScanFindsTheEndOutsideStrings) {
  using tool_syntax::Scan;
  size_t end = 0;
  const std::string text = R"({"a": "}{", "b": [1, {"c": "\"]"}]} tail)";
  EXPECT_EQ(tool_syntax::scan_json(text, 0, false, &end), Scan::kDone);
  EXPECT_EQ(end, text.find(" tail"));
  EXPECT_EQ(tool_syntax::scan_json(R"({"a": [1, 2)", 0, false, &end), Scan::kNeedMore);
  EXPECT_EQ(tool_syntax::scan_json(R"({"a": [1, 2)", 0, true, &end), Scan::kBad);
  EXPECT_EQ(tool_syntax::scan_json(R"({"a": [1, 2})", 0, false, &end), Scan::kBad);
  EXPECT_EQ(tool_syntax::scan_json("x{}", 0, false, &end), Scan::kBad);
  EXPECT_EQ(tool_syntax::scan_json(std::string(100, '['), 0, false, &end), Scan::kBad);  // too deep
}

}  // namespace
}  // namespace hinge
