// grammar/: GBNF parsing and its errors, the pushdown matcher (text, UTF-8 split across
// tokens, the end), vocabulary masks through the token trie against a brute-force check, and
// JSON schemas: random walks through the masks always end in JSON that parses and has what the
// schema requires; unsupported keywords are errors naming them.
#include <gtest/gtest.h>

#include <random>
#include <regex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "grammar/grammar.h"
#include "grammar/json_schema.h"
#include "grammar/matcher.h"
#include "grammar/regex.h"

namespace hinge::grammar {
namespace {

std::shared_ptr<const Grammar> compile(const std::string& gbnf) {
  auto g = Grammar::parse(gbnf);
  EXPECT_TRUE(g.ok()) << g.status().message() << "\n" << gbnf;
  if (!g.ok()) return nullptr;
  return std::make_shared<const Grammar>(std::move(g).value());
}

bool matches(const std::string& gbnf, const std::string& text) {
  auto g = compile(gbnf);
  if (!g) return false;
  Matcher m(g);
  return m.accept(text) && m.can_end();
}

TEST(Grammar, ParsesGbnfAndMatchesItsLanguage) {
  const std::string g = R"(# a comment
root ::= "{" ws pair ("," ws pair)* "}"
pair ::= key ":" ws ("true" | "false" | num)
key  ::= [a-z]+
num  ::= "-"? [0-9]{1,3}
ws   ::= [ \t\n]*
)";
  EXPECT_TRUE(matches(g, "{a:true}"));
  EXPECT_TRUE(matches(g, "{ab: false, c:-12}"));
  EXPECT_TRUE(matches(g, "{x:123}"));
  EXPECT_FALSE(matches(g, "{x:1234}"));  // {1,3}
  EXPECT_FALSE(matches(g, "{A:true}"));
  EXPECT_FALSE(matches(g, "{a:true"));  // not finished
  EXPECT_TRUE(matches(R"(root ::= [^"\\]* "\"")", "ab\xc3\xa9\""));
  EXPECT_TRUE(matches(R"(root ::= "\u00e9" . [\x41-\x43])", "\xc3\xa9zB"));
  EXPECT_TRUE(matches("root ::= \"a\"?\n", ""));
  EXPECT_TRUE(matches("root ::= (\"ab\" | \"c\")+ \"!\"", "abcab!"));
}

TEST(Grammar, ErrorsNameTheRuleOrLine) {
  auto err = [](const std::string& g, const std::string& what) {
    auto r = Grammar::parse(g);
    ASSERT_FALSE(r.ok()) << g;
    EXPECT_NE(r.status().message().find(what), std::string::npos) << r.status().message();
  };
  err("root ::= missing", "'missing' is used but not defined");
  err("start ::= \"a\"", "no 'root'");
  err("root ::= root \"a\" | \"b\"", "left-recursive");
  err("root ::= x\nx ::= \"a\"? root", "left-recursive");
  err("root ::= \"a\"\n\n  = \"b\"", "line 3");
  err("root ::= [abc", "']'");
  err("root ::= \"\\q\"", "escape");
  err("root ::= \"a\" {3,1}", "m <= n");
  err("root ::= \"a\"\nroot ::= \"b\"", "defined twice");
}

TEST(GrammarMatcher, UtfEightSplitAcrossTokensAndTheEnd) {
  auto g = compile(R"(root ::= "é" [a-c]{2})");
  Matcher m(g);
  EXPECT_TRUE(m.accept("\xc3"));  // half of é
  EXPECT_FALSE(m.can_end());
  EXPECT_FALSE(m.accept("x"));    // not a continuation byte
  EXPECT_TRUE(m.accept("\xa9" "a"));
  EXPECT_FALSE(m.can_end());
  EXPECT_TRUE(m.accept("c"));
  EXPECT_TRUE(m.can_end());
  EXPECT_TRUE(m.must_end());
  EXPECT_FALSE(m.accept("a"));
  // A partial byte that cannot become anything the class admits is refused.
  Matcher ascii(compile("root ::= [a-z]+"));
  EXPECT_FALSE(ascii.accept("\xc3"));
}

// The trie's mask equals trying every token alone.
TEST(GrammarMatcher, TheMaskIsEveryTokenTheGrammarAllows) {
  std::vector<std::string> pieces = {"{", "}", "\"", "a", "ab", "abc", "b", ":", ",", " ", "\"a",
                                     "\":", "1", "12", "true", "tr", "\xc3", "\xa9", "\xc3\xa9", "",
                                     "}}", "{\"", "null"};
  TokenTrie trie(pieces, std::vector<int32_t>{9});  // " " excluded
  auto g = compile(json_object_gbnf());
  std::mt19937_64 rng(3);
  Matcher m(g);
  for (int step = 0; step < 40 && !m.must_end(); ++step) {
    std::vector<uint64_t> mask((pieces.size() + 63) / 64);
    m.fill_mask(trie, mask);
    std::vector<int32_t> allowed;
    for (size_t t = 0; t < pieces.size(); ++t) {
      const bool bit = (mask[t / 64] >> (t % 64)) & 1;
      Matcher probe = m;
      const bool brute = t != 9 && !pieces[t].empty() && probe.accept(pieces[t]);
      EXPECT_EQ(bit, brute) << "step " << step << " token '" << pieces[t] << "'";
      if (bit) allowed.push_back(static_cast<int32_t>(t));
    }
    if (allowed.empty()) break;
    ASSERT_TRUE(m.accept(pieces[static_cast<size_t>(allowed[rng() % allowed.size()])]));
  }
}

// Random walks over a small vocabulary through the schema's masks, ended at the first point
// the grammar may end after 30 tokens (or forced), give JSON with the schema's shape.
TEST(GrammarJsonSchema, RandomWalksGiveValidJson) {
  const nlohmann::ordered_json schema = nlohmann::ordered_json::parse(R"({
    "type": "object",
    "properties": {
      "name": {"type": "string", "maxLength": 6},
      "age": {"type": "integer"},
      "tags": {"type": "array", "items": {"enum": ["a", "b", 3]}, "maxItems": 3},
      "pet": {"anyOf": [{"type": "null"}, {"$ref": "#/$defs/pet"}]},
      "ok": {"type": "boolean"}
    },
    "required": ["name", "age", "tags"],
    "additionalProperties": false,
    "$defs": {"pet": {"type": "object", "properties": {"kind": {"const": "cat"}}, "required": ["kind"]}}
  })");
  auto gbnf = json_schema_to_gbnf(schema);
  ASSERT_TRUE(gbnf.ok()) << gbnf.status().message();
  auto g = compile(*gbnf);
  ASSERT_TRUE(g);
  std::vector<std::string> pieces;
  for (int c = 0x20; c < 0x7f; ++c) pieces.push_back(std::string(1, static_cast<char>(c)));
  for (const char* p : {"\"name\"", "\"age\"", "\"tags\"", "true", "false", "null", ": ", ", ",
                        "\"cat\"", "\xc3\xa9", "\\u00e9", "{\"", "\"}"})
    pieces.push_back(p);
  TokenTrie trie(pieces, {});
  for (uint64_t seed = 0; seed < 200; ++seed) {
    std::mt19937_64 rng(seed);
    Matcher m(g);
    std::string text;
    for (int step = 0; step < 400 && !m.must_end(); ++step) {
      if (step > 30 && m.can_end()) break;
      std::vector<uint64_t> mask((pieces.size() + 63) / 64);
      m.fill_mask(trie, mask);
      std::vector<size_t> allowed;
      for (size_t t = 0; t < pieces.size(); ++t)
        if ((mask[t / 64] >> (t % 64)) & 1) allowed.push_back(t);
      ASSERT_FALSE(allowed.empty()) << text;
      // Prefer closing after a while, as a budget would.
      size_t pick = allowed[rng() % allowed.size()];
      ASSERT_TRUE(m.accept(pieces[pick]));
      text += pieces[pick];
    }
    ASSERT_TRUE(m.can_end()) << "seed " << seed << ": " << text;
    const auto j = nlohmann::json::parse(text, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << text;
    ASSERT_TRUE(j.is_object()) << text;
    EXPECT_TRUE(j["name"].is_string() && j["name"].get<std::string>().size() <= 12) << text;  // 6 chars
    EXPECT_TRUE(j["age"].is_number_integer()) << text;
    EXPECT_TRUE(j["tags"].is_array() && j["tags"].size() <= 3) << text;
    if (j.contains("pet")) {
      EXPECT_TRUE(j["pet"].is_null() || j["pet"]["kind"] == "cat") << text;
    }
    for (const auto& [k, v] : j.items()) EXPECT_TRUE(k == "name" || k == "age" || k == "tags" || k == "pet" || k == "ok") << text;
  }
}

TEST(GrammarJsonSchema, UnsupportedKeywordsAreErrorsNamingThem) {
  auto err = [](const std::string& schema, const std::string& what) {
    auto r = json_schema_to_gbnf(nlohmann::ordered_json::parse(schema));
    ASSERT_FALSE(r.ok()) << schema;
    EXPECT_NE(r.status().message().find(what), std::string::npos) << r.status().message();
  };
  err(R"({"type": "string", "pattern": "^a"})", "'pattern'");
  err(R"({"type": "object", "properties": {"d": {"type": "string", "format": "date"}}})", "/properties/d");
  err(R"({"type": "integer", "minimum": 3})", "'minimum'");
  err(R"({"type": "object", "additionalProperties": true})", "additionalProperties");
  err(R"({"$ref": "#/$defs/missing"})", "not in the schema's $defs");
  err(R"({"type": "object", "properties": {}, "required": ["x"]})", "'x'");
  err(R"({"type": "array", "items": {"type": "string"}, "minItems": 3, "maxItems": 1})", "maxItems");
  // Recursion through $ref compiles (a tree).
  auto tree = json_schema_to_gbnf(nlohmann::ordered_json::parse(R"({"$ref": "#/$defs/node",
      "$defs": {"node": {"type": "object", "properties": {"kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}}}}})"));
  ASSERT_TRUE(tree.ok()) << tree.status().message();
  EXPECT_TRUE(matches(*tree, R"({"kids": [{}, {"kids": []}]})")) << *tree;
  EXPECT_TRUE(matches(choice_gbnf({"yes", "no \"way\""}), "no \"way\""));
  EXPECT_FALSE(matches(choice_gbnf({"yes", "no"}), "maybe"));
}

// guided_regex: the grammar's language is the expression's (std::regex_match agrees on fixed
// strings and on random walks through the masks), and the unsupported parts are errors.
TEST(GrammarRegex, MatchesWhatStdRegexMatches) {
  const std::vector<std::pair<std::string, std::vector<std::string>>> cases = {
      {R"([A-Z][a-z]{2,5}-\d{3})", {"Abc-123", "Abcdef-000", "Ab-123", "abc-123", "Abc-12", "Abcdefg-123"}},
      {R"((cat|dog)s?)", {"cat", "dogs", "cats", "bird", "catss", ""}},
      {R"(\w+@\w+\.(com|org))", {"a@b.com", "x_1@y2.org", "a@b.net", "@b.com", "a@b.comm"}},
      {R"(^a.b$)", {"axb", "a b", "ab", "a\nb", "axxb"}},
      {R"([^"\\]*)", {"", "abc", "a\"b", "x\\y"}},
      {R"((?:ab)*c|\s+)", {"c", "ababc", "abc", "  ", "abab", " c"}},
      {R"(-?(0|[1-9]\d*)(\.\d+)?)", {"0", "-12.5", "01", "1.", "3.14", "-"}},
      {R"([\d\-]{3}x{2,}?)", {"1-2xx", "123xxx", "12xx", "1a2xx"}},
  };
  std::vector<std::string> pieces;
  for (int c = 0x20; c < 0x7f; ++c) pieces.push_back(std::string(1, static_cast<char>(c)));
  for (const char* p : {"\n", "ab", "cat", "dog", ".com", "123"}) pieces.push_back(p);
  TokenTrie trie(pieces, {});
  for (const auto& [re, texts] : cases) {
    auto gbnf = regex_to_gbnf(re);
    ASSERT_TRUE(gbnf.ok()) << re << ": " << gbnf.status().message();
    auto g = compile(*gbnf);
    ASSERT_TRUE(g) << re;
    const std::regex oracle(re);
    for (const std::string& t : texts) {
      Matcher m(g);
      EXPECT_EQ(m.accept(t) && m.can_end(), std::regex_match(t, oracle)) << re << " on '" << t << "'\n" << *gbnf;
    }
    for (uint64_t seed = 0; seed < 30; ++seed) {
      std::mt19937_64 rng(seed);
      Matcher m(g);
      std::string text;
      for (int step = 0; step < 30 && !m.must_end(); ++step) {
        if (m.can_end() && rng() % 4 == 0) break;
        std::vector<uint64_t> mask((pieces.size() + 63) / 64);
        m.fill_mask(trie, mask, 30 - step);
        std::vector<size_t> ok;
        for (size_t t = 0; t < pieces.size(); ++t)
          if ((mask[t / 64] >> (t % 64)) & 1) ok.push_back(t);
        if (ok.empty()) break;
        const size_t t = ok[rng() % ok.size()];
        ASSERT_TRUE(m.accept(pieces[t]));
        text += pieces[t];
      }
      if (m.can_end()) {
        EXPECT_TRUE(std::regex_match(text, oracle)) << re << " walked to '" << text << "'";
      }
    }
  }
  auto err = [](const std::string& re, const std::string& what) {
    auto r = regex_to_gbnf(re);
    ASSERT_FALSE(r.ok()) << re;
    EXPECT_NE(r.status().message().find(what), std::string::npos) << r.status().message();
  };
  err(R"((a)\1)", "backreferences");
  err(R"((?=a)b)", "(?:");
  err(R"(a^b)", "anchor");
  err(R"(\bword)", "boundaries");
  err(R"([abc)", "']'");
  err(R"(*a)", "nothing to repeat");
}

}  // namespace
}  // namespace hinge::grammar
