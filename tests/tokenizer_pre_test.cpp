// Regex pre-tokenizers: every llama.cpp preset compiles under PCRE2, and the splits follow
// llama.cpp's rules (custom GPT-2 / Llama 3 splitters, chained std::regex splits).
#include <gtest/gtest.h>

#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/unicode.h"

namespace hinge {
namespace {

// Splits and byte-decodes the pieces back to raw text for readable expectations.
std::vector<std::string> split(const std::string& pre, const std::string& text) {
  const PreTokenizerPreset* preset = find_pre_tokenizer_preset(pre);
  EXPECT_NE(preset, nullptr) << pre;
  if (!preset) return {};
  auto pt = PreTokenizer::create(preset->regexes);
  EXPECT_TRUE(pt.ok()) << pre << ": " << pt.status().message();
  if (!pt.ok()) return {};
  std::vector<std::string> out;
  for (const std::string& word : (*pt)->split(text)) {
    std::string raw;
    for (size_t i = 0; i < word.size();) {
      const size_t len = unicode::seq_len(word[i]);
      const int b = unicode::unicode_to_byte(std::string_view(word).substr(i, len));
      EXPECT_GE(b, 0);
      raw.push_back(static_cast<char>(b));
      i += len;
    }
    out.push_back(raw);
  }
  return out;
}

using Pieces = std::vector<std::string>;

TEST(TokenizerPreTest, AllPresetsCompile) {
  for (const char* name :
       {"default",      "gpt-2",       "llama-bpe", "llama3",    "deepseek-coder",
        "deepseek-llm", "deepseek-v3", "falcon",    "starcoder", "refact",
        "mpt",          "qwen2",       "stablelm2", "command-r", "dbrx",
        "poro-chat",    "viking",      "tekken",    "gpt-4o",    "chameleon",
        "bailingmoe",   "seed-coder",  "grok-2"}) {
    const PreTokenizerPreset* preset = find_pre_tokenizer_preset(name);
    ASSERT_NE(preset, nullptr) << name;
    auto pt = PreTokenizer::create(preset->regexes);
    ASSERT_TRUE(pt.ok()) << name << ": " << pt.status().message();
    // Every preset keeps every byte of the text, in order.
    std::string joined;
    for (const std::string& p : split(name, "Hello, y'all!  \t 1234567 世界\r\n ok")) joined += p;
    EXPECT_EQ(joined, "Hello, y'all!  \t 1234567 世界\r\n ok") << name;
  }
  EXPECT_EQ(find_pre_tokenizer_preset("no-such-pre"), nullptr);
  EXPECT_TRUE(find_pre_tokenizer_preset("llama-bpe")->ignore_merges);
  EXPECT_FALSE(find_pre_tokenizer_preset("gpt-2")->ignore_merges);
}

TEST(TokenizerPreTest, Splits) {
  EXPECT_EQ(split("llama-bpe", "Hello, y'all! 1234567"),
            (Pieces{"Hello", ",", " y", "'all", "!", " ", "123", "456", "7"}));
  EXPECT_EQ(split("llama-bpe", "I'M here\n\n  x"), (Pieces{"I", "'M", " here", "\n\n", " ", " x"}));
  EXPECT_EQ(split("gpt-2", "  Hello   world 42!!"),
            (Pieces{" ", " Hello", "  ", " world", " 42", "!!"}));
  EXPECT_EQ(split("gpt-2", "it's 'RE"), (Pieces{"it", "'s", " '", "RE"}));
  EXPECT_EQ(split("qwen2", "x1234"), (Pieces{"x", "1", "2", "3", "4"}));
  EXPECT_EQ(split("starcoder", "abc123 d"), (Pieces{"abc", "1", "2", "3", " d"}));
  EXPECT_EQ(split("deepseek-llm", "Hello 世界 123"), (Pieces{"Hello", " ", "世界", " ", "123"}));
  EXPECT_EQ(split("deepseek-coder", "a\nb"), (Pieces{"a", "\n", "b"}));
  EXPECT_EQ(split("falcon", "1234 x"), (Pieces{"123", "4", " x"}));
  // U+0085 (NEL) and U+3000 count as whitespace, as in llama.cpp's tables.
  EXPECT_EQ(split("gpt-2", "a\xC2\x85\xC2\x85 b"), (Pieces{"a", "\xC2\x85\xC2\x85", " b"}));
  EXPECT_EQ(split("gpt-2",
                  "a\xE3\x80\x80"
                  "b"),
            (Pieces{"a", "\xE3\x80\x80", "b"}));
  // Invalid UTF-8 becomes U+FFFD before splitting, as in llama.cpp.
  EXPECT_EQ(split("gpt-2", "a\xFF"), (Pieces{"a", "\xEF\xBF\xBD"}));
}

}  // namespace
}  // namespace hinge
