// A context-free grammar over Unicode code points, in llama.cpp's GBNF notation, compiled for a
// pushdown matcher (grammar/matcher.h). This is the raw grammar of `hinge serve`'s
// `guided_grammar` / `grammar` fields, and what JSON schemas (grammar/json_schema.h), choices
// and tool calls compile to.
//
// GBNF, as llama.cpp documents it (grammars/README.md there):
//   root  ::= "{" ws pair ("," ws pair)* "}"      # rules: name ::= alternatives; root starts
//   pair  ::= [a-z]+ ":" ws ("true" | "false")    # "literal" (\n \t \r \\ \" \xHH \uHHHH
//   ws    ::= [ \t\n]*                            #  \UHHHHHHHH), [class] [^negated] ranges,
//                                                 # . any, (group), * + ? {m} {m,} {m,n}
// Names are [A-Za-z0-9_-]+; # comments to the end of the line; a rule runs until the next
// `name ::=`. Undefined rules, left recursion (which a pushdown matcher cannot run), more than
// kMaxRules rules or an empty root are errors naming the rule and line.
//
// Thread-safety: immutable after parse; shared by every request that uses it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace hinge::grammar {

enum class ElemType : uint8_t {
  kEnd,        // end of a rule (after its last alternative)
  kAlt,        // start of another alternative
  kRuleRef,    // value: rule index
  kChar,       // a character class starts: value is a code point (or a range's lower bound)
  kCharNot,    // a negated class starts: value as kChar
  kCharUpper,  // value: the upper bound of the range the previous element started
  kCharAlt,    // value: another code point (or range start) of the same class
  kCharAny,    // any code point
};

struct Elem {
  ElemType type = ElemType::kEnd;
  uint32_t value = 0;
};

inline constexpr size_t kMaxRules = 20000;

class Grammar {
 public:
  static StatusOr<Grammar> parse(std::string_view gbnf);

  // Each rule: alternatives of element sequences, kAlt between them, kEnd last.
  const std::vector<std::vector<Elem>>& rules() const { return rules_; }
  uint32_t root() const { return root_; }
  const std::string& rule_name(uint32_t i) const { return names_[i]; }
  // The fewest UTF-8 bytes a rule's text can have (UINT32_MAX: it never ends).
  uint32_t min_length(uint32_t rule) const { return min_len_[rule]; }
  // The fewest UTF-8 bytes from `pos` (an element of a rule) to the end of its alternative.
  uint64_t min_length_from(const Elem* pos) const;

 private:
  void compute_min_lengths();
  std::vector<std::vector<Elem>> rules_;
  std::vector<uint32_t> min_len_;
  std::vector<std::string> names_;
  uint32_t root_ = 0;
  friend class GbnfParser;
};

// Whether a class starting at `e` matches code point c; `*end` gets the element after the class.
bool class_matches(const Elem* e, uint32_t c, const Elem** end);
// Whether a class starting at `e` matches some code point in [lo, hi].
bool class_meets(const Elem* e, uint32_t lo, uint32_t hi);

}  // namespace hinge::grammar
