// GBNF text -> Grammar (grammar/grammar.h): a recursive-descent parser; repetitions become helper
// rules (x* -> r ::= x r | ; x{m,n} -> m copies then nested optional ones).
#include <algorithm>
#include <functional>
#include <unordered_map>

#include <fmt/format.h>

#include "grammar/grammar.h"

namespace hinge::grammar {

class GbnfParser {
 public:
  explicit GbnfParser(std::string_view src) : s_(src) {}

  StatusOr<Grammar> run() {
    skip_space(true);
    while (i_ < s_.size()) {
      const size_t at = i_;
      std::string name = parse_name();
      if (name.empty()) return error(at, "a rule name");
      skip_space(false);
      if (s_.substr(i_, 3) != "::=") return error(i_, "'::=' after the rule name");
      i_ += 3;
      const uint32_t id = rule_id(name);
      if (defined_[id]) return error(at, fmt::format("rule '{}' is defined twice", name));
      defined_[id] = true;
      std::vector<Elem> out;
      HINGE_RETURN_IF_ERROR(parse_alternatives(name, &out, false));
      out.push_back({ElemType::kEnd, 0});
      g_.rules_[id] = std::move(out);
      skip_space(true);
    }
    auto root = ids_.find("root");
    if (root == ids_.end() || !defined_[root->second]) return Status::Error("grammar: no 'root' rule");
    g_.root_ = root->second;
    for (size_t r = 0; r < g_.rules_.size(); ++r)
      if (!defined_[r]) return Status::Errorf("grammar: rule '{}' is used but not defined", g_.names_[r]);
    HINGE_RETURN_IF_ERROR(check_left_recursion());
    g_.compute_min_lengths();
    if (g_.min_length(g_.root_) == UINT32_MAX) return Status::Error("grammar: 'root' can never end");
    return std::move(g_);
  }

 private:
  Status error(size_t at, const std::string& what) const {
    const size_t line = 1 + static_cast<size_t>(std::count(s_.begin(), s_.begin() + static_cast<std::ptrdiff_t>(std::min(at, s_.size())), '\n'));
    return Status::Errorf("grammar: line {}: expected {}", line, what);
  }

  uint32_t rule_id(const std::string& name) {
    auto [it, fresh] = ids_.emplace(name, static_cast<uint32_t>(g_.rules_.size()));
    if (fresh) {
      g_.rules_.emplace_back();
      g_.names_.push_back(name);
      defined_.push_back(false);
    }
    return it->second;
  }
  uint32_t new_rule(const std::string& base) {
    const uint32_t id = rule_id(fmt::format("{}_{}", base, g_.rules_.size()));
    defined_[id] = true;
    return id;
  }

  static bool name_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
  }
  std::string parse_name() {
    const size_t b = i_;
    while (i_ < s_.size() && name_char(s_[i_])) ++i_;
    return std::string(s_.substr(b, i_ - b));
  }
  void skip_space(bool newlines) {
    while (i_ < s_.size()) {
      const char c = s_[i_];
      if (c == '#') {
        while (i_ < s_.size() && s_[i_] != '\n') ++i_;
      } else if (c == ' ' || c == '\t' || c == '\r' || (newlines && c == '\n')) {
        ++i_;
      } else {
        break;
      }
    }
  }
  // At a "name ::=" (the next rule): the current one has ended.
  bool at_rule_start() const {
    size_t k = i_;
    while (k < s_.size() && name_char(s_[k])) ++k;
    if (k == i_) return false;
    while (k < s_.size() && (s_[k] == ' ' || s_[k] == '\t')) ++k;
    return s_.substr(k, 3) == "::=";
  }

  Status parse_alternatives(const std::string& name, std::vector<Elem>* out, bool nested) {
    HINGE_RETURN_IF_ERROR(parse_sequence(name, out, nested));
    while (true) {
      skip_space(true);
      if (i_ < s_.size() && s_[i_] == '|') {
        ++i_;
        out->push_back({ElemType::kAlt, 0});
        HINGE_RETURN_IF_ERROR(parse_sequence(name, out, nested));
      } else {
        return Status::Ok();
      }
    }
  }

  Status parse_escape(uint32_t* cp) {
    if (i_ >= s_.size()) return error(i_, "an escape");
    const char c = s_[i_++];
    auto hex = [&](int n) -> Status {
      uint32_t v = 0;
      for (int k = 0; k < n; ++k) {
        if (i_ >= s_.size()) return error(i_, "hex digits");
        const char h = s_[i_++];
        v <<= 4;
        if (h >= '0' && h <= '9') v |= static_cast<uint32_t>(h - '0');
        else if (h >= 'a' && h <= 'f') v |= static_cast<uint32_t>(h - 'a' + 10);
        else if (h >= 'A' && h <= 'F') v |= static_cast<uint32_t>(h - 'A' + 10);
        else return error(i_ - 1, "a hex digit");
      }
      *cp = v;
      return v > 0x10FFFF ? error(i_, "a code point up to U+10FFFF") : Status::Ok();
    };
    switch (c) {
      case 'n': *cp = '\n'; return Status::Ok();
      case 'r': *cp = '\r'; return Status::Ok();
      case 't': *cp = '\t'; return Status::Ok();
      case 'x': return hex(2);
      case 'u': return hex(4);
      case 'U': return hex(8);
      case '\\': case '"': case '[': case ']': case '-': case '^': case '/': case '\'':
        *cp = static_cast<unsigned char>(c);
        return Status::Ok();
      default: return error(i_ - 1, "a known escape (\\n \\r \\t \\\\ \\\" \\[ \\] \\xHH \\uHHHH \\UHHHHHHHH)");
    }
  }
  // One UTF-8 code point of the source (or an escape).
  Status parse_char(uint32_t* cp) {
    if (s_[i_] == '\\') {
      ++i_;
      return parse_escape(cp);
    }
    const unsigned char c = static_cast<unsigned char>(s_[i_]);
    const int n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    if (n == 0 || i_ + static_cast<size_t>(n) > s_.size()) return error(i_, "valid UTF-8");
    uint32_t v = n == 1 ? c : (c & (0xFF >> (n + 1)));
    for (int k = 1; k < n; ++k) {
      const unsigned char d = static_cast<unsigned char>(s_[i_ + static_cast<size_t>(k)]);
      if ((d & 0xC0) != 0x80) return error(i_, "valid UTF-8");
      v = (v << 6) | (d & 0x3F);
    }
    i_ += static_cast<size_t>(n);
    *cp = v;
    return Status::Ok();
  }

  Status parse_sequence(const std::string& name, std::vector<Elem>* out, bool nested) {
    size_t last_start = out->size();  // the last element's first Elem (for repetitions)
    bool have_last = false;
    while (true) {
      skip_space(nested);
      if (i_ >= s_.size()) break;
      const char c = s_[i_];
      if (!nested && at_rule_start()) break;
      if (c == '"') {
        ++i_;
        last_start = out->size();
        have_last = true;
        // A literal: one element per code point; "" is the empty sequence.
        while (i_ < s_.size() && s_[i_] != '"') {
          uint32_t cp = 0;
          HINGE_RETURN_IF_ERROR(parse_char(&cp));
          out->push_back({ElemType::kChar, cp});
        }
        if (i_ >= s_.size()) return error(i_, "a closing '\"'");
        ++i_;
        if (out->size() == last_start) have_last = false;  // "" adds nothing to repeat
      } else if (c == '[') {
        ++i_;
        last_start = out->size();
        have_last = true;
        ElemType start = ElemType::kChar;
        if (i_ < s_.size() && s_[i_] == '^') {
          start = ElemType::kCharNot;
          ++i_;
        }
        bool first = true;
        while (i_ < s_.size() && s_[i_] != ']') {
          uint32_t lo = 0;
          HINGE_RETURN_IF_ERROR(parse_char(&lo));
          out->push_back({first ? start : ElemType::kCharAlt, lo});
          first = false;
          if (i_ + 1 < s_.size() && s_[i_] == '-' && s_[i_ + 1] != ']') {
            ++i_;
            uint32_t hi = 0;
            HINGE_RETURN_IF_ERROR(parse_char(&hi));
            if (hi < lo) return error(i_, "a range whose end is not below its start");
            out->push_back({ElemType::kCharUpper, hi});
          }
        }
        if (i_ >= s_.size()) return error(i_, "a closing ']'");
        if (first) return error(i_, "a non-empty character class");
        ++i_;
      } else if (c == '.') {
        ++i_;
        last_start = out->size();
        have_last = true;
        out->push_back({ElemType::kCharAny, 0});
      } else if (c == '(') {
        ++i_;
        const uint32_t sub = new_rule(name);
        std::vector<Elem> body;
        HINGE_RETURN_IF_ERROR(parse_alternatives(name, &body, true));
        skip_space(true);
        if (i_ >= s_.size() || s_[i_] != ')') return error(i_, "a closing ')'");
        ++i_;
        body.push_back({ElemType::kEnd, 0});
        g_.rules_[sub] = std::move(body);
        last_start = out->size();
        have_last = true;
        out->push_back({ElemType::kRuleRef, sub});
      } else if (name_char(c)) {
        const size_t at = i_;
        const std::string ref = parse_name();
        if (ref.empty()) return error(at, "a rule name");
        last_start = out->size();
        have_last = true;
        out->push_back({ElemType::kRuleRef, rule_id(ref)});
      } else if (c == '*' || c == '+' || c == '?' || c == '{') {
        if (!have_last) return error(i_, "something to repeat before '" + std::string(1, c) + "'");
        uint32_t lo = 0, hi = UINT32_MAX;
        ++i_;
        if (c == '+') lo = 1;
        if (c == '?') hi = 1;
        if (c == '{') {
          auto number = [&](uint32_t* v) {
            size_t b = i_;
            uint64_t x = 0;
            while (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9' && x < 100000) x = x * 10 + static_cast<uint64_t>(s_[i_++] - '0');
            if (i_ == b) return false;
            *v = static_cast<uint32_t>(x);
            return true;
          };
          skip_space(false);
          if (!number(&lo)) return error(i_, "a number in {m,n}");
          skip_space(false);
          hi = lo;
          if (i_ < s_.size() && s_[i_] == ',') {
            ++i_;
            skip_space(false);
            hi = UINT32_MAX;
            number(&hi);
            skip_space(false);
          }
          if (i_ >= s_.size() || s_[i_] != '}') return error(i_, "'}'");
          ++i_;
          if (hi < lo || lo > 10000 || (hi != UINT32_MAX && hi > 10000))
            return error(i_, "{m,n} with m <= n <= 10000");
        }
        std::vector<Elem> item(out->begin() + static_cast<std::ptrdiff_t>(last_start), out->end());
        out->resize(last_start);
        HINGE_RETURN_IF_ERROR(repeat(name, item, lo, hi, out));
        have_last = false;
      } else if (c == ')' || c == '|') {
        break;
      } else if (c == '\n') {
        break;  // (not nested) the end of a rule with no next rule after it
      } else {
        return error(i_, fmt::format("an element, not '{}'", c));
      }
      if (g_.rules_.size() > kMaxRules) return Status::Errorf("grammar: more than {} rules", kMaxRules);
    }
    return Status::Ok();
  }

  // item{lo,hi}: lo copies, then hi - lo nested optional ones (or a star rule).
  Status repeat(const std::string& name, const std::vector<Elem>& item, uint32_t lo, uint32_t hi,
                std::vector<Elem>* out) {
    for (uint32_t k = 0; k < lo; ++k) out->insert(out->end(), item.begin(), item.end());
    if (hi == UINT32_MAX) {  // star ::= item star |
      const uint32_t star = new_rule(name);
      std::vector<Elem>& r = g_.rules_[star];
      r = item;
      r.push_back({ElemType::kRuleRef, star});
      r.push_back({ElemType::kAlt, 0});
      r.push_back({ElemType::kEnd, 0});
      out->push_back({ElemType::kRuleRef, star});
      return Status::Ok();
    }
    // opt_k ::= item opt_{k-1} | ; built from the innermost out.
    uint32_t inner = UINT32_MAX;
    for (uint32_t k = lo; k < hi; ++k) {
      const uint32_t opt = new_rule(name);
      std::vector<Elem> r = item;
      if (inner != UINT32_MAX) r.push_back({ElemType::kRuleRef, inner});
      r.push_back({ElemType::kAlt, 0});
      r.push_back({ElemType::kEnd, 0});
      g_.rules_[opt] = std::move(r);
      inner = opt;
      if (g_.rules_.size() > kMaxRules) return Status::Errorf("grammar: more than {} rules", kMaxRules);
    }
    if (inner != UINT32_MAX) out->push_back({ElemType::kRuleRef, inner});
    return Status::Ok();
  }

  // A rule that can reach itself before consuming a character never ends in a pushdown matcher.
  Status check_left_recursion() const {
    const size_t n = g_.rules_.size();
    std::vector<uint8_t> nullable(n, 0);
    for (bool changed = true; changed;) {
      changed = false;
      for (size_t r = 0; r < n; ++r) {
        if (nullable[r]) continue;
        bool seq_nullable = true;
        for (const Elem& e : g_.rules_[r]) {
          if (e.type == ElemType::kAlt || e.type == ElemType::kEnd) {
            if (seq_nullable) {
              nullable[r] = 1;
              changed = true;
              break;
            }
            seq_nullable = true;
          } else if (e.type == ElemType::kRuleRef) {
            seq_nullable = seq_nullable && nullable[e.value];
          } else if (e.type != ElemType::kCharUpper && e.type != ElemType::kCharAlt) {
            seq_nullable = false;
          }
        }
      }
    }
    // Edges r -> s when s can be the first thing r consumes through.
    std::vector<std::vector<uint32_t>> first(n);
    for (size_t r = 0; r < n; ++r) {
      bool leading = true;
      for (const Elem& e : g_.rules_[r]) {
        if (e.type == ElemType::kAlt || e.type == ElemType::kEnd) {
          leading = true;
        } else if (leading && e.type == ElemType::kRuleRef) {
          first[r].push_back(e.value);
          leading = nullable[e.value];
        } else if (e.type != ElemType::kCharUpper && e.type != ElemType::kCharAlt) {
          leading = false;
        }
      }
    }
    std::vector<uint8_t> state(n, 0);  // 0 new, 1 on the path, 2 done
    for (size_t start = 0; start < n; ++start) {
      if (state[start]) continue;
      std::vector<std::pair<uint32_t, size_t>> path = {{static_cast<uint32_t>(start), 0}};
      state[start] = 1;
      while (!path.empty()) {
        auto& [r, k] = path.back();
        if (k == first[r].size()) {
          state[r] = 2;
          path.pop_back();
          continue;
        }
        const uint32_t s = first[r][k++];
        if (state[s] == 1) return Status::Errorf("grammar: rule '{}' is left-recursive", g_.names_[s]);
        if (state[s] == 0) {
          state[s] = 1;
          path.push_back({s, 0});
        }
      }
    }
    return Status::Ok();
  }

  std::string_view s_;
  size_t i_ = 0;
  Grammar g_;
  std::unordered_map<std::string, uint32_t> ids_;
  std::vector<bool> defined_;
};

StatusOr<Grammar> Grammar::parse(std::string_view gbnf) {
  if (gbnf.size() > (1u << 20)) return Status::Error("grammar: longer than 1 MiB");
  return GbnfParser(gbnf).run();
}

uint64_t Grammar::min_length_from(const Elem* e) const {
  uint64_t n = 0;
  while (e->type != ElemType::kEnd && e->type != ElemType::kAlt) {
    if (e->type == ElemType::kRuleRef) {
      n += min_len_[e->value];
      ++e;
    } else {  // a class: the UTF-8 bytes of its smallest code point (a byte may be a token)
      uint32_t lo = e->type == ElemType::kChar ? e->value : 0;  // negated / any: ASCII is likely
      ++e;
      while (e->type == ElemType::kCharUpper || e->type == ElemType::kCharAlt) {
        if (e->type == ElemType::kCharAlt) lo = std::min(lo, e->value);
        ++e;
      }
      n += lo < 0x80 ? 1 : lo < 0x800 ? 2 : lo < 0x10000 ? 3 : 4;
    }
  }
  return n;
}

void Grammar::compute_min_lengths() {
  min_len_.assign(rules_.size(), UINT32_MAX);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < rules_.size(); ++r) {
      const Elem* e = rules_[r].data();
      uint64_t best = UINT32_MAX;
      while (true) {
        best = std::min(best, min_length_from(e));
        while (e->type != ElemType::kEnd && e->type != ElemType::kAlt) ++e;
        if (e->type == ElemType::kEnd) break;
        ++e;
      }
      const uint32_t v = static_cast<uint32_t>(std::min<uint64_t>(best, UINT32_MAX));
      if (v < min_len_[r]) {
        min_len_[r] = v;
        changed = true;
      }
    }
  }
}

bool class_matches(const Elem* e, uint32_t c, const Elem** end) {
  const bool negated = e->type == ElemType::kCharNot;
  if (e->type == ElemType::kCharAny) {
    *end = e + 1;
    return true;
  }
  bool found = false;
  do {
    if (e[1].type == ElemType::kCharUpper) {
      found = found || (e->value <= c && c <= e[1].value);
      e += 2;
    } else {
      found = found || e->value == c;
      e += 1;
    }
  } while (e->type == ElemType::kCharAlt);
  *end = e;
  return found != negated;
}

bool class_meets(const Elem* e, uint32_t lo, uint32_t hi) {
  if (e->type == ElemType::kCharAny) return true;
  const bool negated = e->type == ElemType::kCharNot;
  // Whether the class covers all of [lo, hi] (negated: then nothing there is allowed), or any.
  bool any = false;
  uint64_t covered = 0;  // how much of [lo, hi] the ranges cover (an upper bound with overlaps)
  do {
    uint32_t a = e->value, b = e->value;
    if (e[1].type == ElemType::kCharUpper) {
      b = e[1].value;
      e += 2;
    } else {
      e += 1;
    }
    if (a <= hi && b >= lo) {
      any = true;
      covered += std::min(b, hi) - std::max(a, lo) + 1;
    }
  } while (e->type == ElemType::kCharAlt);
  return negated ? covered < static_cast<uint64_t>(hi - lo) + 1 : any;
}

}  // namespace hinge::grammar
