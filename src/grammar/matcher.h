// Runs a Grammar over generated text, and masks a vocabulary to the tokens that keep it valid
// (the sampler then draws only among them).
//
// The state is a set of stacks of positions in the rules (llama.cpp's pushdown scheme): a code
// point advances every stack whose next element is a class that matches it. A token's bytes may
// end inside a UTF-8 character: the matcher keeps the partial bytes and admits the token when a
// class can still match some completion of them.
//
// Masks walk a byte trie of the vocabulary (TokenTrie, built once per tokenizer), so tokens that
// share a prefix share its work and a dead prefix prunes its whole subtree. A walk is bounded
// (65,536 states, 2^20 stacks): a grammar ambiguous enough to pass that loses the tokens beyond
// it rather than the server its memory.
//
// Thread-safety: a TokenTrie is immutable and shared; a Matcher is one sequence's, used by one
// thread at a time.
#pragma once

#include <climits>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "grammar/grammar.h"

namespace hinge::grammar {

class TokenTrie {
 public:
  // pieces[id]: the token's text as generated; empty ones (and `excluded` ids) are never allowed.
  TokenTrie(const std::vector<std::string>& pieces, std::span<const int32_t> excluded);
  int32_t n_vocab() const { return n_vocab_; }

  struct Node {
    uint32_t first_child = 0, num_children = 0;
    int32_t token = -1;  // a token ends here
    uint8_t byte = 0;
  };
  const std::vector<Node>& nodes() const { return nodes_; }
  // Tokens whose text is exactly the node's prefix (more than one token may share a text).
  const std::vector<int32_t>& extra_tokens(uint32_t node) const;

 private:
  std::vector<Node> nodes_;
  std::vector<std::pair<uint32_t, int32_t>> extra_;  // (node, token) of duplicate texts, sorted
  mutable std::vector<int32_t> extra_scratch_;
  int32_t n_vocab_ = 0;
};

class Matcher {
 public:
  using Stack = std::vector<const Elem*>;

  explicit Matcher(std::shared_ptr<const Grammar> g);

  // Consumes text; false (and the state unchanged) when the grammar does not allow it.
  bool accept(std::string_view text);
  // The grammar can end here (EOS is allowed).
  bool can_end() const;
  // Nothing more can follow (the only allowed continuation is the end).
  bool must_end() const;
  // Sets bit t of `mask` (n_vocab bits, uint64 words) for every token t of the trie that the
  // grammar allows next; EOS is the caller's (can_end()). `budget`: the tokens left after this
  // one; a token is allowed only if the grammar can still end within them (min_remaining, in
  // bytes: with byte tokens in the vocabulary, each token can bring the end a byte closer, so a
  // constrained reply ends in time). INT64_MAX: no budget.
  // `max_after` (optional): the largest min_remaining() of any allowed token's next state.
  void fill_mask(const TokenTrie& trie, std::span<uint64_t> mask, int64_t budget = INT64_MAX,
                 uint64_t* max_after = nullptr) const;

  // The state, comparable and hashable (a mask depends on nothing else): masks are cached by it.
  struct StateKey {
    std::vector<Stack> stacks;
    uint32_t value = 0;
    int8_t left = 0;
    uint32_t lo = 0, hi = 0;
    bool operator==(const StateKey&) const = default;
  };
  StateKey state_key() const { return {stacks_, partial_.value, partial_.left, partial_.lo, partial_.hi}; }
  static uint64_t hash(const StateKey& k);
  const Grammar* grammar() const { return g_.get(); }
  const std::shared_ptr<const Grammar>& grammar_ptr() const { return g_; }
  // The fewest UTF-8 bytes the text needs to reach an end.
  uint64_t min_remaining() const { return min_remaining(stacks_, partial_); }
  size_t num_stacks() const { return stacks_.size(); }

 private:
  struct Partial {
    uint32_t value = 0;  // bits so far
    int8_t left = 0;     // continuation bytes still to come
    uint32_t lo = 0, hi = 0;  // the code points the bytes so far can still become
  };
  void advance_stack(Stack stack, std::vector<Stack>* out) const;
  // The stacks after code point c (empty: not allowed).
  void step(const std::vector<Stack>& in, uint32_t c, std::vector<Stack>* out) const;
  bool partial_possible(const std::vector<Stack>& stacks, const Partial& p) const;
  uint64_t min_remaining(const std::vector<Stack>& stacks, const Partial& p) const;
  // One byte into a UTF-8 decoder: 1 = a code point completed (*cp), 0 = more bytes to come,
  // -1 = not UTF-8 (or a surrogate).
  static int utf8_byte(Partial& p, uint8_t b, uint32_t* cp);
  // Feeds one byte to (stacks, partial); false when the grammar rejects it.
  bool feed_byte(std::vector<Stack>& stacks, Partial& p, uint8_t b, std::vector<Stack>& scratch) const;

  std::shared_ptr<const Grammar> g_;
  std::vector<Stack> stacks_;
  Partial partial_;
};

}  // namespace hinge::grammar
