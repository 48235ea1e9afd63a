#include "engine/constrained.h"

#include <algorithm>

namespace hinge {
namespace {

std::vector<std::string> pieces_of(const Tokenizer& tok) {
  std::vector<std::string> p(static_cast<size_t>(tok.n_vocab()));
  for (int32_t id = 0; id < tok.n_vocab(); ++id) {
    if (tok.is_eog(id) || tok.token_type(id) == TokenType::kControl) continue;  // never as text
    p[static_cast<size_t>(id)] = tok.token_to_piece(id);
  }
  return p;
}

std::vector<int32_t> eog_of(const Tokenizer& tok) {
  std::vector<int32_t> e;
  for (int32_t id = 0; id < tok.n_vocab(); ++id)
    if (tok.is_eog(id)) e.push_back(id);
  return e;
}

}  // namespace

ConstrainedVocab::ConstrainedVocab(const Tokenizer& tok)
    : pieces_(pieces_of(tok)), eog_(eog_of(tok)), trie_(pieces_, eog_) {}

void fill_allowed(SampleState& st, const ConstrainedVocab& v) {
  // The tokens left after this one, less one for the EOS that ends a grammar that could go on:
  // the grammar must be able to end within them.
  const int64_t budget = static_cast<int64_t>(st.params->max_new_tokens) - st.usage.completion_tokens - 2;
  auto empty = [&] { return std::all_of(st.mask.begin(), st.mask.end(), [](uint64_t w) { return w == 0; }); };
  st.matcher->fill_mask(v.trie(), st.mask, budget);
  // It cannot end in time whatever comes: the grammar alone (the reply ends at max_tokens).
  if (empty() && !st.matcher->can_end()) st.matcher->fill_mask(v.trie(), st.mask);
  const bool none = empty();
  if (st.matcher->can_end() || none)
    for (int32_t t : v.eog()) st.mask[static_cast<size_t>(t) >> 6] |= uint64_t{1} << (t & 63);
}

bool advance_grammar(SampleState& st, const ConstrainedVocab& v, int32_t token) {
  if (std::find(v.eog().begin(), v.eog().end(), token) != v.eog().end()) return true;
  // The mask allowed it, so the grammar takes it (a forced or out-of-mask token ends it).
  if (!st.matcher->accept(v.piece(token))) return true;
  return st.matcher->must_end();
}

}  // namespace hinge
