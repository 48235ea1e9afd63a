// Token table shared by the tokenizer algorithms: id <-> text, types, scores, BPE merge ranks.
// Built from a VocabSpec, which is hostile input: empty pieces are renamed "[EMPTY_<id>]" (as
// llama.cpp does), a repeated piece keeps its first id, unknown type values become kUndefined,
// byte-typed pieces that are not "<0xNN>" are treated as normal, malformed merges are skipped.
// Immutable after build(); every method is a const read (thread-safe).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/status.h"
#include "tokenizer/tokenizer.h"

namespace hinge {

class Vocab {
 public:
  static StatusOr<std::unique_ptr<Vocab>> build(const VocabSpec& spec);

  int32_t size() const { return static_cast<int32_t>(texts_.size()); }
  bool valid(int32_t id) const { return id >= 0 && id < size(); }
  int32_t find(std::string_view text) const;  // -1 when absent
  const std::string& text(int32_t id) const { return texts_[static_cast<size_t>(id)]; }
  TokenType type(int32_t id) const { return types_[static_cast<size_t>(id)]; }
  float score(int32_t id) const { return scores_[static_cast<size_t>(id)]; }
  // Byte value of a byte token ("<0xNN>" of type kByte), else -1.
  int byte_value(int32_t id) const { return byte_values_[static_cast<size_t>(id)]; }
  // SPM byte fallback (llama.cpp byte_to_token): the "<0xNN>" piece, else the one-byte piece.
  int32_t spm_byte_token(uint8_t b) const { return spm_byte_tokens_[b]; }
  // HF byte fallback: the "<0xNN>" piece only.
  int32_t hex_byte_token(uint8_t b) const { return hex_byte_tokens_[b]; }
  // Merge rank of the pair (lower merges first), or -1. `scratch` avoids an allocation per call.
  int bpe_rank(std::string_view left, std::string_view right, std::string* scratch) const;
  bool has_merges() const { return !ranks_.empty(); }

 private:
  struct StringHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  using StringMap = std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>>;

  std::vector<std::string> texts_;
  std::vector<TokenType> types_;
  std::vector<float> scores_;
  std::vector<int16_t> byte_values_;
  StringMap ids_;
  StringMap ranks_;  // key: left + '\0' + right
  int32_t spm_byte_tokens_[256];
  int32_t hex_byte_tokens_[256];
};

}  // namespace hinge
