#include "tokenizer/spm.h"

#include <algorithm>
#include <queue>

#include "tokenizer/unicode.h"
#include "tokenizer/vocab.h"

namespace hinge {

namespace {

// A span of the text; merged symbols grow to the right and leave n == 0 behind them.
struct Symbol {
  int prev;
  int next;
  size_t start;
  size_t n;
};

struct Bigram {
  float score;
  int left;
  int right;
  size_t size;  // bytes of left + right when queued; a mismatch later means it is stale
};

struct BigramOrder {  // max-heap on score, then the leftmost pair first
  bool operator()(const Bigram& a, const Bigram& b) const {
    return a.score < b.score || (a.score == b.score && a.left > b.left);
  }
};

}  // namespace

void spm_encode(const Vocab& vocab, int32_t unk, std::string_view text, std::vector<int32_t>* out) {
  std::vector<Symbol> syms;
  syms.reserve(text.size());
  for (size_t off = 0; off < text.size();) {
    const size_t len = std::min(unicode::seq_len(text[off]), text.size() - off);
    const int idx = static_cast<int>(syms.size());
    syms.push_back({idx - 1, off + len == text.size() ? -1 : idx + 1, off, len});
    off += len;
  }
  if (syms.empty()) return;

  std::priority_queue<Bigram, std::vector<Bigram>, BigramOrder> queue;
  auto try_add = [&](int left, int right) {
    if (left < 0 || right < 0) return;
    const size_t size = syms[left].n + syms[right].n;
    const int32_t id = vocab.find(text.substr(syms[left].start, size));
    if (id < 0) return;
    queue.push({vocab.score(id), left, right, size});
  };
  for (int i = 1; i < static_cast<int>(syms.size()); ++i) try_add(i - 1, i);

  while (!queue.empty()) {
    const Bigram bg = queue.top();
    queue.pop();
    Symbol& l = syms[bg.left];
    Symbol& r = syms[bg.right];
    if (l.n == 0 || r.n == 0 || l.n + r.n != bg.size) continue;
    l.n += r.n;
    r.n = 0;
    l.next = r.next;
    if (r.next >= 0) syms[r.next].prev = bg.left;
    try_add(l.prev, bg.left);
    try_add(bg.left, l.next);
  }

  for (int i = 0; i != -1; i = syms[i].next) {
    const std::string_view piece = text.substr(syms[i].start, syms[i].n);
    const int32_t id = vocab.find(piece);
    if (id >= 0) {
      out->push_back(id);
      continue;
    }
    // Not a piece: byte fallback (merged symbols are always pieces, so this is one character).
    const size_t mark = out->size();
    bool all_bytes = true;
    for (char c : piece) {
      const int32_t b = vocab.spm_byte_token(static_cast<uint8_t>(c));
      if (b < 0) {
        all_bytes = false;
        break;
      }
      out->push_back(b);
    }
    if (!all_bytes) {
      out->resize(mark);
      if (unk >= 0) out->push_back(unk);
    }
  }
}

}  // namespace hinge
