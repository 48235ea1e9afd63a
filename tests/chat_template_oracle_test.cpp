// Chat templates rendered by hinge vs Python jinja2 (scripts/render-chat-template.py, set up as
// Hugging Face transformers): every template of ../shared/chat-templates over every
// conversation of tests/data/chat_conversations.json must give the same bytes, or both fail.
// Skipped (with a message) when python3 or python3-jinja2 is missing.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "chat_template_cases.h"
#include "test_util.h"
#include "chat/chat_template.h"

namespace hinge {
namespace {

using json = nlohmann::ordered_json;

struct Conversation {
  std::string name;
  json context;
};

std::vector<Conversation> load_conversations() {
  json d = json::parse(
      testing::read_file(testing::source_dir() + "/tests/data/chat_conversations.json"));
  std::vector<Conversation> out;
  for (const auto& c : d["conversations"]) {
    json ctx = d["defaults"];
    for (const auto& [k, v] : c.items()) {
      if (k == "name") continue;
      ctx[k] = (k == "tools" && v.is_string()) ? d["tool_sets"][v.get<std::string>()] : v;
    }
    out.push_back({c["name"].get<std::string>(), ctx});
  }
  return out;
}

// Runs the oracle on one job; returns false (and sets *skip) when python3-jinja2 is missing.
bool run_oracle(const json& job, json* results, std::string* skip) {
  std::string dir = testing::temp_dir();
  std::string path = dir + "/job.json";
  std::ofstream(path) << job.dump();
  std::string cmd = "/usr/bin/python3 '" + testing::source_dir() +
                    "/scripts/render-chat-template.py' '" + path + "' 2>/dev/null";
  testing::CommandResult r = testing::run_command(cmd);
  std::filesystem::remove_all(dir);
  if (r.exit_code == 3 || r.exit_code == 127) {
    *skip = "python3 with jinja2 is needed for the oracle: apt-get install python3-jinja2";
    return false;
  }
  if (r.exit_code != 0) {
    *skip = "oracle failed (exit " + std::to_string(r.exit_code) + ")";
    return false;
  }
  *results = json::parse(r.out);
  return true;
}

std::string first_difference(const std::string& a, const std::string& b) {
  size_t k = 0;
  while (k < a.size() && k < b.size() && a[k] == b[k]) ++k;
  size_t from = k > 40 ? k - 40 : 0;
  return "at byte " + std::to_string(k) + "\n  hinge: ..." + json(a.substr(from, 120)).dump() +
         "\n  jinja2: ..." + json(b.substr(from, 120)).dump();
}

TEST(ChatTemplateOracle, SharedTemplatesMatchJinja2) {
  std::string dir = testing::shared_path("chat-templates");
  if (!std::filesystem::is_directory(dir)) GTEST_SKIP() << dir << " is missing";
  std::vector<std::string> templates;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (e.path().extension() == ".jinja") templates.push_back(e.path().string());
  }
  std::sort(templates.begin(), templates.end());
  ASSERT_FALSE(templates.empty());
  std::vector<Conversation> convs = load_conversations();
  json contexts = json::array();
  for (const auto& c : convs) contexts.push_back(c.context);

  json jobs = json::array();
  for (const std::string& path : templates) {
    jobs.push_back({{"template_path", path}, {"contexts", contexts}});
  }
  json all_results;
  std::string skip;
  if (!run_oracle(json{{"jobs", jobs}}, &all_results, &skip)) GTEST_SKIP() << skip;
  ASSERT_EQ(all_results.size(), templates.size());
  int compared = 0, both_failed = 0;
  for (size_t t = 0; t < templates.size(); ++t) {
    const std::string& path = templates[t];
    SCOPED_TRACE(path);
    const json& results = all_results[t];
    ASSERT_EQ(results.size(), convs.size());
    auto tmpl = ChatTemplate::parse(testing::read_file(path));
    ASSERT_TRUE(tmpl.ok()) << tmpl.status().message();
    for (size_t k = 0; k < convs.size(); ++k) {
      SCOPED_TRACE(convs[k].name);
      auto got = tmpl->render(convs[k].context);
      const json& want = results[k];
      if (!want["ok"].get<bool>()) {
        EXPECT_FALSE(got.ok()) << "jinja2 failed (" << want["error"].get<std::string>()
                               << ") but hinge rendered " << json(got.ok() ? *got : "").dump();
        ++both_failed;
        continue;
      }
      ASSERT_TRUE(got.ok()) << got.status().message();
      const std::string text = want["text"].get<std::string>();
      EXPECT_TRUE(*got == text) << first_difference(*got, text);
      ++compared;
    }
  }
  std::printf("compared %d renders byte for byte, %d rejected by both\n", compared, both_failed);
}

// The small unit-test templates, checked against the oracle too (so their expected strings are
// jinja2's, not ours).
TEST(ChatTemplateOracle, EdgeCasesMatchJinja2) {
  const char* kTemplates[] = {
      "{% for m in messages %}{{ m.content|trim }}\n{% endfor %}{{ messages|tojson(indent=3) }}",
      "{{ messages[0].content.split(' ') }}{{ messages|map(attribute='role')|unique|list }}",
      "{{ messages|selectattr('role', 'eq', 'user')|list|length }}{{ messages[-1] }}",
      "{% set ns = namespace(parts=[]) %}{% for m in messages %}{% set ns.parts = ns.parts + "
      "[m.role|upper] %}{% endfor %}{{ ns.parts|join('|') }}{{ ns.parts|tojson }}",
      "  {%- for m in messages -%}\n   {{ loop.index }}: {{ m['content'] }}  \n{% endfor %}\n",
      "{%- for m in messages %}\n  {%- if m.role == 'user' %}\n    U{{ m.content }}\n  {%- else "
      "%}\n    A\n  {% endif %}\n{% endfor %}",
      "{{ (messages|last).content[::2] }}{{ messages|length is even }}{{ 'é' < 'z' }}{{ x|string "
      "}}{{ messages[0] is mapping }}",
  };
  json ctx = {{"messages",
               {{{"role", "user"}, {"content", "  Hello the 'wide' world  "}},
                {{"role", "assistant"}, {"content", "é ü \"q\"\n\ttab"}},
                {{"role", "user"}, {"content", "x"}}}}};
  json jobs = json::array();
  for (const char* t : kTemplates) {
    jobs.push_back({{"template", t}, {"contexts", json::array({ctx})}});
  }
  json results;
  std::string skip;
  if (!run_oracle(json{{"jobs", jobs}}, &results, &skip)) GTEST_SKIP() << skip;
  ASSERT_EQ(results.size(), jobs.size());
  for (size_t k = 0; k < jobs.size(); ++k) {
    SCOPED_TRACE(kTemplates[k]);
    const json& want = results[k][0];
    auto tmpl = ChatTemplate::parse(kTemplates[k]);
    ASSERT_TRUE(tmpl.ok()) << tmpl.status().message();
    auto got = tmpl->render(ctx);
    ASSERT_TRUE(want["ok"].get<bool>()) << want["error"];
    ASSERT_TRUE(got.ok()) << got.status().message();
    EXPECT_EQ(*got, want["text"].get<std::string>());
  }
}

TEST(ChatTemplateOracle, UnitCaseExpectationsAreJinja2s) {
  json jobs = json::array();
  for (const auto& c : testing::kChatTemplateCases) {
    jobs.push_back({{"template", c.tmpl}, {"contexts", json::array({json::parse(c.ctx)})}});
  }
  json results;
  std::string skip;
  if (!run_oracle(json{{"jobs", jobs}}, &results, &skip)) GTEST_SKIP() << skip;
  ASSERT_EQ(results.size(), jobs.size());
  size_t k = 0;
  for (const auto& c : testing::kChatTemplateCases) {
    SCOPED_TRACE(c.tmpl);
    const json& r = results[k++][0];
    ASSERT_TRUE(r["ok"].get<bool>()) << r["error"];
    EXPECT_EQ(r["text"].get<std::string>(), c.want);
  }
}

}  // namespace
}  // namespace hinge
