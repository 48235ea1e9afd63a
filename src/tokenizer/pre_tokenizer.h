// Regex pre-tokenizer for byte-level BPE, as llama.cpp's unicode_regex_split runs it: a chain of
// regexes, each splitting every piece from the previous one into matches and the text between
// them (both kept), then every piece byte-encoded (GPT-2 mapping).
// Regexes are PCRE2 (UTF + UCP). `\s` is rewritten to the 25 Unicode White_Space characters that
// llama.cpp uses, and `$` only matches at the very end, so that PCRE2 agrees with llama.cpp's
// std::regex-on-collapsed-categories and custom splitters (GPT-2, Llama 3).
// Immutable after create; split() is thread-safe.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace hinge {

// A named pre-tokenizer from llama.cpp (tokenizer.ggml.pre).
struct PreTokenizerPreset {
  std::vector<std::string> regexes;
  bool ignore_merges = false;  // llama.cpp sets it for these pre-tokenizers
  bool add_bos = false;        // llama.cpp's default add_bos for these pre-tokenizers
};
// nullptr for an unknown name; "" means "default".
const PreTokenizerPreset* find_pre_tokenizer_preset(std::string_view name);

class PreTokenizer {
 public:
  static StatusOr<std::unique_ptr<PreTokenizer>> create(std::vector<std::string> regexes);
  ~PreTokenizer();
  PreTokenizer(const PreTokenizer&) = delete;
  PreTokenizer& operator=(const PreTokenizer&) = delete;

  // Pre-tokens of `text`, byte-encoded. Invalid UTF-8 decodes to U+FFFD first, as in llama.cpp.
  std::vector<std::string> split(std::string_view text) const;

 private:
  struct Compiled;
  PreTokenizer();
  std::vector<std::unique_ptr<Compiled>> regexes_;
};

}  // namespace hinge
