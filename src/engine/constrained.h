// Constrained decoding in the engine (SamplingParams::grammar): the vocabulary's byte trie,
// built once on the first grammar request, each constrained sample's mask before its draw, and
// its grammar state after it. Engine-thread bookkeeping; fill_allowed runs on the pool (one
// sample per thread at a time).
#pragma once

#include <cstdint>
#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <unordered_map>
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

  // Masks by grammar state: a JSON string's every character is one state, so a reply computes
  // few masks and copies the rest. Each entry keeps the largest min_remaining() its allowed
  // tokens lead to: under a budget at least that large the cached mask is exact. Bounded
  // (least recently used out); safe from the pool's threads.
  struct Cached {
    std::vector<uint64_t> mask;
    uint64_t max_after = 0;
  };
  // Fills `mask` for m's state (computing and keeping it on a miss); returns max_after.
  uint64_t cached_mask(const grammar::Matcher& m, std::vector<uint64_t>& mask) const;
  int64_t cache_hits() const { return hits_.load(std::memory_order_relaxed); }
  int64_t masks() const { return masks_.load(std::memory_order_relaxed); }
  double mask_seconds() const { return static_cast<double>(mask_ns_.load(std::memory_order_relaxed)) * 1e-9; }
  void count_mask(int64_t ns) const {
    masks_.fetch_add(1, std::memory_order_relaxed);
    mask_ns_.fetch_add(ns, std::memory_order_relaxed);
  }

 private:
  struct Entry {
    std::shared_ptr<const grammar::Grammar> grammar;  // keeps the key's pointers valid
    grammar::Matcher::StateKey key;
    Cached value;
    uint64_t last_use = 0;
  };
  std::vector<std::string> pieces_;
  std::vector<int32_t> eog_;
  grammar::TokenTrie trie_;
  mutable std::mutex mu_;
  mutable std::condition_variable computed_;  // a state being computed by another thread is done
  mutable std::vector<std::pair<const grammar::Grammar*, grammar::Matcher::StateKey>> computing_;
  mutable std::unordered_multimap<uint64_t, Entry> cache_;
  mutable uint64_t clock_ = 0;
  mutable std::atomic<int64_t> hits_{0}, masks_{0}, mask_ns_{0};
  size_t max_entries_ = 0;
};

// st.mask = the tokens the grammar allows next, EOS among them where it may end. When nothing
// is allowed (a grammar the vocabulary cannot spell), EOS alone, so the sample ends. Counts the
// mask and its CPU time in v (EngineStats::masks, mask_seconds). Returns st.mask's words.
const uint64_t* fill_allowed(SampleState& st, const ConstrainedVocab& v);
// Advances st.matcher over the token; true when the grammar is complete and nothing may
// follow (the sample ends there).
bool advance_grammar(SampleState& st, const ConstrainedVocab& v, int32_t token);

}  // namespace hinge
