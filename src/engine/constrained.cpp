#include "engine/constrained.h"

#include <algorithm>
#include <chrono>

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
    : pieces_(pieces_of(tok)),
      eog_(eog_of(tok)),
      trie_(pieces_, eog_),
      // 64 MiB of masks at most.
      max_entries_(std::max<size_t>(64, (size_t{64} << 20) / (static_cast<size_t>(tok.n_vocab()) / 8 + 64))) {}

uint64_t ConstrainedVocab::cached_mask(const grammar::Matcher& m, std::vector<uint64_t>& mask) const {
  grammar::Matcher::StateKey key = m.state_key();
  const uint64_t h = grammar::Matcher::hash(key);
  {
    std::unique_lock<std::mutex> l(mu_);
    // Samples of one step often share a state: one thread computes it, the others wait.
    auto busy = [&] {
      return std::any_of(computing_.begin(), computing_.end(), [&](const auto& c) {
        return c.first == m.grammar() && c.second == key;
      });
    };
    computed_.wait(l, [&] { return !busy(); });
    auto [b, e] = cache_.equal_range(h);
    for (auto it = b; it != e; ++it)
      if (it->second.grammar.get() == m.grammar() && it->second.key == key) {
        it->second.last_use = ++clock_;
        std::copy(it->second.value.mask.begin(), it->second.value.mask.end(), mask.begin());
        hits_.fetch_add(1, std::memory_order_relaxed);
        return it->second.value.max_after;
      }
    computing_.emplace_back(m.grammar(), key);
  }
  Cached c;
  c.mask.resize(mask.size());
  m.fill_mask(trie_, c.mask, INT64_MAX, &c.max_after);
  std::copy(c.mask.begin(), c.mask.end(), mask.begin());
  const uint64_t max_after = c.max_after;
  std::lock_guard<std::mutex> l(mu_);
  std::erase_if(computing_, [&](const auto& x) { return x.first == m.grammar() && x.second == key; });
  computed_.notify_all();
  if (cache_.size() >= max_entries_) {  // the least recently used quarter out
    std::vector<uint64_t> uses;
    for (const auto& [k, v] : cache_) uses.push_back(v.last_use);
    std::nth_element(uses.begin(), uses.begin() + static_cast<std::ptrdiff_t>(uses.size() / 4), uses.end());
    const uint64_t cut = uses[uses.size() / 4];
    std::erase_if(cache_, [&](const auto& kv) { return kv.second.last_use <= cut; });
  }
  cache_.emplace(h, Entry{m.grammar_ptr(), std::move(key), std::move(c), ++clock_});
  return max_after;
}

const uint64_t* fill_allowed(SampleState& st, const ConstrainedVocab& v) {
  const auto t0 = std::chrono::steady_clock::now();
  // The tokens left after this one, less one for the EOS that ends a grammar that could go on:
  // the grammar must be able to end within them.
  const int64_t budget = static_cast<int64_t>(st.params->max_new_tokens) - st.usage.completion_tokens - 2;
  auto empty = [&] { return std::all_of(st.mask.begin(), st.mask.end(), [](uint64_t w) { return w == 0; }); };
  // The cached mask holds unless a token could leave more to write than the budget allows.
  const uint64_t max_after = v.cached_mask(*st.matcher, st.mask);
  if (budget < 0 || max_after > static_cast<uint64_t>(budget)) st.matcher->fill_mask(v.trie(), st.mask, budget);
  // It cannot end in time whatever comes: the grammar alone (the reply ends at max_tokens).
  if (empty() && !st.matcher->can_end()) st.matcher->fill_mask(v.trie(), st.mask);
  const bool none = empty();
  if (st.matcher->can_end() || none)
    for (int32_t t : v.eog()) st.mask[static_cast<size_t>(t) >> 6] |= uint64_t{1} << (t & 63);
  v.count_mask(std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count());
  return st.mask.data();
}

bool advance_grammar(SampleState& st, const ConstrainedVocab& v, int32_t token) {
  if (std::find(v.eog().begin(), v.eog().end(), token) != v.eog().end()) return true;
  // The mask allowed it, so the grammar takes it (a forced or out-of-mask token ends it).
  if (!st.matcher->accept(v.piece(token))) return true;
  return st.matcher->must_end();
}

}  // namespace hinge
