// WordPiece (BERT) over a GGUF vocabulary, as llama.cpp's llm_tokenizer_wpm_session runs it:
// the BERT normalizer (per code point: NFD's first code point and accent-mark removal when
// strip_accents, simple lowercase mapping when lowercase, control characters dropped), split on
// white space and around punctuation, ASCII symbols and CJK ideographs, then each word with a
// U+2581 prefix (GGUF's form of a word start; continuation pieces carry no "##") is covered
// greedily by the longest matching pieces. A word with a gap becomes the unknown token.
// Unicode data comes from ICU (general category, White_Space, simple case mapping, canonical
// decomposition).
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

namespace hinge {

class Vocab;

struct WordPieceOptions {
  bool lowercase = true;      // tokenizer.ggml.normalizer.lowercase (llama.cpp's default: true)
  bool strip_accents = true;  // tokenizer.ggml.normalizer.strip_accents (default: lowercase)
  int32_t unk = -1;
  size_t max_token_bytes = 0;  // the longest piece, in bytes
};

void wordpiece_encode(const Vocab& vocab, const WordPieceOptions& opts, std::string_view text,
                      std::vector<int32_t>* out);

}  // namespace hinge
