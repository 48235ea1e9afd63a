// Tokenizer::spec_from_gguf and Tokenizer::spec_from_llama2c: vocabulary files -> VocabSpec,
// with llama.cpp's defaults for what a GGUF file leaves out.
#include <cctype>
#include <cstring>
#include <fstream>
#include <iterator>

#include "format/gguf.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"

namespace hinge {

namespace {

constexpr size_t kMaxLlama2cTokens = size_t{1} << 24;

// Numbers of a GGUF numeric array (any integer or float element type); nullopt otherwise.
std::optional<std::vector<double>> numeric_array(const gguf::GgufFile& f, std::string_view key) {
  const gguf::Value* v = f.find(key);
  if (!v || v->type != gguf::ValueType::ARRAY) return std::nullopt;
  std::vector<double> out;
  out.reserve(v->array.size());
  for (const gguf::Value& e : v->array) {
    if (e.type == gguf::ValueType::STRING || e.type == gguf::ValueType::ARRAY ||
        e.type == gguf::ValueType::BOOL)
      return std::nullopt;
    auto x = e.as_float();
    if (!x) return std::nullopt;
    out.push_back(*x);
  }
  return out;
}

}  // namespace

StatusOr<VocabSpec> Tokenizer::spec_from_gguf(const gguf::GgufFile& f) {
  const std::string& path = f.path();
  auto fail = [&](const std::string& what) { return Status::Errorf("{}: {}", path, what); };
  VocabSpec spec;

  auto model = f.get_string("tokenizer.ggml.model");
  if (!model) return fail("no tokenizer (tokenizer.ggml.model is missing)");
  spec.model = *model;
  if (spec.model != "llama" && spec.model != "gpt2")
    return fail(fmt::format("unsupported tokenizer model '{}'", spec.model));
  const bool spm = spec.model == "llama";
  spec.pre = f.get_string("tokenizer.ggml.pre").value_or(spm ? "default" : "");
  if (spec.pre.empty()) spec.pre = "default";

  auto tokens = f.get_string_array("tokenizer.ggml.tokens");
  if (!tokens) return fail("tokenizer.ggml.tokens is missing or not a string array");
  if (tokens->empty()) return fail("tokenizer.ggml.tokens is empty");
  spec.tokens = std::move(*tokens);
  const size_t n = spec.tokens.size();

  if (f.find("tokenizer.ggml.scores")) {
    auto scores = numeric_array(f, "tokenizer.ggml.scores");
    if (!scores) return fail("tokenizer.ggml.scores is not a numeric array");
    if (scores->size() < n)
      return fail(fmt::format("tokenizer.ggml.scores has {} entries for {} tokens", scores->size(), n));
    spec.scores.assign(scores->begin(), scores->begin() + static_cast<std::ptrdiff_t>(n));
  }
  if (f.find("tokenizer.ggml.token_type")) {
    auto types = f.get_int_array("tokenizer.ggml.token_type");
    if (!types) return fail("tokenizer.ggml.token_type is not an integer array");
    if (types->size() < n)
      return fail(fmt::format("tokenizer.ggml.token_type has {} entries for {} tokens", types->size(), n));
    spec.token_types.reserve(n);
    for (size_t i = 0; i < n; ++i) {
      const int64_t t = (*types)[i];
      spec.token_types.push_back(t >= 0 && t <= 6 ? static_cast<int32_t>(t) : 0);
    }
  }
  if (!spm) {
    if (!f.find("tokenizer.ggml.merges")) return fail("tokenizer.ggml.merges is missing");
    auto merges = f.get_string_array("tokenizer.ggml.merges");
    if (!merges) return fail("tokenizer.ggml.merges is not a string array");
    spec.merges = std::move(*merges);
    const PreTokenizerPreset* preset = find_pre_tokenizer_preset(spec.pre);
    if (!preset) return fail(fmt::format("unknown pre-tokenizer '{}'", spec.pre));
    spec.ignore_merges = preset->ignore_merges;
    spec.add_bos = preset->add_bos;
    spec.add_space_prefix = false;
  }

  // Special ids: llama.cpp's defaults, replaced by in-range values from the file.
  spec.bos = spm ? 1 : 11;
  spec.eos = spm ? 2 : 11;
  spec.unk = spm ? 0 : -1;
  const struct {
    const char* key;
    int32_t* id;
  } ids[] = {{"tokenizer.ggml.bos_token_id", &spec.bos},
             {"tokenizer.ggml.eos_token_id", &spec.eos},
             {"tokenizer.ggml.unknown_token_id", &spec.unk},
             {"tokenizer.ggml.padding_token_id", &spec.pad},
             {"tokenizer.ggml.eot_token_id", &spec.eot},
             {"tokenizer.ggml.eom_token_id", &spec.eom}};
  for (const auto& e : ids) {
    if (*e.id >= static_cast<int64_t>(n)) *e.id = -1;
    const auto v = f.get_int(e.key);
    if (v && *v >= 0 && *v < static_cast<int64_t>(n)) *e.id = static_cast<int32_t>(*v);
  }

  if (auto b = f.get_bool("tokenizer.ggml.add_bos_token")) spec.add_bos = *b;
  if (auto b = f.get_bool("tokenizer.ggml.add_eos_token")) spec.add_eos = *b;
  if (spm) {
    if (auto b = f.get_bool("tokenizer.ggml.add_space_prefix")) spec.add_space_prefix = *b;
  }
  if (spec.add_bos && spec.bos < 0)
    return fail("tokenizer.ggml.add_bos_token is true but there is no BOS token");
  if (spec.add_eos && spec.eos < 0)
    return fail("tokenizer.ggml.add_eos_token is true but there is no EOS token");
  return spec;
}

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
