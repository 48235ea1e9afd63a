// The "bert" (WordPiece) and "gemma4" (BPE over U+2581-escaped text) tokenizers on small
// vocabularies, rule by rule as llama.cpp runs them (llm_tokenizer_wpm_session and
// llm_tokenizer_bpe_session with the gemma4 pre-tokenizer). The real vocabularies are checked
// against llama.cpp's vectors by TokenizerPeerVocabs.
#include <gtest/gtest.h>

#include "format/gguf.h"
#include "test_util.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/vocab_gguf.h"

namespace hinge {
namespace {

std::unique_ptr<Tokenizer> make(VocabSpec spec) {
  auto t = Tokenizer::create(std::move(spec));
  EXPECT_TRUE(t.ok()) << t.status().message();
  return t.ok() ? std::move(*t) : nullptr;
}

// What spec_from_gguf reads back from the file write_vocab_gguf makes of `spec`.
VocabSpec round_trip(const VocabSpec& spec, const std::string& name) {
  const std::string path = testing::temp_dir() + "/" + name + ".gguf";
  gguf::GgufWriter w;
  write_vocab_gguf(w, spec);
  EXPECT_TRUE(w.write(path).ok());
  auto f = gguf::GgufFile::open(path);
  EXPECT_TRUE(f.ok()) << f.status().message();
  auto back = Tokenizer::spec_from_gguf(**f);
  EXPECT_TRUE(back.ok()) << back.status().message();
  return back.ok() ? *back : VocabSpec{};
}

VocabSpec bert_spec() {
  VocabSpec s;
  s.model = "bert";
  s.tokens = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "\xE2\x96\x81hello", "\xE2\x96\x81world",
              "\xE2\x96\x81" "ap", "fel", "\xE2\x96\x81,", "\xE2\x96\x81!", "\xE2\x96\x81" "3",
              "\xE2\x96\x81.", "\xE2\x96\x81\xE4\xBD\xA0", "\xE2\x96\x81\xE5\xA5\xBD", "\xE2\x96\x81h",
              "ello", "\xE2\x96\x81~"};
  s.token_types = std::vector<int32_t>(s.tokens.size(), 1);
  for (int i = 0; i < 4; ++i) s.token_types[static_cast<size_t>(i)] = 3;
  s.pad = 0, s.unk = 1, s.bos = 2, s.sep = 3, s.eos = -1;
  s.add_bos = true, s.add_eos = false, s.add_space_prefix = true;
  return s;
}

TEST(TokenizerWordPiece, NormalizesSplitsAndTakesTheLongestPieces) {
  auto tok = make(bert_spec());
  ASSERT_NE(tok, nullptr);
  // Lowercase; punctuation stands alone; the longest piece first ("▁hello", not "▁h" + "ello").
  EXPECT_EQ(tok->encode("Hello, WORLD!", false, false), (std::vector<int32_t>{4, 8, 5, 9}));
  // Accents go with NFD (Ä -> A + U+0308), then the word is covered by "▁ap" + "fel".
  EXPECT_EQ(tok->encode("\xC3\x84pfel", false, false), (std::vector<int32_t>{6, 7}));
  // Numbers and '.' split; CJK ideographs are words of their own; ASCII symbols too.
  EXPECT_EQ(tok->encode("3.3 \xE4\xBD\xA0\xE5\xA5\xBD~", false, false),
            (std::vector<int32_t>{10, 11, 10, 12, 13, 16}));
  // A word with an uncovered rest is one [UNK]; white space of every kind separates words.
  EXPECT_EQ(tok->encode("helloq\t\n\xE3\x80\x80world", false, false),
            (std::vector<int32_t>{1, 5}));
  // Control and format characters vanish (U+200D ZWJ, U+0007), as does invalid UTF-8.
  EXPECT_EQ(tok->encode("hel\xE2\x80\x8Dlo\x07 \xFF", false, false), (std::vector<int32_t>{4}));
  EXPECT_TRUE(tok->encode("", false, false).empty());
  // Special tokens: [CLS] text [SEP].
  EXPECT_EQ(tok->encode("hello", true, false), (std::vector<int32_t>{2, 4, 3}));
  EXPECT_EQ(tok->decode({4, 5}), "hello world");
}

TEST(TokenizerWordPiece, NormalizerOptionsAndTheFileRoundTrip) {
  VocabSpec spec = bert_spec();
  spec.lowercase = false;
  spec.strip_accents = false;
  const VocabSpec back = round_trip(spec, "bert");
  EXPECT_EQ(back.model, "bert");
  EXPECT_FALSE(back.lowercase);
  EXPECT_FALSE(back.strip_accents);
  EXPECT_EQ(back.sep, 3);
  auto tok = make(back);
  ASSERT_NE(tok, nullptr);
  // Case kept: "Hello" has no piece (only "▁hello"), so it is [UNK].
  EXPECT_EQ(tok->encode("Hello hello", false, false), (std::vector<int32_t>{1, 4}));
  EXPECT_EQ(tok->encode("hello", true, false), (std::vector<int32_t>{2, 4, 3}));
}

VocabSpec gemma4_spec() {
  VocabSpec s;
  s.model = "gemma4";
  s.tokens = {"<pad>", "<eos>", "<bos>", "<unk>", "\xE2\x96\x81", "h", "i", "\xE2\x96\x81h",
              "\xE2\x96\x81hi", "\n", "\n\n", "<0x21>", "<0xC3>", "<0xA9>", "hi"};
  s.token_types = {3, 3, 3, 3, 1, 1, 1, 1, 1, 1, 1, 6, 6, 6, 1};
  s.merges = {"\xE2\x96\x81 h", "\xE2\x96\x81h i", "h i", "\n \n"};
  s.pad = 0, s.eos = 1, s.bos = 2, s.unk = 3;
  s.add_bos = true, s.add_space_prefix = false;
  return s;
}

TEST(TokenizerGemma4, EscapedSpacesMergesNewlineRunsAndByteTokens) {
  for (bool through_file : {false, true}) {
    auto tok = make(through_file ? round_trip(gemma4_spec(), "gemma4") : gemma4_spec());
    ASSERT_NE(tok, nullptr);
    // No space prefix; ' ' -> U+2581 before merging; merges by rank.
    EXPECT_EQ(tok->encode("hi hi", false, false), (std::vector<int32_t>{14, 8}));
    // A run of newlines that is a token stays whole; a longer one is merged by BPE.
    EXPECT_EQ(tok->encode("hi\n\nhi", false, false), (std::vector<int32_t>{14, 10, 14}));
    EXPECT_EQ(tok->encode("\n\n\n", false, false), (std::vector<int32_t>{10, 9}));
    // Characters without a token become their <0xNN> tokens (bytes without one are dropped).
    EXPECT_EQ(tok->encode("!\xC3\xA9?", false, false), (std::vector<int32_t>{11, 12, 13}));
    // BOS first; decoding turns U+2581 back into spaces and byte tokens into bytes.
    EXPECT_EQ(tok->encode("hi", true, false), (std::vector<int32_t>{2, 14}));
    EXPECT_EQ(tok->decode({14, 8, 10, 12, 13}), "hi hi\n\n\xC3\xA9");
  }
}

}  // namespace
}  // namespace hinge
