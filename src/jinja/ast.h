// Syntax tree of a parsed Jinja template (built by jinja/parser.h, walked by
// jinja/interpreter.h). Immutable after parsing; nodes own their children.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "jinja/value.h"

namespace hinge::jinja {

enum class ExprKind : uint8_t {
  kLiteral,   // literal
  kName,      // name
  kList,      // children = items
  kTuple,     // children = items
  kDict,      // children = key0, value0, key1, value1, ...
  kGetAttr,   // children[0].name
  kGetItem,   // children[0][children[1]]
  kSlice,     // children[0][c1:c2:c3], absent parts are null
  kCall,      // children[0](children[1..], kwargs)
  kFilter,    // children[0] | name(children[1..], kwargs); children[0] null in a filter block
  kTest,      // children[0] is name(children[1..], kwargs)
  kNot,       // not children[0]
  kNeg,       // -children[0]
  kPos,       // +children[0]
  kBinary,    // children[0] op children[1]: + - * / // % ** ~
  kCompare,   // children[0] ops[0] children[1] ops[1] ... (chained, as in Python)
  kAnd,       // children[0] and children[1]
  kOr,        // children[0] or children[1]
  kCondExpr,  // children[0] if children[1] else children[2] (null: undefined)
};

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  ExprKind kind = ExprKind::kLiteral;
  int line = 0;
  int col = 0;
  Value literal;
  std::string name;  // name / attribute / filter / test / binary operator
  std::vector<ExprPtr> children;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  std::vector<std::string> ops;  // compare: ==, !=, <, <=, >, >=, in, notin
};

enum class StmtKind : uint8_t {
  kData,         // text
  kPrint,        // {{ expr }}
  kIf,           // branches (cond, body) ...; else_body
  kFor,          // targets in expr [if cond]: body; else_body
  kSet,          // targets = expr, or ns.attr = expr (attr non-empty)
  kSetBlock,     // {% set target %}body{% endset %} (| filter: expr is a filter chain)
  kMacro,        // name(params) body
  kCallBlock,    // {% call(params) expr %}body{% endcall %}
  kFilterBlock,  // {% filter expr %}body{% endfilter %}
  kBreak,
  kContinue,
};

struct Stmt;
using Body = std::vector<std::unique_ptr<Stmt>>;

struct Stmt {
  StmtKind kind = StmtKind::kData;
  int line = 0;
  int col = 0;
  std::string text;  // data; macro name; set: namespace attribute
  ExprPtr expr;      // print / for iterable / set value / call expr / filter chain
  ExprPtr cond;      // for: loop filter
  std::vector<std::string> targets;  // for / set names (several: tuple unpacking)
  std::vector<std::pair<ExprPtr, Body>> branches;  // if / elif
  Body body;
  Body else_body;
  std::vector<std::pair<std::string, ExprPtr>> params;  // macro / call block; default may be null
};

// A parsed template shares its tree with the closures (macros) created while rendering it.
struct TemplateAst {
  Body body;
};

}  // namespace hinge::jinja
