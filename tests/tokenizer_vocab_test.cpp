// llama.cpp's tokenizer test vectors (shared/vocab/*.gguf.inp/.out), tokenized without BOS and
// without parsing special tokens, as test-tokenizer-0 does; decode round trips; special tokens.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "format/gguf.h"
#include "test_util.h"
#include "tokenizer/tokenizer.h"

namespace hinge {
namespace {

struct Case {
  std::string text;
  std::vector<int32_t> ids;
};

// A vocabulary of shared/vocab by name, or any file by absolute path.
std::string vocab_path(const std::string& vocab) {
  return vocab.starts_with("/") ? vocab : testing::shared_path("vocab/" + vocab);
}

std::vector<Case> read_cases(const std::string& vocab) {
  const std::string inp = testing::read_file(vocab_path(vocab) + ".inp");
  const std::string outp = testing::read_file(vocab_path(vocab) + ".out");
  std::vector<std::string> texts;
  const std::string sep = "\n__ggml_vocab_test__\n";
  for (size_t pos = 0; pos < inp.size();) {
    const size_t next = inp.find(sep, pos);
    if (next == std::string::npos) {
      texts.push_back(inp.substr(pos));
      break;
    }
    texts.push_back(inp.substr(pos, next - pos));
    pos = next + sep.size();
  }
  std::vector<Case> cases;
  std::istringstream lines(outp);
  std::string line;
  for (const std::string& t : texts) {
    if (!std::getline(lines, line)) break;
    Case c{t, {}};
    std::istringstream ids(line);
    for (int32_t id; ids >> id;) c.ids.push_back(id);
    cases.push_back(std::move(c));
  }
  EXPECT_EQ(cases.size(), texts.size()) << vocab << ": .inp and .out disagree on the case count";
  return cases;
}

std::unique_ptr<Tokenizer> load(const std::string& vocab) {
  auto file = gguf::GgufFile::open(vocab_path(vocab));
  EXPECT_TRUE(file.ok()) << file.status().message();
  if (!file.ok()) return nullptr;
  auto spec = Tokenizer::spec_from_gguf(**file);
  EXPECT_TRUE(spec.ok()) << spec.status().message();
  if (!spec.ok()) return nullptr;
  auto tok = Tokenizer::create(std::move(*spec));
  EXPECT_TRUE(tok.ok()) << tok.status().message();
  return tok.ok() ? std::move(*tok) : nullptr;
}

std::string ids_str(const std::vector<int32_t>& ids) {
  std::string s;
  for (int32_t id : ids) s += std::to_string(id) + " ";
  return s;
}

// Strict UTF-8 check (no overlongs, surrogates or values above U+10FFFF).
bool valid_utf8(const std::string& s) {
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<uint8_t>(s[i]);
    int len = 0;
    uint32_t cpt = 0;
    if (c < 0x80) {
      len = 1, cpt = c;
    } else if ((c & 0xE0) == 0xC0) {
      len = 2, cpt = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      len = 3, cpt = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      len = 4, cpt = c & 0x07;
    } else {
      return false;
    }
    if (i + len > s.size()) return false;
    for (int k = 1; k < len; ++k) {
      const auto b = static_cast<uint8_t>(s[i + k]);
      if ((b & 0xC0) != 0x80) return false;
      cpt = (cpt << 6) | (b & 0x3F);
    }
    static constexpr uint32_t kMin[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cpt < kMin[len] || cpt > 0x10FFFF || (cpt >= 0xD800 && cpt <= 0xDFFF)) return false;
    i += static_cast<size_t>(len);
  }
  return true;
}

class TokenizerVocabTest : public ::testing::TestWithParam<std::string> {};

TEST_P(TokenizerVocabTest, MatchesLlamaCppVectors) {
  const std::string vocab = "ggml-vocab-" + GetParam() + ".gguf";
  auto tok = load(vocab);
  ASSERT_NE(tok, nullptr);
  const std::vector<Case> cases = read_cases(vocab);
  ASSERT_GE(cases.size(), 40u);
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::vector<int32_t> got = tok->encode(cases[i].text, false, false);
    EXPECT_EQ(got, cases[i].ids) << vocab << " case " << i << " '" << cases[i].text
                                 << "'\n  expected: " << ids_str(cases[i].ids)
                                 << "\n  got:      " << ids_str(got);
  }
}

TEST_P(TokenizerVocabTest, DecodeRoundTrips) {
  const std::string vocab = "ggml-vocab-" + GetParam() + ".gguf";
  auto tok = load(vocab);
  ASSERT_NE(tok, nullptr);
  for (const Case& c : read_cases(vocab)) {
    // The SPM space prefix added by encode is dropped again by decode (first piece).
    EXPECT_EQ(tok->decode(tok->encode(c.text, false, false)), c.text);
    // With BOS: the piece right after BOS loses the prefix space instead.
    std::vector<int32_t> with_bos = tok->encode(c.text, true, false);
    if (tok->add_bos()) {
      ASSERT_FALSE(with_bos.empty());
      EXPECT_EQ(with_bos[0], tok->bos());
    }
    EXPECT_EQ(tok->decode(with_bos), c.text);
  }
}

// A megabyte round-trips; quadratic behavior would instead run into ctest's timeout (speed
// itself is measured in benchmarks, not asserted here).
TEST_P(TokenizerVocabTest, EncodesOneMegabyteRoundTrip) {
  const std::string vocab = "ggml-vocab-" + GetParam() + ".gguf";
  auto tok = load(vocab);
  ASSERT_NE(tok, nullptr);
  std::string text;
  for (const Case& c : read_cases(vocab)) text += c.text + "\n";
  const std::string unit = text;
  while (text.size() < (1u << 20)) text += unit;
  const std::vector<int32_t> ids = tok->encode(text, false, false);
  EXPECT_EQ(tok->decode(ids), text);
}

TEST_P(TokenizerVocabTest, LongRunsOfOneCharacterClass) {
  // One huge pre-token / regex match each: checks that neither the regex engine nor the merge
  // loop degrades (or overflows a stack) on long runs.
  const std::string vocab = "ggml-vocab-" + GetParam() + ".gguf";
  auto tok = load(vocab);
  ASSERT_NE(tok, nullptr);
  for (const char* unit : {" ", "a", "7", "!", "\n", "\xE4\xB8\x96"}) {
    std::string text;
    while (text.size() < (256u << 10)) text += unit;
    const std::vector<int32_t> ids = tok->encode(text, false, false);
    EXPECT_EQ(tok->decode(ids), text) << "unit '" << unit << "'";
  }
}

TEST_P(TokenizerVocabTest, RandomBytesNeverCrash) {
  const std::string vocab = "ggml-vocab-" + GetParam() + ".gguf";
  auto tok = load(vocab);
  ASSERT_NE(tok, nullptr);
  uint64_t state = 12345;
  for (int round = 0; round < 200; ++round) {
    std::string s;
    const int n = round % 40;
    for (int i = 0; i < n; ++i) {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      s.push_back(static_cast<char>(state >> 56));
    }
    for (bool special : {false, true}) {
      const std::vector<int32_t> ids = tok->encode(s, true, special);
      for (int32_t id : ids) ASSERT_TRUE(id >= 0 && id < tok->n_vocab());
      StreamingDetokenizer detok(*tok);
      std::string streamed;
      for (int32_t id : ids) streamed += detok.push(id);
      streamed += detok.flush();
      EXPECT_TRUE(valid_utf8(streamed)) << "round " << round;
      // SentencePiece byte fallback keeps every byte, valid UTF-8 or not (a space is escaped
      // to U+2581 before splitting, so after a broken lead byte it comes back as U+2581 bytes,
      // as in llama.cpp).
      if (GetParam() == "llama-spm" && s.find(' ') == std::string::npos) {
        EXPECT_EQ(tok->decode(ids), s) << "round " << round;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(TokenizerVocabs, TokenizerVocabTest,
                         ::testing::Values("llama-spm", "gpt-2", "deepseek-coder", "falcon"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& c : n)
                             if (c == '-') c = '_';
                           return n;
                         });

TEST(TokenizerSpecialTest, ControlTokensOnlyWhenParsingSpecial) {
  auto tok = load("ggml-vocab-llama-spm.gguf");
  ASSERT_NE(tok, nullptr);
  ASSERT_EQ(tok->bos(), 1);
  ASSERT_EQ(tok->eos(), 2);
  const std::vector<int32_t> hello = tok->encode("Hello", false, false);
  const std::vector<int32_t> world = tok->encode("world", false, false);
  // "<s>" splits the text; the text after a special token gets the space prefix again.
  std::vector<int32_t> expected = {1};
  expected.insert(expected.end(), hello.begin(), hello.end());
  expected.push_back(2);
  expected.insert(expected.end(), world.begin(), world.end());
  EXPECT_EQ(tok->encode("<s>Hello</s>world", false, true), expected);
  // Without parse_special the markup is plain text.
  const std::vector<int32_t> plain = tok->encode("<s>Hello</s>world", false, false);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), 1), 0);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), 2), 0);
  EXPECT_EQ(tok->decode(plain), "<s>Hello</s>world");
  EXPECT_TRUE(tok->is_eog(2));
  EXPECT_FALSE(tok->is_eog(1));
  EXPECT_EQ(tok->token_to_piece(1), "");  // control tokens decode to nothing
}

TEST(TokenizerSpecialTest, UserDefinedTokensAlwaysMatchWhole) {
  auto tok = load("ggml-vocab-deepseek-coder.gguf");
  ASSERT_NE(tok, nullptr);
  const int32_t user = tok->token_id("<|User|>");
  ASSERT_EQ(user, 32019);
  ASSERT_EQ(tok->token_type(user), TokenType::kUserDefined);
  const std::vector<int32_t> a = tok->encode("hi", false, false);
  std::vector<int32_t> expected = a;
  expected.push_back(user);
  expected.insert(expected.end(), a.begin(), a.end());
  EXPECT_EQ(tok->encode("hi<|User|>hi", false, false), expected);
  EXPECT_EQ(tok->decode(expected), "hi<|User|>hi");
  // Control tokens (BOS) only with parse_special; then they are never split.
  const std::vector<int32_t> bos_text = tok->encode("<｜begin▁of▁sentence｜>", false, true);
  EXPECT_EQ(bos_text, std::vector<int32_t>{32013});
  EXPECT_GT(tok->encode("<｜begin▁of▁sentence｜>", false, false).size(), 1u);
  EXPECT_EQ(tok->encode("hi", true, false).front(), 32013);
}

TEST(TokenizerSpecialTest, RejectsUnknownModelAndPreTokenizer) {
  VocabSpec spec;
  spec.model = "rwkv";
  spec.tokens = {"a", "b"};
  spec.add_bos = false;
  auto bad_model = Tokenizer::create(spec);
  ASSERT_FALSE(bad_model.ok());
  EXPECT_NE(bad_model.status().message().find("rwkv"), std::string::npos);
  spec.model = "gpt2";
  spec.pre = "no-such-pre";
  auto bad_pre = Tokenizer::create(spec);
  ASSERT_FALSE(bad_pre.ok());
  EXPECT_NE(bad_pre.status().message().find("no-such-pre"), std::string::npos);
}

TEST(TokenizerSpecialTest, SurvivesHostileVocabulary) {
  VocabSpec spec;
  spec.model = "gpt2";
  spec.pre = "gpt-2";
  // Empty and repeated pieces, bad types and ids, merges that are malformed or name no token.
  spec.tokens = {"", "a", "a", "b", "<0xZZ>", "ab", "Ġ"};
  spec.token_types = {1, 1, 1, 99, 6, 1, 1};
  spec.merges = {"a", "a b", "x y", " ", "ab c"};
  spec.bos = 1000;
  spec.eos = -5;
  spec.add_bos = false;
  auto tok = Tokenizer::create(spec);
  ASSERT_TRUE(tok.ok()) << tok.status().message();
  EXPECT_EQ((*tok)->bos(), -1);
  EXPECT_EQ((*tok)->encode("ab", false, false), std::vector<int32_t>{5});
  EXPECT_EQ((*tok)->encode("ba", false, false), (std::vector<int32_t>{3, 1}));
  EXPECT_EQ((*tok)->encode(std::string("\xff\xfe a\0b", 6), false, true).size(), 3u);
  EXPECT_EQ((*tok)->token_to_piece(-1), "");
  EXPECT_EQ((*tok)->token_to_piece(4), "<0xZZ>");  // not a byte piece: treated as normal text
}

// Every vocabulary of llama.cpp's own models/ folder (the peer's tree that
// ../shared/tools/llamacpp-peer clones; HINGE_PEER_MODELS overrides the folder), when it is
// there: the newest families' vectors (bert-bge's WordPiece, gemma-4's BPE, qwen35, ...) that
// shared/vocab does not carry. Skipped on machines without the peer tree.
TEST(TokenizerPeerVocabs, EveryLlamaCppVocabularyMatchesItsVectors) {
  std::string dir;
  if (const char* env = std::getenv("HINGE_PEER_MODELS")) {
    dir = env;
  } else if (const char* home = std::getenv("HOME")) {
    dir = std::string(home) + "/.cache/hinge-peer/llama.cpp/models";
  }
  if (dir.empty() || !std::filesystem::is_directory(dir))
    GTEST_SKIP() << "no llama.cpp models/ folder (build the peer: ../shared/tools/llamacpp-peer)";
  int vocabs = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (!name.starts_with("ggml-vocab-") || !name.ends_with(".gguf") ||
        !std::filesystem::exists(e.path().string() + ".inp"))
      continue;
    ++vocabs;
    auto tok = load(e.path().string());
    ASSERT_NE(tok, nullptr) << name;
    for (const Case& c : read_cases(e.path().string())) {
      const std::vector<int32_t> got = tok->encode(c.text, false, false);
      EXPECT_EQ(got, c.ids) << name << " '" << c.text << "'\n  expected: " << ids_str(c.ids)
                            << "\n  got:      " << ids_str(got);
    }
  }
  RecordProperty("vocabularies", std::to_string(vocabs));
  EXPECT_GE(vocabs, 1) << dir;
}

}  // namespace
}  // namespace hinge
