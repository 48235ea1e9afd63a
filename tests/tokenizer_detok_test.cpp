// StreamingDetokenizer: UTF-8 hold-back, U+FFFD for invalid bytes, equality with decode(), and
// llama2.c's printed output for the stories260K greedy golden run.
#include <gtest/gtest.h>

#include "format/gguf.h"
#include "test_util.h"
#include "tokenizer/tokenizer.h"

namespace hinge {
namespace {

std::unique_ptr<Tokenizer> stories_tokenizer() {
  auto f = gguf::GgufFile::open(testing::shared_path("models/stories260K.gguf"));
  EXPECT_TRUE(f.ok()) << f.status().message();
  if (!f.ok()) return nullptr;
  auto spec = Tokenizer::spec_from_gguf(**f);
  EXPECT_TRUE(spec.ok()) << spec.status().message();
  if (!spec.ok()) return nullptr;
  auto tok = Tokenizer::create(std::move(*spec));
  EXPECT_TRUE(tok.ok()) << tok.status().message();
  return tok.ok() ? std::move(*tok) : nullptr;
}

std::vector<int32_t> read_ids(const std::string& path) {
  std::string csv = testing::read_file(path);
  for (char& c : csv)
    if (c == ',') c = ' ';
  std::istringstream in(csv);
  std::vector<int32_t> ids;
  for (int32_t id; in >> id;) ids.push_back(id);
  return ids;
}

// <0xNN> byte token of the 512-piece vocabulary.
int32_t byte_id(uint8_t b) {
  return 3 + b;
}

TEST(TokenizerDetokTest, ReproducesLlama2cGoldenOutput) {
  auto tok = stories_tokenizer();
  ASSERT_NE(tok, nullptr);
  for (const char* run : {"stories260K_greedy_t0_n256", "stories260K_greedy_t0_n200"}) {
    const std::string ref = testing::shared_path(std::string("models/reference/") + run);
    const std::vector<int32_t> ids = read_ids(ref + ".token_ids.csv");  // without the leading BOS
    const std::string golden = testing::read_file(ref + ".stdout.txt");
    ASSERT_FALSE(ids.empty());
    StreamingDetokenizer detok(*tok);
    std::string out = detok.push(tok->bos());  // run.c starts from BOS (token 1)
    EXPECT_EQ(out, "");
    for (int32_t id : ids) out += detok.push(id);
    out += detok.flush();
    // run.c prints a final newline after the last token.
    EXPECT_EQ(out + "\n", golden) << run;
    std::vector<int32_t> with_bos = {tok->bos()};
    with_bos.insert(with_bos.end(), ids.begin(), ids.end());
    EXPECT_EQ(tok->decode(with_bos) + "\n", golden) << run;
    // As the engine feeds it: the prompt (BOS) as context, then the generated ids.
    StreamingDetokenizer engine(*tok);
    engine.push_context(tok->bos());
    std::string out2;
    for (int32_t id : ids) out2 += engine.push(id);
    EXPECT_EQ(out2 + engine.flush(), out);
  }
}

TEST(TokenizerDetokTest, HoldsBackIncompleteCharacters) {
  auto tok = stories_tokenizer();
  ASSERT_NE(tok, nullptr);
  // "🦙" is not a piece of this vocabulary: it encodes as "▁" plus its four byte tokens.
  const std::vector<int32_t> ids = tok->encode("a🦙b", false, false);
  const std::vector<int32_t> llama_bytes = {byte_id(0xF0), byte_id(0x9F), byte_id(0xA6),
                                            byte_id(0x99)};
  ASSERT_NE(std::search(ids.begin(), ids.end(), llama_bytes.begin(), llama_bytes.end()), ids.end());
  StreamingDetokenizer detok(*tok);
  std::string all;
  for (int32_t id : ids) {
    const std::string part = detok.push(id);
    if (id == byte_id(0xF0) || id == byte_id(0x9F) || id == byte_id(0xA6)) {
      EXPECT_EQ(part, "");
    }
    if (id == byte_id(0x99)) {
      EXPECT_EQ(part, "🦙");
    }
    all += part;
  }
  all += detok.flush();
  EXPECT_EQ(all, tok->decode(ids));
  EXPECT_EQ(all, "a🦙b");
}

TEST(TokenizerDetokTest, InvalidBytesBecomeReplacementCharacters) {
  auto tok = stories_tokenizer();
  ASSERT_NE(tok, nullptr);
  const std::string fffd = "\xEF\xBF\xBD";
  const int32_t a = tok->token_id("a");
  ASSERT_GE(a, 0);
  ASSERT_EQ(tok->token_to_piece(a), "a");
  {
    StreamingDetokenizer d(*tok);
    d.push_context(a);
    EXPECT_EQ(d.push(byte_id(0xFF)), fffd);  // can never start a character
    EXPECT_EQ(d.push(byte_id(0xE2)), "");    // held back
    EXPECT_EQ(d.push(byte_id(0x82)), "");    // still valid so far
    EXPECT_EQ(d.push(a), fffd + "a");        // cut short: one U+FFFD, then 'a'
    EXPECT_EQ(d.push(byte_id(0xF0)), "");
    EXPECT_EQ(d.flush(), fffd);  // incomplete at the end
    EXPECT_EQ(d.flush(), "");
  }
  {
    StreamingDetokenizer d(*tok);
    d.push_context(a);
    EXPECT_EQ(d.push(byte_id(0xC3)), "");
    EXPECT_EQ(d.push(byte_id(0xA9)), "é");
    EXPECT_EQ(d.push(byte_id(0xED)), "");
    EXPECT_EQ(d.push(byte_id(0xA0)), fffd + fffd);  // a surrogate is not UTF-8
  }
}

TEST(TokenizerDetokTest, LeadingSpaceRule) {
  auto tok = stories_tokenizer();
  ASSERT_NE(tok, nullptr);
  const std::vector<int32_t> ids = tok->encode("Once upon", false, false);
  ASSERT_EQ(tok->token_to_piece(ids[0])[0], ' ');
  EXPECT_EQ(tok->piece_after(-1, ids[0]), tok->token_to_piece(ids[0]).substr(1));
  EXPECT_EQ(tok->piece_after(tok->bos(), ids[0]), tok->token_to_piece(ids[0]).substr(1));
  EXPECT_EQ(tok->piece_after(ids[0], ids[0]), tok->token_to_piece(ids[0]));
  EXPECT_EQ(tok->decode(ids), "Once upon");
  // A prompt fed as context keeps the space of the first generated piece.
  StreamingDetokenizer d(*tok);
  d.push_context(tok->bos());
  d.push_context(ids[0]);
  EXPECT_EQ(d.push(ids[1]), tok->token_to_piece(ids[1]));
}

}  // namespace
}  // namespace hinge
