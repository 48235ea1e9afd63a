// BPE by merge rank over one pre-token ("word"), as llama.cpp's llm_tokenizer_bpe_session and
// Hugging Face's BPE model (Word::merge_all) both run it: split into UTF-8 characters, repeatedly
// merge the adjacent pair with the lowest rank (ties: leftmost), emit each symbol's token.
// O(n log n) in the word length (a whole 1 MB text is one word for hf-bpe-spm).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace hinge {

class Vocab;

struct BpeOptions {
  int32_t unk = -1;
  bool ignore_merges = false;  // a word that is itself a token is emitted whole
  // Hugging Face character handling (hf-bpe-spm): a character that is not a token becomes its
  // <0xNN> tokens (byte_fallback, when all exist) or unk (fused with a preceding unk when
  // fuse_unk) before merging, and takes no part in merges.
  bool hf_chars = false;
  bool byte_fallback = false;
  bool fuse_unk = false;
  // A final symbol that is not a token becomes the <0xNN> tokens of its bytes (those that
  // exist), as llama.cpp does for BPE vocabularies without byte encoding (gemma4).
  bool hex_byte_leftovers = false;
};

// Reusable buffers, so that a long run of short words does not allocate per word.
struct BpeScratch {
  std::string key;
};

void bpe_encode_word(const Vocab& vocab, const BpeOptions& opts, std::string_view word,
                     BpeScratch* scratch, std::vector<int32_t>* out);

}  // namespace hinge
