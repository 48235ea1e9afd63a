#include "tokenizer/bpe.h"

#include <algorithm>
#include <queue>

#include "tokenizer/unicode.h"
#include "tokenizer/vocab.h"

namespace hinge {

namespace {

// A span of the word; merged symbols grow to the right and leave n == 0 behind them. A symbol
// with fixed >= 0 is already a token (HF byte fallback / unk) and never merges.
struct Symbol {
  int prev;
  int next;
  size_t start;
  size_t n;
  int32_t fixed;
};

struct Bigram {
  int rank;
  int left;
  int right;
  size_t left_n;  // sizes when queued; a mismatch later means the pair is stale
  size_t right_n;
};

struct BigramOrder {  // min-heap on rank, then the leftmost pair first
  bool operator()(const Bigram& a, const Bigram& b) const {
    return a.rank > b.rank || (a.rank == b.rank && a.left > b.left);
  }
};

// Emits the token(s) of a final symbol that is not itself a token.
void emit_fallback(const Vocab& vocab, const BpeOptions& opts, std::string_view text,
                   std::vector<int32_t>* out) {
  if (opts.hex_byte_leftovers) {
    for (char c : text) {
      const int32_t id = vocab.hex_byte_token(static_cast<uint8_t>(c));
      if (id >= 0) out->push_back(id);
    }
    return;
  }
  for (size_t off = 0; off < text.size();) {
    const size_t len = std::min(unicode::seq_len(text[off]), text.size() - off);
    const std::string_view ch = text.substr(off, len);
    off += len;
    const int32_t id = vocab.find(ch);
    if (id >= 0) {
      out->push_back(id);
    } else if (opts.unk >= 0) {
      out->push_back(opts.unk);
    }
  }
}

}  // namespace

void bpe_encode_word(const Vocab& vocab, const BpeOptions& opts, std::string_view word,
                     BpeScratch* scratch, std::vector<int32_t>* out) {
  if (word.empty()) return;
  if (opts.ignore_merges) {
    const int32_t id = vocab.find(word);
    if (id >= 0) {
      out->push_back(id);
      return;
    }
  }

  std::vector<Symbol> syms;
  syms.reserve(word.size());
  auto push_symbol = [&](size_t start, size_t n, int32_t fixed) {
    const int idx = static_cast<int>(syms.size());
    if (idx > 0) syms.back().next = idx;
    syms.push_back({idx - 1, -1, start, n, fixed});
  };
  for (size_t off = 0; off < word.size();) {
    const size_t len = std::min(unicode::seq_len(word[off]), word.size() - off);
    if (!opts.hf_chars || vocab.find(word.substr(off, len)) >= 0) {
      push_symbol(off, len, -1);
    } else {
      bool done = false;
      if (opts.byte_fallback) {
        bool all = true;
        for (size_t k = 0; k < len; ++k)
          all = all && vocab.hex_byte_token(static_cast<uint8_t>(word[off + k])) >= 0;
        if (all) {
          for (size_t k = 0; k < len; ++k)
            push_symbol(off + k, 1, vocab.hex_byte_token(static_cast<uint8_t>(word[off + k])));
          done = true;
        }
      }
      if (!done && opts.unk >= 0) {
        if (opts.fuse_unk && !syms.empty() && syms.back().fixed == opts.unk) {
          syms.back().n += len;
        } else {
          push_symbol(off, len, opts.unk);
        }
      }
      // No unk token: the character is dropped (HF would refuse the input).
    }
    off += len;
  }
  if (syms.empty()) return;

  std::priority_queue<Bigram, std::vector<Bigram>, BigramOrder> queue;
  auto try_add = [&](int left, int right) {
    if (left < 0 || right < 0) return;
    const Symbol& l = syms[left];
    const Symbol& r = syms[right];
    if (l.fixed >= 0 || r.fixed >= 0) return;
    const int rank =
        vocab.bpe_rank(word.substr(l.start, l.n), word.substr(r.start, r.n), &scratch->key);
    if (rank < 0) return;
    queue.push({rank, left, right, l.n, r.n});
  };
  for (int i = 1; i < static_cast<int>(syms.size()); ++i) try_add(i - 1, i);

  while (!queue.empty()) {
    const Bigram bg = queue.top();
    queue.pop();
    Symbol& l = syms[bg.left];
    Symbol& r = syms[bg.right];
    if (l.n != bg.left_n || r.n != bg.right_n || l.n == 0 || r.n == 0) continue;
    l.n += r.n;
    r.n = 0;
    l.next = r.next;
    if (r.next >= 0) syms[r.next].prev = bg.left;
    try_add(l.prev, bg.left);
    try_add(bg.left, l.next);
  }

  for (int i = 0; i != -1; i = syms[i].next) {
    const Symbol& s = syms[i];
    if (s.fixed >= 0) {
      out->push_back(s.fixed);
      continue;
    }
    const std::string_view text = word.substr(s.start, s.n);
    const int32_t id = vocab.find(text);
    if (id >= 0) {
      out->push_back(id);
    } else {
      emit_fallback(vocab, opts, text, out);
    }
  }
}

}  // namespace hinge
