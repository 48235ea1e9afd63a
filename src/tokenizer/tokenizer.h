// Tokenizers, bit-exact with llama.cpp (GGUF vocabularies) and Hugging Face `tokenizers`
// (tokenizer.json BPE over raw text):
//   "llama"       SentencePiece-style BPE: bigram merges by piece score over UTF-8 characters,
//                 byte fallback to <0xNN> pieces, spaces escaped as U+2581
//                 (llama.cpp's llm_tokenizer_spm).
//   "gpt2"        byte-level BPE: regex pre-tokenizer chosen by `pre`, GPT-2 byte-to-unicode
//                 mapping, merges by rank (llama.cpp llm_tokenizer_bpe).
//   "hf-bpe-spm"  Hugging Face BPE over raw UTF-8 characters with the U+2581 normalizer
//                 (Prepend/Replace or Metaspace), merges by rank (not by score), byte fallback and
//                 fused unknowns, no pre-tokenizer split (as HF tokenizers runs such a file).
//   "gemma4"      Gemma 4's BPE (llama.cpp's "gemma4" model): spaces escaped as U+2581, the text
//                 split only into newline and non-newline runs, merges by rank over raw UTF-8
//                 characters, a leftover character as its <0xNN> byte tokens.
//   "bert"        WordPiece (llama.cpp's WPM, wordpiece.h): BERT normalizer, whitespace and
//                 punctuation split, longest-match pieces; BOS ([CLS]) and SEP around the text.
// A Tokenizer is immutable after create(); encode/decode are const and safe to call from many
// threads at once. A StreamingDetokenizer is single-threaded state over one Tokenizer.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_set>
#include <utility>
#include <vector>

#include "common/status.h"

namespace hinge {

namespace gguf {
class GgufFile;
}

// GGUF token types (tokenizer.ggml.token_type).
enum class TokenType : int32_t {
  kUndefined = 0,
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByte = 6,
};

// Where the SentencePiece space prefix (add_space_prefix) goes.
enum class SpacePrefixScope : uint8_t {
  kEachFragment,     // llama.cpp: at the start of the text and after every special token
  kWholeText,        // HF Prepend normalizer: the whole (non-empty) raw text gets it, so a text
                     // that starts with a special token has a lone U+2581 before that token
  kMetaspaceAlways,  // HF Metaspace "always": every text fragment not starting with a space
  kMetaspaceFirst,   // HF Metaspace "first": the fragment at offset 0 if not starting with one
};

// Everything needed to build a tokenizer, format-neutral.
struct VocabSpec {
  // "llama", "gpt2", "hf-bpe-spm", "gemma4" or "bert" (see the top of this file).
  std::string model;
  // gpt2 pre-tokenizer name ("default", "gpt-2", "llama-bpe", ...).
  std::string pre;
  // Pieces as stored in GGUF (spm: with U+2581; gpt2: byte-encoded).
  std::vector<std::string> tokens;
  // May be empty (all 0) for gpt2.
  std::vector<float> scores;
  // GGUF token types (TokenType); may be empty (all normal).
  std::vector<int32_t> token_types;
  // gpt2 / hf-bpe-spm / gemma4: "a b" pairs in rank order.
  std::vector<std::string> merges;
  int32_t bos = -1, eos = -1, unk = -1, pad = -1;
  bool add_bos = true, add_eos = false;
  // spm kinds only; ignored for gpt2 (as llama.cpp does).
  bool add_space_prefix = true;

  // Extensions; the defaults reproduce llama.cpp for GGUF vocabularies.
  // More end-of-generation tokens (is_eog).
  int32_t eot = -1, eom = -1;
  // bert: the separator appended after the text when special tokens are added, and the BERT
  // normalizer's options (tokenizer.ggml.normalizer.*; llama.cpp's defaults).
  int32_t sep = -1;
  bool lowercase = true;
  bool strip_accents = true;
  // gpt2: an explicit regex chain (HF Split pre-tokenizers); overrides `pre` when non-empty.
  std::vector<std::string> pre_regexes;
  // BPE: a pre-token that is itself a token is kept whole (also implied by "llama-bpe" & co).
  bool ignore_merges = false;
  // BPE: replaces `merges` when non-empty (tokenizer.json [a, b] merges may hold spaces).
  std::vector<std::pair<std::string, std::string>> merge_pairs;
  // hf-bpe-spm only: unknown characters -> <0xNN> tokens when all exist (else unk) ...
  bool byte_fallback = true;
  // ... and consecutive unknown characters -> one unk.
  bool fuse_unk = false;
  // hf-bpe-spm only: ' ' -> U+2581 before BPE.
  bool escape_whitespace = true;
  // hf-bpe-spm only: split before each U+2581 (HF Metaspace split=true).
  bool metaspace_split = false;
  SpacePrefixScope space_prefix_scope = SpacePrefixScope::kEachFragment;
};

class Vocab;
class PreTokenizer;

class Tokenizer {
 public:
  static StatusOr<std::unique_ptr<Tokenizer>> create(VocabSpec spec);
  // tokenizer.ggml.* keys of a GGUF file (full model or vocab-only), with the hinge.tokenizer.*
  // extensions preferred when present (see vocab_gguf.h, which also has the writer).
  static StatusOr<VocabSpec> spec_from_gguf(const gguf::GgufFile& f);
  // llama2.c tokenizer.bin (tok512.bin): int32 max_token_length, then per token float32 score,
  // int32 length, bytes. Read as "llama" with bos 1, eos 2, unk 0.
  static StatusOr<VocabSpec> spec_from_llama2c(const std::string& tokenizer_bin_path,
                                               int32_t vocab_size);
  // Hugging Face tokenizer.json (BPE model) plus tokenizer_config.json (may be empty).
  static StatusOr<VocabSpec> spec_from_hf(const std::string& tokenizer_json_path,
                                          const std::string& tokenizer_config_path);

  ~Tokenizer();
  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;

  // add_special: BOS/EOS per spec. parse_special: control tokens written in the text (e.g.
  // "<s>") become those tokens; user-defined tokens are always matched whole (as llama.cpp).
  std::vector<int32_t> encode(std::string_view text, bool add_special, bool parse_special) const;
  // Decoded bytes of one token (spm: U+2581 -> ' ', <0xNN> -> byte; gpt2: byte-decoded);
  // control, unknown and unused tokens and out-of-range ids -> "".
  std::string token_to_piece(int32_t id) const;
  // token_to_piece(id) as it appears after `prev_id` (-1: start of text): for spm kinds with
  // add_space_prefix, the leading space of the first piece after BOS or at the start is dropped
  // (llama2.c run.c prints exactly this).
  std::string piece_after(int32_t prev_id, int32_t id) const;
  // Concatenation of piece_after over the sequence.
  std::string decode(const std::vector<int32_t>& ids) const;

  int32_t n_vocab() const;
  int32_t bos() const { return spec_.bos; }
  int32_t eos() const { return spec_.eos; }
  bool add_bos() const { return spec_.add_bos; }
  bool is_eog(int32_t id) const { return eog_.count(id) != 0; }  // eos, eot, eom, <|im_end|>, ...
  TokenType token_type(int32_t id) const;
  int32_t token_id(std::string_view text) const;  // id of a token by its stored text, or -1
  const VocabSpec& spec() const { return spec_; }

 private:
  struct Fragment;
  Tokenizer();
  std::vector<Fragment> partition(std::string_view text, bool parse_special) const;
  void encode_spm(std::string_view text, const std::vector<Fragment>& frags,
                  std::vector<int32_t>* out) const;
  void encode_hf_spm(std::string_view text, const std::vector<Fragment>& frags,
                     std::vector<int32_t>* out) const;
  void encode_gpt2(std::string_view text, const std::vector<Fragment>& frags,
                   std::vector<int32_t>* out) const;
  void encode_gemma4(std::string_view text, const std::vector<Fragment>& frags,
                     std::vector<int32_t>* out) const;
  void encode_bert(std::string_view text, const std::vector<Fragment>& frags,
                   std::vector<int32_t>* out) const;

  VocabSpec spec_;
  std::unique_ptr<Vocab> vocab_;
  std::unique_ptr<PreTokenizer> pre_;  // gpt2 only
  std::vector<TokenType> types_;       // vocab types, EOG-looking tokens forced to control
  std::vector<int32_t> special_ids_;   // control/user-defined/unknown, longest text first
  std::vector<std::string> pieces_;    // token_to_piece cache
  std::unordered_set<int32_t> eog_;
  bool strip_first_space_ = false;  // piece_after's leading-space rule applies
  bool ignore_merges_ = false;
  size_t max_token_bytes_ = 0;  // bert: the longest piece
};

// Streaming detokenizer: feeds ids one at a time and returns only complete UTF-8 text: an
// incomplete multi-byte sequence is held back until it completes; invalid bytes become U+FFFD
// (at once when they cannot start or continue a character, at flush when left incomplete).
// Applies Tokenizer::piece_after, so feeding BOS (push or push_context) and then generated ids
// reproduces llama2.c's printed output.
class StreamingDetokenizer {
 public:
  explicit StreamingDetokenizer(const Tokenizer& tokenizer) : tok_(tokenizer) {}
  std::string push(int32_t id);
  // A prompt token: updates the state (previous id) but emits nothing.
  void push_context(int32_t id) { prev_ = id; }
  std::string flush();

 private:
  std::string take_complete(bool final);

  const Tokenizer& tok_;
  int32_t prev_ = -1;
  std::string pending_;  // bytes not yet returned (an incomplete UTF-8 sequence)
};

}  // namespace hinge
