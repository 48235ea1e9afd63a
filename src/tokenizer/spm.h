// SentencePiece-style BPE as llama.cpp's llm_tokenizer_spm runs it: split into UTF-8 characters,
// repeatedly merge the adjacent pair whose concatenation is the vocabulary piece with the highest
// score (ties: leftmost), then emit each final symbol's piece, or its bytes as <0xNN> pieces
// when it is not a piece (one unk when a byte has no piece either).
// O(n log n) in the text length: one priority queue over candidate pairs, stale entries skipped.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

namespace hinge {

class Vocab;

// `text` is already escaped (spaces as U+2581, space prefix added). Appends ids to `out`.
void spm_encode(const Vocab& vocab, int32_t unk, std::string_view text, std::vector<int32_t>* out);

}  // namespace hinge
