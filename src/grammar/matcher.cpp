#include "grammar/matcher.h"

#include <algorithm>
#include <array>
#include <unordered_map>
#include <climits>

namespace hinge::grammar {
namespace {

bool is_end(const Elem* e) { return e->type == ElemType::kEnd || e->type == ElemType::kAlt; }

void dedupe(std::vector<Matcher::Stack>* v) {
  std::sort(v->begin(), v->end());
  v->erase(std::unique(v->begin(), v->end()), v->end());
}

constexpr size_t kMaxStacks = 4096;  // an ambiguous grammar's state is cut here
constexpr size_t kMaxWalkStates = 1 << 16, kMaxWalkStacks = 1 << 20;  // one mask walk's bound

}  // namespace

TokenTrie::TokenTrie(const std::vector<std::string>& pieces, std::span<const int32_t> excluded)
    : n_vocab_(static_cast<int32_t>(pieces.size())) {
  std::vector<uint8_t> skip(pieces.size(), 0);
  for (int32_t id : excluded)
    if (id >= 0 && static_cast<size_t>(id) < skip.size()) skip[static_cast<size_t>(id)] = 1;
  // Sorted texts give each node's children as one contiguous run, built breadth by depth.
  std::vector<int32_t> order;
  for (size_t i = 0; i < pieces.size(); ++i)
    if (!skip[i] && !pieces[i].empty()) order.push_back(static_cast<int32_t>(i));
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return pieces[static_cast<size_t>(a)] < pieces[static_cast<size_t>(b)] || (pieces[static_cast<size_t>(a)] == pieces[static_cast<size_t>(b)] && a < b);
  });
  nodes_.push_back({});
  // Recursive build over [b, e) of `order` sharing `depth` bytes, into node `at`.
  struct Job {
    uint32_t node;
    size_t b, e, depth;
  };
  std::vector<Job> jobs = {{0, 0, order.size(), 0}};
  while (!jobs.empty()) {
    const Job j = jobs.back();
    jobs.pop_back();
    size_t k = j.b;
    // Tokens that end at this node.
    while (k < j.e && pieces[static_cast<size_t>(order[k])].size() == j.depth) {
      if (nodes_[j.node].token < 0) nodes_[j.node].token = order[k];
      else extra_.push_back({j.node, order[k]});
      ++k;
    }
    const uint32_t first = static_cast<uint32_t>(nodes_.size());
    std::vector<Job> children;
    while (k < j.e) {
      const uint8_t byte = static_cast<uint8_t>(pieces[static_cast<size_t>(order[k])][j.depth]);
      size_t m = k;
      while (m < j.e && static_cast<uint8_t>(pieces[static_cast<size_t>(order[m])][j.depth]) == byte) ++m;
      Node n;
      n.byte = byte;
      nodes_.push_back(n);
      children.push_back({static_cast<uint32_t>(nodes_.size() - 1), k, m, j.depth + 1});
      k = m;
    }
    nodes_[j.node].first_child = first;
    nodes_[j.node].num_children = static_cast<uint32_t>(nodes_.size()) - first;
    jobs.insert(jobs.end(), children.rbegin(), children.rend());
  }
  std::sort(extra_.begin(), extra_.end());
}

const std::vector<int32_t>& TokenTrie::extra_tokens(uint32_t node) const {
  extra_scratch_.clear();
  auto it = std::lower_bound(extra_.begin(), extra_.end(), std::make_pair(node, INT32_MIN));
  for (; it != extra_.end() && it->first == node; ++it) extra_scratch_.push_back(it->second);
  return extra_scratch_;
}

Matcher::Matcher(std::shared_ptr<const Grammar> g) : g_(std::move(g)) {
  // The root's alternatives, each advanced to its first character class.
  const std::vector<Elem>& root = g_->rules()[g_->root()];
  const Elem* pos = root.data();
  while (true) {
    Stack s;
    if (!is_end(pos)) s.push_back(pos);
    advance_stack(std::move(s), &stacks_);
    while (!is_end(pos)) ++pos;
    if (pos->type == ElemType::kEnd) break;
    ++pos;  // past kAlt
  }
  dedupe(&stacks_);
}

void Matcher::advance_stack(Stack stack, std::vector<Stack>* out) const {
  if (stack.empty()) {
    out->push_back(std::move(stack));
    return;
  }
  const Elem* pos = stack.back();
  if (pos->type != ElemType::kRuleRef) {
    out->push_back(std::move(stack));
    return;
  }
  const std::vector<Elem>& rule = g_->rules()[pos->value];
  const Elem* sub = rule.data();
  while (true) {
    Stack next(stack.begin(), stack.end() - 1);
    if (!is_end(pos + 1)) next.push_back(pos + 1);
    if (!is_end(sub)) next.push_back(sub);
    advance_stack(std::move(next), out);
    if (out->size() > kMaxStacks) return;
    while (!is_end(sub)) ++sub;
    if (sub->type == ElemType::kEnd) break;
    ++sub;
  }
}

void Matcher::step(const std::vector<Stack>& in, uint32_t c, std::vector<Stack>* out) const {
  out->clear();
  for (const Stack& s : in) {
    if (s.empty()) continue;
    const Elem* after = nullptr;
    if (!class_matches(s.back(), c, &after)) continue;
    Stack next(s.begin(), s.end() - 1);
    if (!is_end(after)) next.push_back(after);
    advance_stack(std::move(next), out);
    if (out->size() > kMaxStacks) break;
  }
  dedupe(out);
}

bool Matcher::partial_possible(const std::vector<Stack>& stacks, const Partial& p) const {
  // Surrogates (U+D800..DFFF) are not characters: UTF-8 never encodes them.
  uint32_t lo = p.lo, hi = p.hi;
  if (lo >= 0xD800 && hi <= 0xDFFF) return false;
  if (lo >= 0xD800 && lo <= 0xDFFF) lo = 0xE000;
  if (hi >= 0xD800 && hi <= 0xDFFF) hi = 0xD7FF;
  for (const Stack& s : stacks) {
    if (s.empty()) continue;
    if (lo <= hi ? class_meets(s.back(), lo, hi)
                 : class_meets(s.back(), p.lo, 0xD7FF) || class_meets(s.back(), 0xE000, p.hi))
      return true;
  }
  return false;
}

int Matcher::utf8_byte(Partial& p, uint8_t b, uint32_t* cp) {
  if (p.left == 0) {
    if (b < 0x80) {
      *cp = b;
      return 1;
    }
    const int n = (b >> 5) == 0x6 ? 1 : (b >> 4) == 0xE ? 2 : (b >> 3) == 0x1E ? 3 : -1;
    if (n < 0) return -1;  // not a UTF-8 lead byte
    p.value = b & (0x3F >> n);
    p.left = static_cast<int8_t>(n);
    const uint32_t shift = 6 * static_cast<uint32_t>(n);
    p.lo = std::max<uint32_t>(p.value << shift, n == 1 ? 0x80 : n == 2 ? 0x800 : 0x10000);
    p.hi = std::min<uint32_t>((p.value << shift) | ((1u << shift) - 1), 0x10FFFF);
    return p.lo <= p.hi ? 0 : -1;
  }
  if ((b & 0xC0) != 0x80) return -1;
  p.value = (p.value << 6) | (b & 0x3F);
  --p.left;
  if (p.left > 0) {
    const uint32_t shift = 6 * static_cast<uint32_t>(p.left);
    p.lo = std::max(p.lo, p.value << shift);
    p.hi = std::min(p.hi, (p.value << shift) | ((1u << shift) - 1));
    return p.lo <= p.hi ? 0 : -1;
  }
  *cp = p.value;
  p = {};
  return *cp >= 0xD800 && *cp <= 0xDFFF ? -1 : 1;  // surrogates are not characters
}

bool Matcher::feed_byte(std::vector<Stack>& stacks, Partial& p, uint8_t b, std::vector<Stack>& scratch) const {
  uint32_t cp = 0;
  const int r = utf8_byte(p, b, &cp);
  if (r < 0) return false;
  if (r == 0) return partial_possible(stacks, p);
  step(stacks, cp, &scratch);
  if (scratch.empty()) return false;
  stacks.swap(scratch);
  return true;
}

bool Matcher::accept(std::string_view text) {
  std::vector<Stack> stacks = stacks_, scratch;
  Partial p = partial_;
  for (char ch : text)
    if (!feed_byte(stacks, p, static_cast<uint8_t>(ch), scratch)) return false;
  stacks_ = std::move(stacks);
  partial_ = p;
  return true;
}

bool Matcher::can_end() const {
  if (partial_.left != 0) return false;
  return std::any_of(stacks_.begin(), stacks_.end(), [](const Stack& s) { return s.empty(); });
}

bool Matcher::must_end() const {
  return partial_.left == 0 && !stacks_.empty() &&
         std::all_of(stacks_.begin(), stacks_.end(), [](const Stack& s) { return s.empty(); });
}

uint64_t Matcher::min_remaining(const std::vector<Stack>& stacks, const Partial& p) const {
  uint64_t best = UINT64_MAX;
  for (const Stack& s : stacks) {
    uint64_t n = static_cast<uint64_t>(p.left);
    for (const Elem* e : s) n += g_->min_length_from(e);
    best = std::min(best, n);
  }
  return best;
}

uint64_t Matcher::hash(const StateKey& k) {
  uint64_t h = 0x9E3779B97F4A7C15ull ^ (uint64_t{k.value} << 8) ^ static_cast<uint64_t>(k.left);
  auto mix = [&](uint64_t v) { h = (h ^ v) * 0x100000001B3ull; h ^= h >> 29; };
  for (const Stack& s : k.stacks) {
    mix(s.size());
    for (const Elem* e : s) mix(reinterpret_cast<uintptr_t>(e));
  }
  return h;
}

void Matcher::fill_mask(const TokenTrie& trie, std::span<uint64_t> mask, int64_t budget,
                        uint64_t* max_after) const {
  const bool tight = budget != INT64_MAX;
  const uint64_t left = budget < 0 ? 0 : static_cast<uint64_t>(budget);
  if (max_after) *max_after = 0;
  std::fill(mask.begin(), mask.end(), 0);
  const auto& nodes = trie.nodes();
  auto allow = [&](int32_t t) { mask[static_cast<size_t>(t) >> 6] |= uint64_t{1} << (t & 63); };
  // The stack sets this walk reaches, interned: a frame carries an index, and each state's
  // transitions are computed once (inside a JSON string every ordinary character leads back to
  // the same state, so the whole vocabulary is walked with table lookups).
  struct State {
    std::vector<Stack> stacks;
    std::array<int32_t, 128> ascii;  // -2: not computed, -1: refused
    std::unordered_map<uint32_t, int32_t> other;
    uint64_t min_rem = UINT64_MAX;   // UINT64_MAX: not computed
  };
  std::vector<State> states;
  std::unordered_map<uint64_t, std::vector<int32_t>> by_hash;
  auto intern = [&](std::vector<Stack>&& st) -> int32_t {
    const uint64_t h = hash(StateKey{st, 0, 0, 0, 0});
    std::vector<int32_t>& ids = by_hash[h];
    for (int32_t id : ids)
      if (states[static_cast<size_t>(id)].stacks == st) return id;
    State n;
    n.stacks = std::move(st);
    n.ascii.fill(-2);
    states.push_back(std::move(n));
    ids.push_back(static_cast<int32_t>(states.size() - 1));
    return static_cast<int32_t>(states.size() - 1);
  };
  std::vector<Stack> scratch;
  size_t held = 0;  // stacks in interned states
  auto next = [&](int32_t id, uint32_t cp) -> int32_t {
    int32_t* slot = cp < 128 ? &states[static_cast<size_t>(id)].ascii[cp] : nullptr;
    if (slot != nullptr && *slot != -2) return *slot;
    if (slot == nullptr) {
      auto it = states[static_cast<size_t>(id)].other.find(cp);
      if (it != states[static_cast<size_t>(id)].other.end()) return it->second;
    }
    step(states[static_cast<size_t>(id)].stacks, cp, &scratch);
    // A hostile grammar could make every prefix a new state of thousands of stacks: past the
    // walk's bound, new states are refused (their tokens left out), never memory without end.
    held += scratch.size();
    const bool over = states.size() >= kMaxWalkStates || held > kMaxWalkStacks;
    const int32_t to = scratch.empty() || over ? -1 : intern(std::move(scratch));
    scratch.clear();
    if (cp < 128) states[static_cast<size_t>(id)].ascii[cp] = to;
    else states[static_cast<size_t>(id)].other[cp] = to;
    return to;
  };
  auto min_rem = [&](int32_t id) {
    State& st = states[static_cast<size_t>(id)];
    if (st.min_rem == UINT64_MAX) st.min_rem = min_remaining(st.stacks, Partial{});
    return st.min_rem;
  };
  // One byte from (state, partial); false: refused.
  auto feed = [&](int32_t& id, Partial& p, uint8_t b) -> bool {
    uint32_t cp = 0;
    const int r = utf8_byte(p, b, &cp);
    if (r < 0) return false;
    if (r == 0) return partial_possible(states[static_cast<size_t>(id)].stacks, p);
    id = next(id, cp);
    return id >= 0;
  };
  struct Frame {
    uint32_t node;
    int32_t state;
    Partial partial;
  };
  std::vector<Frame> todo;
  const int32_t start = intern(std::vector<Stack>(stacks_));
  const TokenTrie::Node& root = nodes[0];
  for (uint32_t c = root.first_child; c < root.first_child + root.num_children; ++c)
    todo.push_back({c, start, partial_});
  while (!todo.empty()) {
    Frame f = todo.back();
    todo.pop_back();
    const TokenTrie::Node& n = nodes[f.node];
    if (!feed(f.state, f.partial, n.byte)) continue;  // the subtree is dead
    if (n.token >= 0) {
      const uint64_t after = tight || max_after ? min_rem(f.state) + static_cast<uint64_t>(f.partial.left) : 0;
      if (!tight || after <= left) {
        allow(n.token);
        for (int32_t t : trie.extra_tokens(f.node)) allow(t);
        if (max_after) *max_after = std::max(*max_after, after);
      }
    }
    for (uint32_t c = n.first_child; c < n.first_child + n.num_children; ++c)
      todo.push_back({c, f.state, f.partial});
  }
}

}  // namespace hinge::grammar
