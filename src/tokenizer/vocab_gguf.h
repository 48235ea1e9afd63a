// VocabSpec <-> GGUF tokenizer metadata. The reader is Tokenizer::spec_from_gguf (in
// vocab_gguf.cpp, next to the writer, so that the two stay each other's inverse).
//
// Every VocabSpec kind round-trips: Tokenizer::create(spec_from_gguf(write_vocab_gguf(spec)))
// encodes and decodes exactly as Tokenizer::create(spec). The file holds two layers:
//
//   tokenizer.ggml.*  The standard keys, as llama.cpp's convert_hf_to_gguf.py writes them, so
//                     that llama.cpp loads the file. "llama", "gpt2", "gemma4" and "bert" map
//                     1:1. "hf-bpe-spm" (a
//                     tokenizer.json BPE with byte_fallback and no tokenizer.model) is written
//                     the way convert_hf_to_gguf.py's _set_vocab_llama_hf does it: model
//                     "llama", token types BYTE/CONTROL/NORMAL, no merges. Where that script
//                     writes a -1000 placeholder for every score, we write scores derived from
//                     the merge ranks (see below), so llama.cpp's SPM merges in HF's order;
//                     llama.cpp still cannot be exact for such a model (SPM merges any two
//                     pieces whose concatenation is a token, BPE only the listed pairs, and the
//                     HF normalizer's prefix rules differ), hence the second layer.
//   hinge.tokenizer.* What the standard keys cannot say; llama.cpp ignores these, hinge prefers
//                     them. Their presence (hinge.tokenizer.kind) also marks the file as
//                     written by hinge: absent special-token ids then mean "none" rather than
//                     llama.cpp's defaults (bos 1, eos 2, unk 0 for SPM).
//       kind               string   VocabSpec::model
//       merge_pairs        [string] left0, right0, left1, right1, ... in rank order; exact even
//                                   when a piece holds a space ("a b" strings cannot say that)
//       merges             [string] VocabSpec::merges of an hf-bpe-spm spec ("a b" strings)
//       pre_regexes        [string] VocabSpec::pre_regexes (gpt2 with an explicit regex chain)
//       ignore_merges      bool
//       byte_fallback, fuse_unk, escape_whitespace, metaspace_split    bool (hf-bpe-spm only)
//       space_prefix_scope string   "each_fragment", "whole_text", "metaspace_always" or
//                                   "metaspace_first" (hf-bpe-spm only)
//
// Scores for hf-bpe-spm (when the spec has none, as tokenizer.json gives none): the token made by
// the merge of rank r scores -r (its lowest rank when several merges make it); every other token
// scores -(number of merges), below all of them. This is the inverse of Hugging Face's
// SentencePiece-to-BPE conversion (merges ordered by the score of the merged piece), so a
// tokenizer.json that came from a SentencePiece BPE model gets its original ordering back.
#pragma once

#include "format/gguf.h"
#include "tokenizer/tokenizer.h"

namespace hinge {

// Sets the tokenizer.ggml.* and hinge.tokenizer.* keys for `spec` on `w`.
void write_vocab_gguf(gguf::GgufWriter& w, const VocabSpec& spec);

// The tokenizer.ggml.scores that write_vocab_gguf writes for `spec` (spec.scores when non-empty).
std::vector<float> gguf_token_scores(const VocabSpec& spec);

}  // namespace hinge
