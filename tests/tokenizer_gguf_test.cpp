// VocabSpec -> GGUF -> VocabSpec (write_vocab_gguf, then Tokenizer::spec_from_gguf): every kind
// must come back as a tokenizer that encodes and decodes exactly like the original. Checked on
// TinyStories-656K's tokenizer.json (hf-bpe-spm), the llama.cpp vocabularies in shared/vocab
// (with their test vectors) and stories260K.gguf, plus small specs that use every extension.
#include <gtest/gtest.h>

#include <iterator>
#include <sstream>

#include "format/gguf.h"
#include "test_util.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"
#include "tokenizer/vocab_gguf.h"

namespace hinge {
namespace {

using gguf::GgufFile;
using gguf::GgufWriter;

std::string ids_str(const std::vector<int32_t>& ids) {
  std::string s;
  for (int32_t id : ids) s += std::to_string(id) + " ";
  return s;
}

// Writes `spec` alone into a GGUF file; returns the path.
std::string write_vocab_file(const VocabSpec& spec, const std::string& name = "vocab.gguf") {
  GgufWriter w;
  write_vocab_gguf(w, spec);
  const std::string path = testing::temp_dir() + "/" + name;
  const Status st = w.write(path);
  EXPECT_TRUE(st.ok()) << st.message();
  return path;
}

std::unique_ptr<GgufFile> open_gguf(const std::string& path) {
  auto f = GgufFile::open(path);
  EXPECT_TRUE(f.ok()) << f.status().message();
  return f.ok() ? std::move(*f) : nullptr;
}

StatusOr<VocabSpec> round_trip_spec(const VocabSpec& spec) {
  auto f = GgufFile::open(write_vocab_file(spec));
  if (!f.ok()) return f.status();
  return Tokenizer::spec_from_gguf(**f);
}

std::unique_ptr<Tokenizer> make(VocabSpec spec) {
  auto tok = Tokenizer::create(std::move(spec));
  EXPECT_TRUE(tok.ok()) << tok.status().message();
  return tok.ok() ? std::move(*tok) : nullptr;
}

VocabSpec gguf_spec(const std::string& rel) {
  auto f = open_gguf(testing::shared_path(rel));
  if (!f) return {};
  auto spec = Tokenizer::spec_from_gguf(*f);
  EXPECT_TRUE(spec.ok()) << spec.status().message();
  return spec.ok() ? std::move(*spec) : VocabSpec{};
}

VocabSpec tinystories_spec() {
  const std::string dir = testing::shared_path("models/tinystories-656k/");
  auto spec = Tokenizer::spec_from_hf(dir + "tokenizer.json", dir + "tokenizer_config.json");
  EXPECT_TRUE(spec.ok()) << spec.status().message();
  return spec.ok() ? std::move(*spec) : VocabSpec{};
}

// A few hundred varied texts: words, punctuation, digits, runs of spaces / newlines / tabs,
// accented, CJK, RTL, emoji (incl. ZWJ sequences), U+2581 itself, 4-byte characters, invalid
// UTF-8, and the special-token texts of the test vocabularies, whole and broken.
std::vector<std::string> varied_texts() {
  // clang-format off
  static const char* const kPieces[] = {
      "Once", "upon", "a", "time", "there", "was", "little", "girl", "named", "Lily", "She",
      "loved", "to", "play", "outside", "Tom's", "dog", "happy", "Hello", "world", "don't",
      "THE", "x", ".", ",", "!", "?", "'", "\"", "-", "...", ";", ":", "(", ")", "0", "42",
      "2024", "3.14", " ", " ", " ", "  ", "   ", "\n", "\n\n", "\t", " \n ", "\r\n", "é",
      "café", "naïve", "Ünïcödé", "日本語", "世界", "Привет", "γειά", "עברית", "العربية",
      "🙂", "👨‍👩‍👧", "🦙", "▁", "▁▁", "ﬁ", "A\xCC\x8A", "\xC2\xA0", "\xE3\x80\x80", "𝔘",
      "\xEF\xBF\xBD", "\xFF", "\xC3", "<|start_story|>", "<|end_story|>", "<unk>", "<s>", "</s>",
      "<|endoftext|>", "<0x41>", "<|start_story", "end_story|>", "<", ">", "|"};
  // clang-format on
  constexpr size_t kNumPieces = sizeof(kPieces) / sizeof(kPieces[0]);
  std::vector<std::string> texts = {"",
                                    " ",
                                    "  ",
                                    "a",
                                    " leading",
                                    "trailing ",
                                    "\n",
                                    "<|start_story|>",
                                    "<|start_story|>Once upon a time",
                                    "The end.<|end_story|>",
                                    " <s> </s> ",
                                    "<s>",
                                    "<|endoftext|>hi<|endoftext|>"};
  uint64_t state = 0x9E3779B97F4A7C15ull;  // fixed seed: the same texts on every run
  auto next = [&](uint64_t bound) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return (state >> 33) % bound;
  };
  while (texts.size() < 320) {
    std::string t;
    const uint64_t n = 1 + next(12);
    for (uint64_t i = 0; i < n; ++i) {
      t += kPieces[next(kNumPieces)];
      if (next(3) == 0) t += ' ';
    }
    texts.push_back(std::move(t));
  }
  return texts;
}

struct Coverage {
  size_t unk = 0, bytes = 0, control = 0, user_defined = 0, multi_token = 0;
};

// `b` must behave exactly like `a`: same ids for every text under every add/parse-special
// combination, same decoded text, same per-token properties.
Coverage expect_same_tokenizer(const Tokenizer& a, const Tokenizer& b, const std::string& what) {
  Coverage cov;
  EXPECT_EQ(a.n_vocab(), b.n_vocab()) << what;
  EXPECT_EQ(a.bos(), b.bos()) << what;
  EXPECT_EQ(a.eos(), b.eos()) << what;
  EXPECT_EQ(a.add_bos(), b.add_bos()) << what;
  EXPECT_EQ(a.spec().add_eos, b.spec().add_eos) << what;
  EXPECT_EQ(a.spec().model, b.spec().model) << what;
  if (a.n_vocab() != b.n_vocab()) return cov;
  size_t differing_ids = 0;
  for (int32_t id = 0; id < a.n_vocab(); ++id) {
    const bool same = a.token_to_piece(id) == b.token_to_piece(id) &&
                      a.token_type(id) == b.token_type(id) && a.is_eog(id) == b.is_eog(id);
    if (!same && ++differing_ids <= 5) ADD_FAILURE() << what << ": token " << id << " differs";
  }
  for (const std::string& text : varied_texts()) {
    for (bool add_special : {false, true}) {
      for (bool parse_special : {false, true}) {
        const std::vector<int32_t> ids_a = a.encode(text, add_special, parse_special);
        const std::vector<int32_t> ids_b = b.encode(text, add_special, parse_special);
        EXPECT_EQ(ids_a, ids_b) << what << " '" << text << "' add_special " << add_special
                                << " parse_special " << parse_special
                                << "\n  original:   " << ids_str(ids_a)
                                << "\n  round trip: " << ids_str(ids_b);
        EXPECT_EQ(a.decode(ids_a), b.decode(ids_b)) << what << " '" << text << "'";
        if (ids_a.size() > 1) ++cov.multi_token;
        for (int32_t id : ids_a) {
          const TokenType t = a.token_type(id);
          cov.unk += t == TokenType::kUnknown;
          cov.bytes += t == TokenType::kByte;
          cov.control += t == TokenType::kControl;
          cov.user_defined += t == TokenType::kUserDefined;
        }
      }
    }
  }
  return cov;
}

// The fields a round trip must keep (scores and `pre` may be filled in for llama.cpp).
void expect_same_spec(const VocabSpec& a, const VocabSpec& b) {
  EXPECT_EQ(a.model, b.model);
  EXPECT_EQ(a.tokens, b.tokens);
  EXPECT_EQ(a.token_types, b.token_types);
  EXPECT_EQ(a.bos, b.bos);
  EXPECT_EQ(a.eos, b.eos);
  EXPECT_EQ(a.unk, b.unk);
  EXPECT_EQ(a.pad, b.pad);
  EXPECT_EQ(a.eot, b.eot);
  EXPECT_EQ(a.eom, b.eom);
  EXPECT_EQ(a.add_bos, b.add_bos);
  EXPECT_EQ(a.add_eos, b.add_eos);
  EXPECT_EQ(a.ignore_merges, b.ignore_merges);
  EXPECT_EQ(a.pre_regexes, b.pre_regexes);
  if (a.model != "gpt2") {
    EXPECT_EQ(a.add_space_prefix, b.add_space_prefix);
  }
  if (a.model == "hf-bpe-spm") {
    EXPECT_EQ(a.merge_pairs, b.merge_pairs);
    EXPECT_EQ(a.merges, b.merges);
    EXPECT_EQ(a.byte_fallback, b.byte_fallback);
    EXPECT_EQ(a.fuse_unk, b.fuse_unk);
    EXPECT_EQ(a.escape_whitespace, b.escape_whitespace);
    EXPECT_EQ(a.metaspace_split, b.metaspace_split);
    EXPECT_EQ(a.space_prefix_scope, b.space_prefix_scope);
  }
  if (a.model == "llama" || !a.scores.empty()) {
    EXPECT_EQ(a.scores, b.scores);
  }
}

TEST(TokenizerGgufTest, TinyStoriesRoundTrip) {
  const VocabSpec spec = tinystories_spec();
  ASSERT_EQ(spec.model, "hf-bpe-spm");
  ASSERT_FALSE(spec.merge_pairs.empty());
  auto original = make(spec);
  ASSERT_NE(original, nullptr);

  auto rt_spec = round_trip_spec(spec);
  ASSERT_TRUE(rt_spec.ok()) << rt_spec.status().message();
  expect_same_spec(spec, *rt_spec);
  auto rt = make(*rt_spec);
  ASSERT_NE(rt, nullptr);
  const Coverage cov = expect_same_tokenizer(*original, *rt, "tinystories-656k");
  // The texts reach the interesting paths: fused unknowns, special tokens, real merging.
  EXPECT_GT(cov.unk, 50u);
  EXPECT_GT(cov.control, 50u);
  EXPECT_GT(cov.multi_token, 500u);

  // Known ids survive too (from TokenizerHfTest.TinyStoriesEncodings).
  EXPECT_EQ(rt->encode("Once upon a time, there was a little girl named Lily.", false, false),
            (std::vector<int32_t>{80, 147, 201, 282, 215, 286, 598, 629, 10}));
  EXPECT_EQ(rt->encode("<|start_story|>Once upon", true, true),
            (std::vector<int32_t>{1, 80, 1, 147, 201, 189, 111}));
}

TEST(TokenizerGgufTest, TinyStoriesStandardKeysFollowLlamaCpp) {
  // What llama.cpp reads: convert_hf_to_gguf.py's layout for a tokenizer.json Llama BPE
  // (model "llama", no merges), with scores that order the merges as HF does.
  const VocabSpec spec = tinystories_spec();
  auto f = open_gguf(write_vocab_file(spec));
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->get_string("tokenizer.ggml.model"), "llama");
  EXPECT_EQ(f->get_string("hinge.tokenizer.kind"), "hf-bpe-spm");
  EXPECT_EQ(f->find("tokenizer.ggml.merges"), nullptr);
  EXPECT_EQ(f->get_uint("tokenizer.ggml.bos_token_id"), 1u);
  EXPECT_EQ(f->get_uint("tokenizer.ggml.eos_token_id"), 2u);
  EXPECT_EQ(f->get_uint("tokenizer.ggml.unknown_token_id"), 0u);
  EXPECT_EQ(f->get_bool("tokenizer.ggml.add_bos_token"), true);
  EXPECT_EQ(f->get_bool("tokenizer.ggml.add_space_prefix"), true);
  auto types = f->get_int_array("tokenizer.ggml.token_type");
  ASSERT_TRUE(types);
  EXPECT_EQ((*types)[1], static_cast<int64_t>(TokenType::kControl));
  auto scores = f->get_float_array("tokenizer.ggml.scores");
  ASSERT_TRUE(scores);
  ASSERT_EQ(scores->size(), spec.tokens.size());
  // Merge rank r makes its token score -r; tokens no merge makes score below all of them.
  const float floor = -static_cast<float>(spec.merge_pairs.size());
  auto id_of = [&](const std::string& text) {
    for (size_t i = 0; i < spec.tokens.size(); ++i)
      if (spec.tokens[i] == text) return i;
    ADD_FAILURE() << "no token '" << text << "'";
    return size_t{0};
  };
  const auto& [l0, r0] = spec.merge_pairs[0];
  const auto& [l9, r9] = spec.merge_pairs[9];
  EXPECT_EQ((*scores)[id_of(l0 + r0)], 0.0f);
  EXPECT_EQ((*scores)[id_of(l9 + r9)], -9.0f);
  EXPECT_EQ((*scores)[1], floor);  // <|start_story|>
  EXPECT_EQ((*scores)[id_of("e")], floor);
  size_t made = 0;
  for (float s : *scores) made += s > floor;
  EXPECT_GT(made, spec.merge_pairs.size() * 9 / 10);
}

TEST(TokenizerGgufTest, TinyStoriesLlamaCppViewMatchesHfOnPlainText) {
  // llama.cpp reads only tokenizer.ggml.*: an SPM ("llama") tokenizer over the rank-derived
  // scores. hinge's "llama" kind is llama.cpp-exact, so it shows what llama.cpp would produce.
  // On plain English that view agrees with HF exactly; with convert_hf_to_gguf.py's flat -1000
  // scores it would not (merges would go left to right).
  const VocabSpec spec = tinystories_spec();
  auto f = open_gguf(write_vocab_file(spec));
  ASSERT_NE(f, nullptr);
  GgufWriter standard_only;
  for (const auto& [key, value] : f->metadata())
    if (key.rfind("tokenizer.ggml.", 0) == 0) standard_only.set(key, value);
  const std::string path = testing::temp_dir() + "/standard.gguf";
  ASSERT_TRUE(standard_only.write(path).ok());
  auto sf = open_gguf(path);
  ASSERT_NE(sf, nullptr);
  auto llama_view = Tokenizer::spec_from_gguf(*sf);
  ASSERT_TRUE(llama_view.ok()) << llama_view.status().message();
  EXPECT_EQ(llama_view->model, "llama");
  VocabSpec flat = *llama_view;
  flat.scores.assign(flat.tokens.size(), -1000.0f);
  auto hf = make(spec);
  auto llama = make(*llama_view);
  auto llama_flat = make(flat);
  ASSERT_TRUE(hf && llama && llama_flat);

  // clang-format off
  static const char* const kWords[] = {
      "Once", "upon", "a", "time", "there", "was", "little", "girl", "named", "Lily", ".",
      "She", "loved", "to", "play", "outside", "with", "her", "dog", "Max", ",", "One", "day",
      "they", "went", "the", "park", "and", "saw", "big", "red", "ball", "Tom", "said",
      "\"", "Let's", "!", "were", "very", "happy", "had", "fun", "all"};
  // clang-format on
  uint64_t state = 12345;
  auto next = [&](uint64_t bound) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return (state >> 33) % bound;
  };
  size_t same = 0, same_flat = 0;
  constexpr size_t kTexts = 200;
  for (size_t i = 0; i < kTexts; ++i) {
    std::string text;
    for (uint64_t k = 0, n = 3 + next(18); k < n; ++k)
      text += (k ? " " : "") + std::string(kWords[next(std::size(kWords))]);
    const auto ids = hf->encode(text, true, false);
    const auto llama_ids = llama->encode(text, true, false);
    EXPECT_EQ(llama_ids, ids) << text;
    same += llama_ids == ids;
    same_flat += llama_flat->encode(text, true, false) == ids;
  }
  EXPECT_EQ(same, kTexts);
  EXPECT_LT(same_flat, kTexts / 2);
}

TEST(TokenizerGgufTest, Stories260kRoundTrip) {
  const VocabSpec spec = gguf_spec("models/stories260K.gguf");
  ASSERT_EQ(spec.model, "llama");
  auto original = make(spec);
  ASSERT_NE(original, nullptr);
  auto rt_spec = round_trip_spec(spec);
  ASSERT_TRUE(rt_spec.ok()) << rt_spec.status().message();
  expect_same_spec(spec, *rt_spec);
  auto rt = make(*rt_spec);
  ASSERT_NE(rt, nullptr);
  const Coverage cov = expect_same_tokenizer(*original, *rt, "stories260K");
  EXPECT_GT(cov.bytes, 50u);  // byte fallback
  EXPECT_GT(cov.control, 10u);
}

// llama.cpp's test vectors (shared/vocab/*.gguf.inp/.out, no BOS, no special parsing).
std::vector<std::pair<std::string, std::vector<int32_t>>> vocab_cases(const std::string& vocab) {
  const std::string inp = testing::read_file(testing::shared_path("vocab/" + vocab + ".inp"));
  const std::string outp = testing::read_file(testing::shared_path("vocab/" + vocab + ".out"));
  std::vector<std::pair<std::string, std::vector<int32_t>>> cases;
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::istringstream lines(outp);
  for (size_t pos = 0; pos < inp.size();) {
    size_t next = inp.find(sep, pos);
    if (next == std::string::npos) next = inp.size();
    std::string line;
    if (!std::getline(lines, line)) break;
    std::vector<int32_t> ids;
    std::istringstream in(line);
    for (int32_t id; in >> id;) ids.push_back(id);
    cases.emplace_back(inp.substr(pos, next - pos), std::move(ids));
    pos = next == inp.size() ? next : next + sep.size();
  }
  return cases;
}

class TokenizerGgufVocabTest : public ::testing::TestWithParam<std::string> {};

TEST_P(TokenizerGgufVocabTest, RoundTripKeepsLlamaCppVectors) {
  const std::string vocab = "ggml-vocab-" + GetParam() + ".gguf";
  const VocabSpec spec = gguf_spec("vocab/" + vocab);
  ASSERT_FALSE(spec.tokens.empty());
  auto rt_spec = round_trip_spec(spec);
  ASSERT_TRUE(rt_spec.ok()) << rt_spec.status().message();
  expect_same_spec(spec, *rt_spec);
  EXPECT_EQ(rt_spec->merges, spec.merges);
  EXPECT_EQ(rt_spec->pre, spec.pre);
  auto rt = make(*rt_spec);
  ASSERT_NE(rt, nullptr);
  const auto cases = vocab_cases(vocab);
  ASSERT_GE(cases.size(), 40u);
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::vector<int32_t> got = rt->encode(cases[i].first, false, false);
    EXPECT_EQ(got, cases[i].second)
        << vocab << " case " << i << " '" << cases[i].first
        << "'\n  expected: " << ids_str(cases[i].second) << "\n  got:      " << ids_str(got);
  }
  auto original = make(spec);
  ASSERT_NE(original, nullptr);
  expect_same_tokenizer(*original, *rt, vocab);
}

INSTANTIATE_TEST_SUITE_P(TokenizerVocabs, TokenizerGgufVocabTest,
                         ::testing::Values("llama-spm", "gpt-2", "falcon", "deepseek-coder"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string name = info.param;
                           for (char& c : name)
                             if (c == '-') c = '_';
                           return name;
                         });

// An hf-bpe-spm spec that only the hinge keys can carry: merge pieces holding spaces (no
// whitespace escaping), no unk and no BOS (llama.cpp would default them to 0 and 1), Metaspace.
VocabSpec spaced_hf_spec(SpacePrefixScope scope) {
  VocabSpec s;
  s.model = "hf-bpe-spm";
  s.tokens = {"a",
              "b",
              " ",
              "ab",
              "ab ",
              "ab b",
              "\xE2\x96\x81",
              "\xE2\x96\x81"
              "a",
              "<eos>"};
  s.token_types = {1, 1, 1, 1, 1, 1, 1, 1, 3};
  s.merge_pairs = {{"a", "b"}, {"ab", " "}, {"ab ", "b"}, {"\xE2\x96\x81", "a"}};
  s.bos = -1;
  s.eos = 8;
  s.unk = -1;
  s.add_bos = false;
  s.byte_fallback = false;
  s.fuse_unk = true;
  s.escape_whitespace = false;
  s.metaspace_split = scope == SpacePrefixScope::kMetaspaceAlways;
  s.add_space_prefix = scope != SpacePrefixScope::kEachFragment;
  s.space_prefix_scope = scope;
  return s;
}

TEST(TokenizerGgufTest, HfSpecExtensionsRoundTrip) {
  for (SpacePrefixScope scope :
       {SpacePrefixScope::kEachFragment, SpacePrefixScope::kWholeText,
        SpacePrefixScope::kMetaspaceAlways, SpacePrefixScope::kMetaspaceFirst}) {
    const VocabSpec spec = spaced_hf_spec(scope);
    auto rt_spec = round_trip_spec(spec);
    ASSERT_TRUE(rt_spec.ok()) << rt_spec.status().message();
    expect_same_spec(spec, *rt_spec);
    EXPECT_EQ(rt_spec->unk, -1);
    EXPECT_EQ(rt_spec->bos, -1);
    auto original = make(spec);
    auto rt = make(*rt_spec);
    ASSERT_NE(original, nullptr);
    ASSERT_NE(rt, nullptr);
    expect_same_tokenizer(*original, *rt, "spaced hf spec");
    if (scope == SpacePrefixScope::kEachFragment) {
      // "ab b" is one token only through the merges ("ab", " ") and ("ab ", "b").
      EXPECT_EQ(rt->encode("ab b", false, false), (std::vector<int32_t>{5}));
      EXPECT_EQ(rt->encode("ab b<eos>", true, true), (std::vector<int32_t>{5, 8}));
    }
  }
  // "a b" merge strings (VocabSpec::merges) instead of pairs.
  VocabSpec spec = spaced_hf_spec(SpacePrefixScope::kEachFragment);
  spec.merge_pairs.clear();
  spec.merges = {"a b", "\xE2\x96\x81 a"};
  spec.escape_whitespace = true;
  auto rt_spec = round_trip_spec(spec);
  ASSERT_TRUE(rt_spec.ok()) << rt_spec.status().message();
  expect_same_spec(spec, *rt_spec);
  auto original = make(spec);
  auto rt = make(*rt_spec);
  ASSERT_NE(rt, nullptr);
  EXPECT_EQ(rt->encode("ab a", false, false), (std::vector<int32_t>{3, 7}));
  expect_same_tokenizer(*original, *rt, "hf spec with merge strings");
}

TEST(TokenizerGgufTest, Gpt2SpecExtensionsRoundTrip) {
  // Byte-level BPE with an explicit regex chain, ignore_merges, an EOT token and a merge whose
  // pieces hold a space (written as U+0120 in tokenizer.ggml.merges, exactly in the hinge key).
  VocabSpec s;
  s.model = "gpt2";
  s.pre = "hf-split";
  s.pre_regexes = {"'s|'t| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+"};
  for (int b = 0; b < 256; ++b)
    s.tokens.push_back(unicode::byte_to_unicode(static_cast<uint8_t>(b)));
  const std::string sp = unicode::byte_to_unicode(' ');
  for (const std::string& t : {std::string("ab"), sp + "a", sp + "ab", sp + "abab",
                               std::string("<|eot|>"), std::string("x y")})
    s.tokens.push_back(t);
  s.token_types.assign(s.tokens.size(), 1);
  s.token_types[260] = 3;
  s.merge_pairs = {{sp, "a"}, {sp + "a", "b"}, {"a", "b"}, {"x", " y"}};
  s.ignore_merges = true;
  s.bos = -1;
  s.eos = 260;
  s.eot = 260;
  s.add_bos = false;
  s.add_space_prefix = false;
  auto f = open_gguf(write_vocab_file(s));
  ASSERT_NE(f, nullptr);
  auto merges = f->get_string_array("tokenizer.ggml.merges");
  ASSERT_TRUE(merges);
  EXPECT_EQ(merges->back(), "x \xC4\xA0y");
  auto rt_spec = round_trip_spec(s);
  ASSERT_TRUE(rt_spec.ok()) << rt_spec.status().message();
  expect_same_spec(s, *rt_spec);
  EXPECT_EQ(rt_spec->merge_pairs, s.merge_pairs);
  auto original = make(s);
  auto rt = make(*rt_spec);
  ASSERT_NE(rt, nullptr);
  // " abab" is a token and ignore_merges keeps it whole; " aba" is merged by rank.
  EXPECT_EQ(rt->encode(" abab aba", false, false), (std::vector<int32_t>{259, 258, 'a'}));
  EXPECT_TRUE(rt->is_eog(260));
  expect_same_tokenizer(*original, *rt, "gpt2 spec");
}

TEST(TokenizerGgufTest, RejectsBadHingeKeys) {
  const VocabSpec spec = spaced_hf_spec(SpacePrefixScope::kEachFragment);
  auto bad = [&](const std::string& key, gguf::Value v) {
    GgufWriter w;
    write_vocab_gguf(w, spec);
    w.set(key, std::move(v));
    const std::string path = testing::temp_dir() + "/bad.gguf";
    EXPECT_TRUE(w.write(path).ok());
    auto f = open_gguf(path);
    if (!f) return std::string();
    auto r = Tokenizer::spec_from_gguf(*f);
    EXPECT_FALSE(r.ok()) << key;
    return r.ok() ? std::string() : r.status().message();
  };
  EXPECT_NE(bad("hinge.tokenizer.kind", gguf::Value::str("wordpiece")).find("wordpiece"),
            std::string::npos);
  EXPECT_NE(bad("hinge.tokenizer.merge_pairs", gguf::Value::str_array({"a", "b", "c"})).find("odd"),
            std::string::npos);
  EXPECT_NE(bad("hinge.tokenizer.fuse_unk", gguf::Value::u32(1)).find("fuse_unk"),
            std::string::npos);
  EXPECT_NE(
      bad("hinge.tokenizer.space_prefix_scope", gguf::Value::str("sometimes")).find("sometimes"),
      std::string::npos);
  // The standard layer alone still has to name a model llama.cpp knows.
  EXPECT_NE(bad("tokenizer.ggml.model", gguf::Value::str("hf-bpe-spm")).find("unsupported"),
            std::string::npos);
}

}  // namespace
}  // namespace hinge
