// Constrained decoding in the engine (SamplingParams::grammar): the vocabulary's byte trie,
// built once on the first grammar request, each constrained sample's mask before its draw, and
// its grammar state after it. Engine-thread bookkeeping; fill_allowed runs on the pool (one
// sample per thread at a time).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "engine/sample_state.h"
#include "grammar/matcher.h"
#include "tokenizer/tokenizer.h"

namespace hinge {

class ConstrainedVocab {
 public:
  // Control tokens and end-of-generation tokens are outside the trie (EOS is decided apart).
  explicit ConstrainedVocab(const Tokenizer& tok);
  const grammar::TokenTrie& trie() const { return trie_; }
  const std::vector<int32_t>& eog() const { return eog_; }
  const std::string& piece(int32_t id) const { return pieces_[static_cast<size_t>(id)]; }

 private:
  std::vector<std::string> pieces_;
  std::vector<int32_t> eog_;
  grammar::TokenTrie trie_;
};

// st.mask = the tokens the grammar allows next, EOS among them where it may end. When nothing
// is allowed (a grammar the vocabulary cannot spell), EOS alone, so the sample ends.
void fill_allowed(SampleState& st, const ConstrainedVocab& v);
// Advances st.matcher over the token; true when the grammar is complete and nothing may
// follow (the sample ends there).
bool advance_grammar(SampleState& st, const ConstrainedVocab& v, int32_t token);

}  // namespace hinge
