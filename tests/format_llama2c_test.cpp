// llama2.c checkpoint and tokenizer readers: stories260K.bin / tok512.bin (cross-checked
// against stories260K.gguf, the same model converted by ggml), synthetic and corrupt files.
#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "format/gguf.h"
#include "format/llama2c.h"
#include "test_util.h"

namespace hinge::llama2c {
namespace {

using hinge::testing::read_file;
using hinge::testing::shared_path;

// Owns 4-byte-aligned bytes (std::string's buffer alignment is not guaranteed for floats).
struct Buf {
  std::vector<uint32_t> words;
  size_t size = 0;
  explicit Buf(const std::string& s) : words(s.size() / 4 + 1), size(s.size()) {
    std::memcpy(words.data(), s.data(), s.size());
  }
  const uint8_t* data() const { return reinterpret_cast<const uint8_t*>(words.data()); }
};

StatusOr<std::unique_ptr<Checkpoint>> parse(const std::string& bytes,
                                            const std::string& name = "bad.bin") {
  static std::vector<std::unique_ptr<Buf>> keep;  // parsed objects point into these
  keep.push_back(std::make_unique<Buf>(bytes));
  return Checkpoint::from_memory(keep.back()->data(), keep.back()->size, name);
}

void expect_error(const std::string& bytes, const std::string& needle) {
  auto r = parse(bytes);
  ASSERT_FALSE(r.ok()) << needle;
  EXPECT_EQ(r.status().message().rfind("bad.bin: ", 0), 0u) << r.status().message();
  EXPECT_NE(r.status().message().find(needle), std::string::npos) << r.status().message();
}

std::string header(std::vector<int32_t> h) {
  return std::string(reinterpret_cast<const char*>(h.data()), h.size() * 4);
}

// A tiny valid checkpoint: dim 4, hidden 6, 1 layer, 2 heads, 1 kv head, vocab 3, seq_len 2.
// Float k of the payload holds the value k, so every pointer can be checked by its value.
std::string tiny_checkpoint(bool shared) {
  const uint64_t n = 3 * 4 + 4 + 16 + 8 + 8 + 16 + 4 + 24 * 3 + 4 + 2 * 2 + (shared ? 0 : 12);
  std::vector<float> f(n);
  for (size_t k = 0; k < n; ++k) f[k] = static_cast<float>(k);
  return header({4, 6, 1, 2, 1, shared ? 3 : -3, 2}) +
         std::string(reinterpret_cast<const char*>(f.data()), n * 4);
}

TEST(FormatLlama2c, ReadsStories260KCheckpoint) {
  auto r = Checkpoint::open(shared_path("models/stories260K.bin"));
  ASSERT_TRUE(r.ok()) << r.status().message();
  const Checkpoint& ck = **r;
  const Config& c = ck.config();
  EXPECT_EQ(c.dim, 64);
  EXPECT_EQ(c.hidden_dim, 172);
  EXPECT_EQ(c.n_layers, 5);
  EXPECT_EQ(c.n_heads, 8);
  EXPECT_EQ(c.n_kv_heads, 4);
  EXPECT_EQ(c.vocab_size, 512);
  EXPECT_EQ(c.seq_len, 512);
  EXPECT_TRUE(c.shared_classifier);
  EXPECT_EQ(c.head_size(), 8);
  EXPECT_EQ(c.kv_dim(), 32);
  const Weights& w = ck.weights();
  const std::string raw = read_file(shared_path("models/stories260K.bin"));
  EXPECT_EQ(std::memcmp(w.token_embedding, raw.data() + 28, 4), 0);
  EXPECT_EQ(w.wcls, w.token_embedding);
  // rms_final sits just before the two freq_cis tables (2 x 512 x 4 floats) at the end.
  EXPECT_EQ(std::memcmp(w.rms_final, raw.data() + raw.size() - (2 * 512 * 4 + 64) * 4, 64 * 4), 0);
  ASSERT_EQ(ck.tensors().size(), 2u + 5 * 9);  // no output.weight: shared classifier
  EXPECT_EQ(ck.find_tensor("output.weight"), nullptr);
  const Tensor* q = ck.find_tensor("blk.2.attn_q.weight");
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q->ne, (std::vector<uint64_t>{64, 64}));
  EXPECT_EQ(q->data, w.wq + 2 * 64 * 64);
  EXPECT_EQ(ck.find_tensor("blk.0.ffn_down.weight")->ne, (std::vector<uint64_t>{172, 64}));
  EXPECT_EQ(ck.find_tensor("blk.4.attn_k.weight")->data, w.wk + 4 * 32 * 64);
}

// The ggml conversion of the same model holds exactly the same bytes under the same names and
// shapes: this pins the array order, shapes and per-layer strides.
TEST(FormatLlama2c, MatchesGgufConversionByteForByte) {
  auto ck = Checkpoint::open(shared_path("models/stories260K.bin"));
  ASSERT_TRUE(ck.ok()) << ck.status().message();
  auto g = gguf::GgufFile::open(shared_path("models/stories260K.gguf"));
  ASSERT_TRUE(g.ok()) << g.status().message();
  for (const Tensor& t : (*ck)->tensors()) {
    const gguf::TensorInfo* gt = (*g)->find_tensor(t.name);
    ASSERT_NE(gt, nullptr) << t.name;
    EXPECT_EQ(gt->ne, t.ne) << t.name;
    ASSERT_EQ(gt->num_bytes, t.num_elements() * 4) << t.name;
    EXPECT_EQ(std::memcmp(gt->data, t.data, gt->num_bytes), 0) << t.name;
  }
  const gguf::TensorInfo* out = (*g)->find_tensor("output.weight");
  ASSERT_NE(out, nullptr);
  EXPECT_EQ(std::memcmp(out->data, (*ck)->weights().wcls, out->num_bytes), 0);
}

TEST(FormatLlama2c, ReadsTok512) {
  auto r = read_tokenizer(shared_path("models/tok512.bin"), 512);
  ASSERT_TRUE(r.ok()) << r.status().message();
  const Vocab& v = *r;
  EXPECT_EQ(v.max_token_length, 7);
  ASSERT_EQ(v.pieces.size(), 512u);
  ASSERT_EQ(v.scores.size(), 512u);
  EXPECT_EQ(v.pieces[0], "<unk>");
  EXPECT_EQ(v.pieces[1], "\n<s>\n");  // llama2.c's export wraps BOS/EOS in newlines
  EXPECT_EQ(v.pieces[2], "\n</s>\n");
  EXPECT_EQ(v.pieces[3], "<0x00>");
  EXPECT_EQ(v.pieces[300], " ha");
  EXPECT_EQ(v.scores[300], -41.0f);
  EXPECT_EQ(v.pieces[511], "\xe2\x80\x8a");
  EXPECT_EQ(v.scores[511], -252.0f);
  // Same vocabulary as the GGUF conversion, apart from the BOS/EOS spelling and llama2.c's
  // export writing SentencePiece's U+2581 word marker as a plain space.
  auto g = gguf::GgufFile::open(shared_path("models/stories260K.gguf"));
  ASSERT_TRUE(g.ok());
  auto tokens = (*g)->get_string_array("tokenizer.ggml.tokens");
  auto scores = (*g)->get_float_array("tokenizer.ggml.scores");
  ASSERT_TRUE(tokens && scores);
  for (size_t k = 3; k < 512; ++k) {
    // (Built by appending: g++ 12 -O3 warns falsely on std::string::replace here.)
    const std::string& g = (*tokens)[k];
    std::string want;
    for (size_t at = 0; at < g.size();) {
      if (g.compare(at, 3, "\xe2\x96\x81") == 0) {
        want += ' ';
        at += 3;
      } else {
        want += g[at++];
      }
    }
    EXPECT_EQ(v.pieces[k], want) << k;
    EXPECT_EQ(v.scores[k], (*scores)[k]) << k;
  }
}

TEST(FormatLlama2c, TokenizerRejectsCorruption) {
  const std::string path = shared_path("models/tok512.bin");
  const std::string raw = read_file(path);
  auto p = [&](const std::string& b, int32_t n) {
    return parse_tokenizer(reinterpret_cast<const uint8_t*>(b.data()), b.size(), n, "tok.bin");
  };
  auto expect_tok_error = [&](const std::string& b, int32_t n, const std::string& needle) {
    auto r = p(b, n);
    ASSERT_FALSE(r.ok()) << needle;
    EXPECT_EQ(r.status().message().rfind("tok.bin: ", 0), 0u) << r.status().message();
    EXPECT_NE(r.status().message().find(needle), std::string::npos) << r.status().message();
  };
  expect_tok_error(raw, 511, "bytes left after 511 tokens");
  expect_tok_error(raw, 513, "truncated at token 512");
  expect_tok_error(raw, 0, "invalid vocabulary size 0");
  expect_tok_error(raw, 100000, "cannot hold 100000 tokens");
  expect_tok_error("", 1, "too small");
  std::string neg = raw;
  const int32_t minus = -5;
  std::memcpy(neg.data() + 4 + 4, &minus, 4);  // token 0's length
  expect_tok_error(neg, 512, "token 0 has length -5");
  std::string longer = raw;
  const int32_t eight = 8;
  std::memcpy(longer.data() + 4 + 4, &eight, 4);
  expect_tok_error(longer, 512, "token 0 has length 8");
  for (size_t cut = 0; cut < raw.size(); cut += 7) {
    auto r = p(raw.substr(0, cut), 512);
    ASSERT_FALSE(r.ok()) << cut;
  }
  auto bad = read_tokenizer(shared_path("models"), 512);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("is a directory"), std::string::npos);
}

TEST(FormatLlama2c, UnsharedClassifierAndLayout) {
  auto shared = parse(tiny_checkpoint(true), "tiny.bin");
  ASSERT_TRUE(shared.ok()) << shared.status().message();
  const Weights& w = (*shared)->weights();
  // Offsets (in floats) from the layout: emb 12, rms_att 4, wq 16, wk 8, wv 8, wo 16, rms_ffn 4,
  // w1/w2/w3 24 each, rms_final 4.
  EXPECT_EQ(w.token_embedding[0], 0.0f);
  EXPECT_EQ(w.rms_att[0], 12.0f);
  EXPECT_EQ(w.wq[0], 16.0f);
  EXPECT_EQ(w.wk[0], 32.0f);
  EXPECT_EQ(w.wv[0], 40.0f);
  EXPECT_EQ(w.wo[0], 48.0f);
  EXPECT_EQ(w.rms_ffn[0], 64.0f);
  EXPECT_EQ(w.w1[0], 68.0f);
  EXPECT_EQ(w.w2[0], 92.0f);
  EXPECT_EQ(w.w3[0], 116.0f);
  EXPECT_EQ(w.rms_final[0], 140.0f);
  EXPECT_EQ(w.wcls, w.token_embedding);
  EXPECT_EQ((*shared)->find_tensor("blk.0.attn_k.weight")->ne, (std::vector<uint64_t>{4, 2}));
  EXPECT_EQ((*shared)->find_tensor("blk.0.attn_output.weight")->ne, (std::vector<uint64_t>{4, 4}));

  auto unshared = parse(tiny_checkpoint(false), "tiny.bin");
  ASSERT_TRUE(unshared.ok()) << unshared.status().message();
  EXPECT_FALSE((*unshared)->config().shared_classifier);
  EXPECT_EQ((*unshared)->config().vocab_size, 3);
  EXPECT_EQ((*unshared)->weights().wcls[0], 148.0f);  // after the 2 x 2 freq_cis floats
  const Tensor* out = (*unshared)->find_tensor("output.weight");
  ASSERT_NE(out, nullptr);
  EXPECT_EQ(out->ne, (std::vector<uint64_t>{4, 3}));
  EXPECT_EQ(out->data[11], 159.0f);  // the last float of the file
}

TEST(FormatLlama2c, RejectsCorruptCheckpoints) {
  const std::string tiny = tiny_checkpoint(true);
  const std::string body = tiny.substr(28);
  expect_error("short", "too small");
  expect_error(header({0x616b3432, 2, 0, 0, 0, 0, 0}) + body, "\"ak42\" header");
  expect_error(header({4, 6, 1, 2, 1, 3, 0}) + body, "non-positive size");
  expect_error(header({4, 6, 1, 2, 1, std::numeric_limits<int32_t>::min(), 2}) + body,
               "non-positive size");
  expect_error(header({4, 6, 1, 3, 1, 3, 2}) + body, "inconsistent header");  // 4 % 3
  expect_error(header({4, 6, 1, 4, 1, 3, 2}) + body, "inconsistent header");  // head size 1
  expect_error(header({4, 6, 1, 2, 4, 3, 2}) + body, "inconsistent header");  // kv > heads
  expect_error(header({1 << 30, 1 << 30, 1 << 30, 2, 2, 1 << 30, 2}) + body, "overflow");
  expect_error(header({4, 6, 1, 2, 1, -3, 2}) + body, "needs 668 bytes (truncated?)");
  expect_error(tiny + "xxxx", "file size 624 does not match");
  for (size_t cut = 0; cut < tiny.size(); cut += 3) ASSERT_FALSE(parse(tiny.substr(0, cut)).ok());
  // Random header values never crash and never yield out-of-range pointers.
  std::mt19937 rng(5);
  for (int k = 0; k < 300; ++k) {
    std::vector<int32_t> h(7);
    for (auto& x : h) x = static_cast<int32_t>(rng() % 9) - 1;
    auto r = parse(header(h) + body, "rand.bin");
    if (r.ok()) {
      EXPECT_EQ((*r)->file_size(), tiny.size());
    } else {
      EXPECT_EQ(r.status().message().rfind("rand.bin: ", 0), 0u);
    }
  }
  std::vector<uint32_t> aligned(8);
  auto mis = Checkpoint::from_memory(reinterpret_cast<const uint8_t*>(aligned.data()) + 1, 28, "m");
  EXPECT_FALSE(mis.ok());
  auto gguf = Checkpoint::open(shared_path("models/stories260K.gguf"));
  ASSERT_FALSE(gguf.ok());
  EXPECT_EQ(gguf.status().message().rfind(shared_path("models/stories260K.gguf") + ": ", 0), 0u);
}

}  // namespace
}  // namespace hinge::llama2c
