// Tokenizer::spec_from_llama2c: llama2.c tokenizer.bin -> VocabSpec. (Tokenizer::spec_from_gguf
// lives in vocab_gguf.cpp, next to the GGUF writer.)
#include <cctype>
#include <cstring>
#include <fstream>
#include <iterator>

#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"

namespace hinge {

namespace {

constexpr size_t kMaxLlama2cTokens = size_t{1} << 24;

}  // namespace

StatusOr<VocabSpec> Tokenizer::spec_from_llama2c(const std::string& path, int32_t vocab_size) {
  auto fail = [&](const std::string& what) { return Status::Errorf("{}: {}", path, what); };
  if (vocab_size <= 0 || static_cast<size_t>(vocab_size) > kMaxLlama2cTokens)
    return fail(fmt::format("bad vocabulary size {}", vocab_size));
  std::ifstream in(path, std::ios::binary);
  if (!in) return fail("cannot open the tokenizer file");
  const std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) return fail("read error");

  size_t off = 0;
  auto read = [&](void* dst, size_t len) {
    if (data.size() - off < len) return false;
    std::memcpy(dst, data.data() + off, len);
    off += len;
    return true;
  };
  int32_t max_len = 0;
  if (!read(&max_len, 4)) return fail("truncated header");
  if (max_len < 0) return fail(fmt::format("bad max_token_length {}", max_len));

  VocabSpec spec;
  spec.model = "llama";
  spec.pre = "default";
  spec.tokens.reserve(static_cast<size_t>(vocab_size));
  spec.scores.reserve(static_cast<size_t>(vocab_size));
  spec.token_types.reserve(static_cast<size_t>(vocab_size));
  for (int32_t i = 0; i < vocab_size; ++i) {
    float score = 0;
    int32_t len = 0;
    if (!read(&score, 4) || !read(&len, 4)) return fail(fmt::format("truncated at token {}", i));
    if (len < 0 || static_cast<size_t>(len) > data.size() - off)
      return fail(fmt::format("token {} has bad length {}", i, len));
    std::string piece = data.substr(off, static_cast<size_t>(len));
    off += static_cast<size_t>(len);
    // llama2.c's export writes BOS/EOS as "\n<s>\n" / "\n</s>\n" and U+2581 as ' '.
    if (piece == "\n<s>\n" || piece == "\n</s>\n") piece = piece.substr(1, piece.size() - 2);
    piece = unicode::replace_all(piece, " ", unicode::kSpmSpace);
    TokenType type = TokenType::kNormal;
    if (i == 0) {
      type = TokenType::kUnknown;
    } else if (i == 1 || i == 2) {
      type = TokenType::kControl;
    } else if (piece.size() == 6 && piece.compare(0, 3, "<0x") == 0 && piece[5] == '>' &&
               std::isxdigit(static_cast<unsigned char>(piece[3])) &&
               std::isxdigit(static_cast<unsigned char>(piece[4]))) {
      type = TokenType::kByte;
    }
    spec.tokens.push_back(std::move(piece));
    spec.scores.push_back(score);
    spec.token_types.push_back(static_cast<int32_t>(type));
  }
  spec.unk = 0;
  spec.bos = vocab_size > 1 ? 1 : -1;
  spec.eos = vocab_size > 2 ? 2 : -1;
  spec.add_bos = spec.bos >= 0;
  spec.add_eos = false;
  spec.add_space_prefix = true;
  return spec;
}

}  // namespace hinge
