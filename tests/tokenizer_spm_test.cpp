// The 512-piece TinyStories vocabulary, read from stories260K.gguf and from llama2.c's tok512.bin,
// against the SentencePiece library itself (tok512.model) on a few hundred varied strings.
#include <gtest/gtest.h>

#include "format/gguf.h"
#include "test_util.h"
#include "tokenizer/tokenizer.h"

#ifdef HINGE_HAVE_SENTENCEPIECE
#include <sentencepiece_processor.h>
#endif

namespace hinge {
namespace {

StatusOr<VocabSpec> gguf_spec() {
  HINGE_ASSIGN_OR_RETURN(auto f,
                         gguf::GgufFile::open(testing::shared_path("models/stories260K.gguf")));
  return Tokenizer::spec_from_gguf(*f);
}

StatusOr<VocabSpec> llama2c_spec() {
  return Tokenizer::spec_from_llama2c(testing::shared_path("models/tok512.bin"), 512);
}

// Deterministic mix of ASCII words, punctuation, digits, runs of spaces, tabs, newlines, leading
// and trailing whitespace, accents, CJK, Hangul, Cyrillic, Arabic, emoji and combining marks.
[[maybe_unused]] std::vector<std::string> varied_strings(size_t count) {
  static const char* kParts[] = {
      "Once",    "upon",  "a",        "time",    "there",     "was",       "little",
      "girl",    "named", "Lily",     "She",     "loved",     "to",        "play",
      "outside", "the",   "park",     "Tom",     "dog",       "happy",     "ball",
      "tree",    "ing",   "ed",       "un",      "xyzzy",     "qu",        "ZZ",
      "HELLO",   "Hello", ",",        ".",       "!",         "?",         "'",
      "\"",      "-",     "--",       "(",       ")",         ":",         ";",
      "...",     "0",     "1",        "7",       "42",        "2024",      "3.14",
      "1,000",   " ",     "  ",       "   ",     "\t",        "\n",        "\n\n",
      " \n ",    "\r\n",  "café",     "naïve",   "Ångström",  "ñ",         "ü",
      "日本語",  "中文",  "你好",     "한국어",  "Привет",    "мир",       "مرحبا",
      "🦙",    "😀",     "👍🏽", "🌫️", "e\xCC\x81", "a\xCC\x8A", "\xE2\x80\x8B",
      "€",       "—",     "…",        "½",       "™",         "\xC2\xA0",  "ß",
      "Ω"};
  constexpr size_t kNumParts = sizeof(kParts) / sizeof(kParts[0]);
  uint64_t state = 0x9E3779B97F4A7C15ull;
  auto next = [&](uint64_t bound) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return (state >> 33) % bound;
  };
  std::vector<std::string> out = {"",          " ",          "  ",           "a",
                                  " a",        "a ",         "\n",           "Hello world",
                                  "  leading", "trailing  ", "mid   spaces", "\t\ttabs\t"};
  while (out.size() < count) {
    std::string s;
    const size_t n = 1 + next(12);
    for (size_t i = 0; i < n; ++i) {
      s += kParts[next(kNumParts)];
      if (next(3) != 0) s += " ";
    }
    if (next(5) == 0) s = " " + s;
    out.push_back(s);
  }
  return out;
}

TEST(TokenizerSpmTest, GgufAndLlama2cVocabulariesAgree) {
  auto a = gguf_spec();
  ASSERT_TRUE(a.ok()) << a.status().message();
  auto b = llama2c_spec();
  ASSERT_TRUE(b.ok()) << b.status().message();
  EXPECT_EQ(a->model, "llama");
  EXPECT_EQ(b->model, "llama");
  EXPECT_EQ(a->tokens, b->tokens);
  EXPECT_EQ(a->scores, b->scores);
  EXPECT_EQ(a->token_types, b->token_types);
  EXPECT_EQ(a->bos, 1);
  EXPECT_EQ(b->bos, 1);
  EXPECT_EQ(a->eos, 2);
  EXPECT_EQ(b->eos, 2);
  EXPECT_EQ(a->unk, 0);
  EXPECT_EQ(b->unk, 0);
  EXPECT_EQ(a->tokens[259], "\xE2\x96\x81t");  // "▁t": llama2.c stores it as " t"
  EXPECT_EQ(b->tokens[3], "<0x00>");
}

TEST(TokenizerSpmTest, Llama2cLoaderRejectsBadFiles) {
  const std::string dir = testing::temp_dir();
  auto bad = Tokenizer::spec_from_llama2c(dir + "/missing.bin", 512);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("missing.bin"), std::string::npos);
  // Truncated: the real file cut in the middle of a token.
  const std::string full = testing::read_file(testing::shared_path("models/tok512.bin"));
  const std::string cut = dir + "/cut.bin";
  {
    std::ofstream out(cut, std::ios::binary);
    out << full.substr(0, full.size() / 2);
  }
  auto truncated = Tokenizer::spec_from_llama2c(cut, 512);
  ASSERT_FALSE(truncated.ok());
  EXPECT_NE(truncated.status().message().find("cut.bin"), std::string::npos);
  EXPECT_FALSE(Tokenizer::spec_from_llama2c(testing::shared_path("models/tok512.bin"), 513).ok());
}

TEST(TokenizerSpmTest, KnownEncodings) {
  auto spec = gguf_spec();
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  auto tok = Tokenizer::create(*spec);
  ASSERT_TRUE(tok.ok()) << tok.status().message();
  // Ids from SentencePiece (tok512.model) for the same strings.
  EXPECT_EQ((*tok)->encode("Hello world", false, false),
            (std::vector<int32_t>{346, 306, 414, 263, 304, 341}));
  EXPECT_EQ((*tok)->encode("x\ny", false, false), (std::vector<int32_t>{410, 444, 13, 422}));
  EXPECT_EQ((*tok)->encode("Hello world", true, false).front(), 1);
}

#ifdef HINGE_HAVE_SENTENCEPIECE
// tok512.model leaves NormalizerSpec.remove_extra_whitespaces at its default (true), which
// SentencePiece applies and llama.cpp does not; this returns the model with it set to false by
// appending field 4 (varint 0) to the normalizer_spec message (field 3 of ModelProto).
std::string without_whitespace_removal(const std::string& proto) {
  auto varint = [&](size_t& i) {
    uint64_t v = 0;
    for (int shift = 0; i < proto.size(); shift += 7) {
      const auto c = static_cast<uint8_t>(proto[i++]);
      v |= uint64_t{c & 0x7Fu} << shift;
      if (!(c & 0x80)) break;
    }
    return v;
  };
  auto put_varint = [](std::string& s, uint64_t v) {
    while (v >= 0x80) {
      s.push_back(static_cast<char>((v & 0x7F) | 0x80));
      v >>= 7;
    }
    s.push_back(static_cast<char>(v));
  };
  std::string out;
  for (size_t i = 0; i < proto.size();) {
    const size_t start = i;
    const uint64_t key = varint(i);
    const uint64_t field = key >> 3, wire = key & 7;
    if (wire == 0) {
      varint(i);
    } else if (wire == 1) {
      i += 8;
    } else if (wire == 5) {
      i += 4;
    } else if (wire == 2) {
      const size_t len = varint(i);
      if (field == 3) {
        std::string body = proto.substr(i, len) + std::string("\x20\x00", 2);
        put_varint(out, key);
        put_varint(out, body.size());
        out += body;
        i += len;
        continue;
      }
      i += len;
    }
    out.append(proto, start, i - start);
  }
  return out;
}

TEST(TokenizerSpmTest, MatchesSentencePieceLibrary) {
  sentencepiece::SentencePieceProcessor sp;
  const std::string proto = testing::read_file(testing::shared_path("models/tok512.model"));
  ASSERT_TRUE(sp.LoadFromSerializedProto(without_whitespace_removal(proto)).ok());
  sentencepiece::SentencePieceProcessor sp_orig;
  ASSERT_TRUE(sp_orig.LoadFromSerializedProto(proto).ok());

  auto a = gguf_spec();
  ASSERT_TRUE(a.ok()) << a.status().message();
  auto b = llama2c_spec();
  ASSERT_TRUE(b.ok()) << b.status().message();
  auto from_gguf = Tokenizer::create(*a);
  ASSERT_TRUE(from_gguf.ok()) << from_gguf.status().message();
  auto from_bin = Tokenizer::create(*b);
  ASSERT_TRUE(from_bin.ok()) << from_bin.status().message();

  int checked_orig = 0;
  for (const std::string& s : varied_strings(300)) {
    std::vector<int> want;
    ASSERT_TRUE(sp.Encode(s, &want).ok());
    const std::vector<int32_t> expected(want.begin(), want.end());
    EXPECT_EQ((*from_gguf)->encode(s, false, false), expected) << "gguf vocab, text '" << s << "'";
    EXPECT_EQ((*from_bin)->encode(s, false, false), expected)
        << "tok512.bin vocab, text '" << s << "'";
    EXPECT_EQ((*from_gguf)->decode(expected), s);
    // Where SentencePiece's whitespace cleanup changes nothing, the unmodified model agrees too.
    const bool clean =
        s.find("  ") == std::string::npos && (s.empty() || (s.front() != ' ' && s.back() != ' '));
    if (clean) {
      std::vector<int> orig;
      ASSERT_TRUE(sp_orig.Encode(s, &orig).ok());
      EXPECT_EQ(orig, want) << "text '" << s << "'";
      ++checked_orig;
    }
  }
  EXPECT_GT(checked_orig, 40);
}
#endif  // HINGE_HAVE_SENTENCEPIECE

}  // namespace
}  // namespace hinge
