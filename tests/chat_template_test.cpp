// Chat template renderer (chat/chat_template.h): small templates with known jinja2 output,
// hostile inputs, and every template of ../shared/chat-templates rendered over
// tests/data/chat_conversations.json, compared byte for byte with Python jinja2 set up as
// Hugging Face transformers does (scripts/render-chat-template.py; skipped without python3-jinja2).
#include "chat/chat_template.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "chat_template_cases.h"
#include "test_util.h"

namespace hinge {
namespace {

using json = nlohmann::ordered_json;

StatusOr<std::string> render(const std::string& src, const json& ctx = json::object(),
                             const ChatTemplateLimits& limits = {}) {
  auto t = ChatTemplate::parse(src);
  if (!t.ok()) return t.status();
  return t->render(ctx, limits);
}

std::string render_ok(const std::string& src, const json& ctx = json::object()) {
  auto r = render(src, ctx);
  EXPECT_TRUE(r.ok()) << src << "\n-> " << r.status().message();
  return r.ok() ? *r : std::string("<error>");
}

TEST(ChatTemplateJinja, SmallTemplatesRenderAsJinja2) {
  for (const auto& c : testing::kChatTemplateCases) {
    EXPECT_EQ(render_ok(c.tmpl, json::parse(c.ctx)), c.want) << c.tmpl;
  }
}

TEST(ChatTemplateJinja, RuntimeErrors) {
  const char* kErrors[] = {
      "{{ raise_exception('boom') }}",
      "{{ undefined_var.attr }}",
      "{{ xs[0]['role'] }}",  // xs = [] -> xs[0] undefined -> ['role'] fails
      "{{ 'a' + 1 }}",
      "{{ 'a' + u }}",
      "{{ nofn() }}",
      "{{ 1 // 0 }}",
      "{{ x|tojson }}",  // undefined is not JSON serializable
      "{{ [1]|map('upper')|tojson }}",  // a generator is not JSON serializable
      "{{ [1]|nosuchfilter }}",
      "{{ 1 is nosuchtest }}",
      "{% for x in 5 %}{% endfor %}",
      "{% set y = none %}{% set y.a = 1 %}",
      "{{ {}.pop('a') }}",
      "{{ 9223372036854775807 + 1 }}",  // hinge only: int64 overflow (Python has bigints)
  };
  for (const char* t : kErrors) {
    auto r = render(t, json::parse(R"({"xs": []})"));
    EXPECT_FALSE(r.ok()) << t << " rendered " << (r.ok() ? *r : "");
  }
  auto r = render("{{ raise_exception('System role not supported') }}");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("System role not supported"), std::string::npos);
}

TEST(ChatTemplateJinja, ParseErrorsNameLineAndColumn) {
  struct {
    const char* tmpl;
    const char* where;
  } kCases[] = {
      {"ok\n{% if x %}\nno end", "expected {% 'elif' or 'else' or 'endif' %}"},
      {"a\n  {{ 1 + }}", "line 2, column 10"},
      {"{{ 'unterminated }}", "line 1, column 4: unterminated string"},
      {"{% for x in %}{% endfor %}", "line 1, column 13"},
      {"x\ny {# open comment", "line 2, column 3: missing end of comment"},
      {"{{ x ", "expected '}}'"},
      {"{% include 'x' %}", "unsupported tag 'include'"},
      {"{{ (1 }}", "line 1"},
      {"{% endif %}", "unsupported tag 'endif'"},
  };
  for (const auto& c : kCases) {
    auto t = ChatTemplate::parse(c.tmpl);
    ASSERT_FALSE(t.ok()) << c.tmpl;
    EXPECT_NE(t.status().message().find(c.where), std::string::npos)
        << c.tmpl << " -> " << t.status().message();
  }
}

TEST(ChatTemplateJinja, HostileTemplatesFailCleanly) {
  std::string deep = std::string(5000, '(') + "1" + std::string(5000, ')');
  EXPECT_FALSE(render("{{ " + deep + " }}").ok());
  std::string nested;
  for (int i = 0; i < 3000; ++i) nested += "{% if true %}";
  EXPECT_FALSE(render(nested).ok());
  std::string deep_list = std::string(3000, '[') + std::string(3000, ']');
  EXPECT_FALSE(render("{{ " + deep_list + " }}").ok());
  EXPECT_FALSE(render("{% for i in range(10**9) %}x{% endfor %}").ok());
  ChatTemplateLimits small;
  small.max_loop_iterations = 5000;
  small.max_output_bytes = 1 << 16;
  EXPECT_FALSE(
      render("{% for i in range(1000) %}{% for j in range(1000) %}{% endfor %}{% endfor %}", {},
             small).ok());
  EXPECT_FALSE(render("{{ 'x' * 100000000 }}", {}, small).ok());
  EXPECT_FALSE(render("{% for i in range(100) %}{{ 'y' * 1000 }}{% endfor %}", {}, small).ok());
  EXPECT_FALSE(
      render("{% set ns = namespace(s='ab') %}{% for i in range(40) %}{% set ns.s = ns.s + ns.s "
             "%}{% endfor %}",
             {}, small).ok());
  EXPECT_FALSE(render("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}").ok());
  EXPECT_FALSE(render("{% set ns = namespace() %}{% set ns.me = ns %}{{ ns }}").ok());
  for (const char* t : {"{{", "{%", "{#", "{{ x", "{% if", "{% for x in y %}", "{{ 'a", "{{ ]",
                        "{% macro %}", "{{ x.}}", "{{ x[ }}", "{% set %}", "{{ {1: }}"}) {
    EXPECT_FALSE(ChatTemplate::parse(t).ok()) << t;
  }
}

}  // namespace
}  // namespace hinge
