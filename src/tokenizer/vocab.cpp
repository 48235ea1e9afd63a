#include "tokenizer/vocab.h"

#include <cstdio>

namespace hinge {

namespace {

constexpr size_t kMaxTokens = size_t{1} << 28;

void make_key(std::string_view left, std::string_view right, std::string* key) {
  key->assign(left);
  key->push_back('\0');
  key->append(right);
}

// "<0xNN>" with two hex digits (either case) -> NN, else -1.
int parse_byte_piece(std::string_view s) {
  if (s.size() != 6 || s[0] != '<' || s[1] != '0' || s[2] != 'x' || s[5] != '>') return -1;
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  const int hi = hex(s[3]), lo = hex(s[4]);
  return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

}  // namespace

StatusOr<std::unique_ptr<Vocab>> Vocab::build(const VocabSpec& spec) {
  const size_t n = spec.tokens.size();
  if (n == 0) return Status::Error("tokenizer: the vocabulary is empty");
  if (n > kMaxTokens) return Status::Errorf("tokenizer: {} tokens is too many", n);
  if (!spec.scores.empty() && spec.scores.size() < n)
    return Status::Errorf("tokenizer: {} scores for {} tokens", spec.scores.size(), n);
  if (!spec.token_types.empty() && spec.token_types.size() < n)
    return Status::Errorf("tokenizer: {} token types for {} tokens", spec.token_types.size(), n);

  auto v = std::unique_ptr<Vocab>(new Vocab());
  v->texts_.resize(n);
  v->types_.resize(n, TokenType::kNormal);
  v->scores_.resize(n, 0.0f);
  v->byte_values_.resize(n, -1);
  v->ids_.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    std::string text = spec.tokens[i];
    if (text.empty()) text = "[EMPTY_" + std::to_string(i) + "]";
    v->ids_.emplace(text, static_cast<int32_t>(i));  // a repeated piece keeps its first id
    v->texts_[i] = std::move(text);
    if (!spec.scores.empty()) v->scores_[i] = spec.scores[i];
    if (!spec.token_types.empty()) {
      const int32_t t = spec.token_types[i];
      v->types_[i] = (t >= 0 && t <= 6) ? static_cast<TokenType>(t) : TokenType::kUndefined;
    }
    if (v->types_[i] == TokenType::kByte) {
      const int b = parse_byte_piece(v->texts_[i]);
      if (b < 0) {
        v->types_[i] = TokenType::kNormal;
      } else {
        v->byte_values_[i] = static_cast<int16_t>(b);
      }
    }
  }

  for (int b = 0; b < 256; ++b) {
    char hex[8];
    std::snprintf(hex, sizeof hex, "<0x%02X>", b);
    v->hex_byte_tokens_[b] = v->find(hex);
    const char one = static_cast<char>(b);
    v->spm_byte_tokens_[b] =
        v->hex_byte_tokens_[b] >= 0 ? v->hex_byte_tokens_[b] : v->find(std::string_view(&one, 1));
  }

  std::string key;
  auto add_merge = [&](std::string_view left, std::string_view right, size_t rank) {
    if (left.empty() || right.empty()) return;
    make_key(left, right, &key);
    v->ranks_.emplace(key, static_cast<int32_t>(rank));  // a repeated pair keeps its first rank
  };
  if (!spec.merge_pairs.empty()) {
    v->ranks_.reserve(spec.merge_pairs.size());
    for (size_t r = 0; r < spec.merge_pairs.size(); ++r)
      add_merge(spec.merge_pairs[r].first, spec.merge_pairs[r].second, r);
  } else {
    v->ranks_.reserve(spec.merges.size());
    for (size_t r = 0; r < spec.merges.size(); ++r) {
      // llama.cpp splits at the first space after the first byte ("  a" -> " ", "a").
      std::string_view m = spec.merges[r];
      const size_t sp = m.size() > 1 ? m.find(' ', 1) : std::string_view::npos;
      if (sp == std::string_view::npos) continue;
      add_merge(m.substr(0, sp), m.substr(sp + 1), r);
    }
  }
  return v;
}

int32_t Vocab::find(std::string_view text) const {
  auto it = ids_.find(text);
  return it == ids_.end() ? -1 : it->second;
}

int Vocab::bpe_rank(std::string_view left, std::string_view right, std::string* scratch) const {
  make_key(left, right, scratch);
  auto it = ranks_.find(std::string_view(*scratch));
  return it == ranks_.end() ? -1 : it->second;
}

}  // namespace hinge
