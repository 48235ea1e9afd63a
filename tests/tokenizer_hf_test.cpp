// Hugging Face tokenizer.json: the TinyStories-656K tokenizer (BPE over raw text with a U+2581
// Prepend/Replace normalizer, merges by rank, byte fallback without byte pieces -> fused unk) and
// small byte-level files written here.
#include <gtest/gtest.h>


#include "test_util.h"
#include "tokenizer/tokenizer.h"

namespace hinge {
namespace {

std::unique_ptr<Tokenizer> tinystories() {
  const std::string dir = testing::shared_path("models/tinystories-656k/");
  auto spec = Tokenizer::spec_from_hf(dir + "tokenizer.json", dir + "tokenizer_config.json");
  EXPECT_TRUE(spec.ok()) << spec.status().message();
  if (!spec.ok()) return nullptr;
  auto tok = Tokenizer::create(std::move(*spec));
  EXPECT_TRUE(tok.ok()) << tok.status().message();
  return tok.ok() ? std::move(*tok) : nullptr;
}

TEST(TokenizerHfTest, TinyStoriesSpec) {
  auto tok = tinystories();
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(tok->spec().model, "hf-bpe-spm");
  EXPECT_EQ(tok->n_vocab(), 2048);
  EXPECT_EQ(tok->bos(), 1);
  EXPECT_EQ(tok->eos(), 2);
  EXPECT_EQ(tok->spec().unk, 0);
  EXPECT_TRUE(tok->add_bos());
  EXPECT_FALSE(tok->spec().add_eos);
  EXPECT_TRUE(tok->is_eog(2));
  EXPECT_EQ(tok->token_type(1), TokenType::kControl);
  EXPECT_EQ(tok->token_type(0), TokenType::kUnknown);
  EXPECT_EQ(tok->token_to_piece(2039), "felt very ");
}

TEST(TokenizerHfTest, TinyStoriesEncodings) {
  auto tok = tinystories();
  ASSERT_NE(tok, nullptr);
  // Expected ids from a reference implementation of tokenizers' BPE (normalize the whole text,
  // split on added tokens, merge by rank, unknown characters -> fused <unk>).
  const std::vector<std::pair<std::string, std::vector<int32_t>>> cases = {
      {"Once upon a time, there was a little girl named Lily.",
       {80, 147, 201, 282, 215, 286, 598, 629, 10}},
      {"Hello world", {80, 1288, 139, 410, 555}},
      {" leading space", {80, 80, 656, 56, 149, 415, 53, 682}},
      {"trailing space ", {80, 925, 129, 149, 415, 53, 201}},
      {"two  spaces", {80, 1209, 80, 415, 53, 1499}},
      {"She said, \"Hi!\"\nBut then, he ran.", {80, 892, 204, 1158, 572, 344, 1026, 97, 494, 10}},
      {"naïve café 日本 🦙", {80, 557, 0, 218, 295, 58, 0, 80, 0, 80, 0}},
      {"The end.<|end_story|>", {80, 247, 183, 10, 2}},
      {"<|start_story|>Once upon", {80, 1, 147, 201, 189, 111}},
      {"Tom's dog named Max was happy.", {80, 380, 228, 943, 458, 1907, 10}},
      {"x", {80, 76}},
      {"", {}},
  };
  for (const auto& [text, ids] : cases) {
    EXPECT_EQ(tok->encode(text, false, true), ids) << "'" << text << "'";
    std::vector<int32_t> with_bos = {1};
    with_bos.insert(with_bos.end(), ids.begin(), ids.end());
    EXPECT_EQ(tok->encode(text, true, true), with_bos) << "'" << text << "'";
  }
  // Without parse_special, special-token markup is plain text.
  const std::vector<int32_t> plain = tok->encode("The end.<|end_story|>", false, false);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), 2), 0);
  EXPECT_EQ(tok->decode(plain), "The end.<|end_story|>");
}

TEST(TokenizerHfTest, TinyStoriesDecodeRoundTrips) {
  auto tok = tinystories();
  ASSERT_NE(tok, nullptr);
  for (const char* s : {"Once upon a time, there was a little girl named Lily.", " leading space",
                        "trailing space ", "two  spaces", "She said, \"Hi!\"\nBut then, he ran."}) {
    EXPECT_EQ(tok->decode(tok->encode(s, false, false)), s);
    EXPECT_EQ(tok->decode(tok->encode(s, true, false)), s);
  }
}

TEST(TokenizerHfTest, TinyStoriesOneMegabyte) {
  auto tok = tinystories();
  ASSERT_NE(tok, nullptr);
  // No pre-tokenizer: the whole text is one BPE word, so this checks the merge loop scales.
  const std::string unit =
      "Once upon a time, there was a little girl named Lily. She said, \"Hi!\"\n";
  std::string text;
  while (text.size() < (1u << 20)) text += unit;
  const std::vector<int32_t> ids = tok->encode(text, false, false);
  EXPECT_EQ(tok->decode(ids), text);
  EXPECT_LT(ids.size(), text.size() / 3);
}

std::string write(const std::string& dir, const std::string& name, const std::string& text) {
  const std::string path = dir + "/" + name;
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

TEST(TokenizerHfTest, ByteLevelTokenizerJson) {
  const std::string dir = testing::temp_dir();
  const std::string vocab =
      R"({"a": 0, "b": 1, "\u0120": 2, "ab": 3, "\u0120ab": 4, "<|endoftext|>": 5, "\u010a": 6})";
  const std::string body = R"("model": {"type": "BPE", "vocab": )" + vocab +
                           R"(, "merges": ["a b", ["\u0120", "ab"]]},
      "added_tokens": [{"id": 5, "content": "<|endoftext|>", "special": true}],
      "decoder": {"type": "ByteLevel"})";
  const std::string config =
      write(dir, "config.json",
            R"({"bos_token": "<|endoftext|>", "eos_token": {"content": "<|endoftext|>"}})");
  const std::string plain =
      write(dir, "plain.json",
            "{" + body + R"(, "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false}})");
  const std::string split = write(
      dir, "split.json", "{" + body + R"(, "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": "(?i:'s|'t)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\s+(?!\\S)|\\s+"},
         "behavior": "Isolated", "invert": false},
        {"type": "ByteLevel", "add_prefix_space": false, "use_regex": false}]}})");
  for (const std::string& path : {plain, split}) {
    auto spec = Tokenizer::spec_from_hf(path, config);
    ASSERT_TRUE(spec.ok()) << spec.status().message();
    EXPECT_EQ(spec->model, "gpt2");
    EXPECT_EQ(spec->bos, 5);
    EXPECT_EQ(spec->eos, 5);
    EXPECT_FALSE(spec->add_bos);
    auto tok = Tokenizer::create(*spec);
    ASSERT_TRUE(tok.ok()) << tok.status().message();
    EXPECT_EQ((*tok)->encode("ab ab", false, false), (std::vector<int32_t>{3, 4})) << path;
    EXPECT_EQ((*tok)->encode("ab<|endoftext|>\n", false, true), (std::vector<int32_t>{3, 5, 6}))
        << path;
    EXPECT_EQ((*tok)->decode({3, 4, 5, 6}), "ab ab\n");
  }
}

TEST(TokenizerHfTest, MetaspaceTokenizerJson) {
  const std::string dir = testing::temp_dir();
  const std::string config =
      write(dir, "config.json", R"({"bos_token": "<s>", "add_bos_token": true})");
  auto make = [&](const std::string& name, const std::string& metaspace) {
    return write(dir, name,
                 R"({"model": {"type": "BPE", "unk_token": "<unk>", "fuse_unk": true,
        "vocab": {"<unk>": 0, "\u2581": 1, "a": 2, "b": 3, "\u2581a": 4, "\u2581b": 5, "<s>": 6},
        "merges": ["\u2581 a", "\u2581 b"]},
      "added_tokens": [{"id": 6, "content": "<s>", "special": true}],
      "pre_tokenizer": {"type": "Metaspace", "replacement": "\u2581", )" +
                     metaspace + "}}");
  };
  auto load = [&](const std::string& path) -> std::unique_ptr<Tokenizer> {
    auto spec = Tokenizer::spec_from_hf(path, config);
    EXPECT_TRUE(spec.ok()) << spec.status().message();
    if (!spec.ok()) return nullptr;
    EXPECT_EQ(spec->model, "hf-bpe-spm");
    auto tok = Tokenizer::create(std::move(*spec));
    EXPECT_TRUE(tok.ok()) << tok.status().message();
    return tok.ok() ? std::move(*tok) : nullptr;
  };
  using Ids = std::vector<int32_t>;
  auto first = load(make("first.json", R"("prepend_scheme": "first", "split": true)"));
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(first->encode("a b", false, true), (Ids{4, 5}));
  EXPECT_EQ(first->encode("a b", true, true), (Ids{6, 4, 5}));
  EXPECT_EQ(first->encode(" a", false, true), (Ids{4}));            // already starts with a space
  EXPECT_EQ(first->encode("<s>a b", false, true), (Ids{6, 2, 5}));  // not at offset 0
  EXPECT_EQ(first->encode("acc b", false, true), (Ids{4, 0, 5}));   // unknowns fused
  EXPECT_EQ(first->decode({6, 4, 5}), "a b");
  auto always = load(make("always.json", R"("prepend_scheme": "always", "split": false)"));
  ASSERT_NE(always, nullptr);
  EXPECT_EQ(always->encode("<s>a b", false, true), (Ids{6, 4, 5}));
  EXPECT_EQ(always->encode("a  b", false, true), (Ids{4, 1, 5}));
}

TEST(TokenizerHfTest, RejectsBadFiles) {
  const std::string dir = testing::temp_dir();
  const std::string broken = write(dir, "broken.json", "{\"model\": ");
  auto a = Tokenizer::spec_from_hf(broken, "");
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.status().message().find("broken.json"), std::string::npos);
  const std::string wordpiece =
      write(dir, "wp.json", R"({"model": {"type": "WordPiece", "vocab": {"a": 0}}})");
  auto b = Tokenizer::spec_from_hf(wordpiece, "");
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find("WordPiece"), std::string::npos);
  const std::string bad_vocab =
      write(dir, "bad.json", R"({"model": {"type": "BPE", "vocab": {"a": "zero"}, "merges": []}})");
  EXPECT_FALSE(Tokenizer::spec_from_hf(bad_vocab, "").ok());
  const std::string bad_merge =
      write(dir, "merge.json", R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": [7]}})");
  EXPECT_FALSE(Tokenizer::spec_from_hf(bad_merge, "").ok());
  EXPECT_FALSE(Tokenizer::spec_from_hf(dir + "/missing.json", "").ok());
}

}  // namespace
}  // namespace hinge
