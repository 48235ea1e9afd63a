// Jinja expression parser (see jinja/parser.h): jinja2.parser's precedence climbing.
#include <cerrno>
#include <cstdlib>

#include "jinja/parser_impl.h"

namespace hinge::jinja {

ExprPtr Parser::make(ExprKind kind, const Token& at) {
  auto e = std::make_unique<Expr>();
  e->kind = kind;
  e->line = at.line;
  e->col = at.col;
  return e;
}

ExprPtr Parser::parse_expression(bool with_condexpr) {
  DepthGuard guard(this);
  return with_condexpr ? parse_condexpr() : parse_or();
}

ExprPtr Parser::parse_tuple(bool with_condexpr, bool explicit_parens) {
  const Token start = cur();
  std::vector<ExprPtr> items;
  bool is_tuple = false;
  while (true) {
    if (!items.empty()) {
      if (!skip_op(",")) break;
      is_tuple = true;
    }
    if (cur().type == Tok::kVarEnd || cur().type == Tok::kBlockEnd || is_op(")") ||
        (!items.empty() && is_name("in"))) {
      break;
    }
    items.push_back(parse_expression(with_condexpr));
  }
  if (!is_tuple && items.size() == 1) return std::move(items[0]);
  if (items.empty() && !explicit_parens) error("an expression");
  auto t = make(ExprKind::kTuple, start);
  t->children = std::move(items);
  return t;
}

ExprPtr Parser::parse_condexpr() {
  ExprPtr expr1 = parse_or();
  while (is_name("if")) {
    const Token at = cur();
    ++pos_;
    ExprPtr cond = parse_or();
    ExprPtr expr3;
    if (skip_name("else")) expr3 = parse_condexpr();
    auto c = make(ExprKind::kCondExpr, at);
    c->children.push_back(std::move(expr1));
    c->children.push_back(std::move(cond));
    c->children.push_back(std::move(expr3));
    expr1 = std::move(c);
  }
  return expr1;
}

template <typename Operand>
ExprPtr Parser::parse_left_assoc(ExprKind kind, std::initializer_list<const char*> ops,
                                 Operand operand) {
  auto at_operator = [&] {
    for (const char* op : ops)
      if (kind == ExprKind::kBinary ? is_op(op) : is_name(op)) return true;
    return false;
  };
  ExprPtr left = operand();
  while (at_operator()) {
    auto n = make(kind, cur());
    if (kind == ExprKind::kBinary) n->name = cur().text;
    ++pos_;
    n->children.push_back(std::move(left));
    n->children.push_back(operand());
    left = std::move(n);
  }
  return left;
}

ExprPtr Parser::parse_or() {
  return parse_left_assoc(ExprKind::kOr, {"or"}, [this] { return parse_and(); });
}

ExprPtr Parser::parse_and() {
  return parse_left_assoc(ExprKind::kAnd, {"and"}, [this] { return parse_not(); });
}

ExprPtr Parser::parse_not() {
  DepthGuard guard(this);
  if (is_name("not")) {
    auto n = make(ExprKind::kNot, cur());
    ++pos_;
    n->children.push_back(parse_not());
    return n;
  }
  return parse_compare();
}

ExprPtr Parser::parse_compare() {
  const Token start = cur();
  ExprPtr expr = parse_math1();
  ExprPtr cmp;
  while (true) {
    std::string op;
    if (cur().type == Tok::kOp && (cur().text == "==" || cur().text == "!=" ||
                                   cur().text == "<" || cur().text == "<=" ||
                                   cur().text == ">" || cur().text == ">=")) {
      op = cur().text;
      ++pos_;
    } else if (is_name("in")) {
      op = "in";
      ++pos_;
    } else if (is_name("not") && peek().type == Tok::kName && peek().text == "in") {
      op = "notin";
      pos_ += 2;
    } else {
      break;
    }
    if (!cmp) {
      cmp = make(ExprKind::kCompare, start);
      cmp->children.push_back(std::move(expr));
    }
    cmp->ops.push_back(op);
    cmp->children.push_back(parse_math1());
  }
  return cmp ? std::move(cmp) : std::move(expr);
}

ExprPtr Parser::parse_math1() {
  return parse_left_assoc(ExprKind::kBinary, {"+", "-"}, [this] { return parse_concat(); });
}

ExprPtr Parser::parse_concat() {
  return parse_left_assoc(ExprKind::kBinary, {"~"}, [this] { return parse_math2(); });
}

ExprPtr Parser::parse_math2() {
  return parse_left_assoc(ExprKind::kBinary, {"*", "/", "//", "%"},
                          [this] { return parse_pow(); });
}

ExprPtr Parser::parse_pow() {
  return parse_left_assoc(ExprKind::kBinary, {"**"}, [this] { return parse_unary(true); });
}

ExprPtr Parser::parse_unary(bool with_filter) {
  DepthGuard guard(this);
  ExprPtr node;
  if (is_op("-") || is_op("+")) {
    node = make(is_op("-") ? ExprKind::kNeg : ExprKind::kPos, cur());
    ++pos_;
    node->children.push_back(parse_unary(false));
  } else {
    node = parse_primary();
  }
  node = parse_postfix(std::move(node));
  if (with_filter) node = parse_filter_expr(std::move(node));
  return node;
}

ExprPtr Parser::parse_primary() {
  const Token& t = cur();
  ExprPtr node;
  if (t.type == Tok::kName) {
    node = make(ExprKind::kLiteral, t);
    if (t.text == "true" || t.text == "True") {
      node->literal = Value::Bool(true);
    } else if (t.text == "false" || t.text == "False") {
      node->literal = Value::Bool(false);
    } else if (t.text == "none" || t.text == "None") {
      node->literal = Value::None();
    } else {
      node->kind = ExprKind::kName;
      node->name = t.text;
    }
    ++pos_;
  } else if (t.type == Tok::kString) {
    node = make(ExprKind::kLiteral, t);
    std::string s;
    while (cur().type == Tok::kString) s += toks_[pos_++].text;  // adjacent literals join
    node->literal = Value::Str(std::move(s));
  } else if (t.type == Tok::kInt) {
    node = make(ExprKind::kLiteral, t);
    errno = 0;
    long long v = std::strtoll(t.text.c_str(), nullptr, 10);
    if (errno == ERANGE) error_here("integer literal out of range");
    node->literal = Value::Int(v);
    ++pos_;
  } else if (t.type == Tok::kFloat) {
    node = make(ExprKind::kLiteral, t);
    node->literal = Value::Float(std::strtod(t.text.c_str(), nullptr));
    ++pos_;
  } else if (is_op("(")) {
    ++pos_;
    node = parse_tuple(true, true);
    expect_op(")");
  } else if (is_op("[")) {
    node = make(ExprKind::kList, t);
    ++pos_;
    while (!is_op("]")) {
      if (!node->children.empty()) expect_op(",");
      if (is_op("]")) break;
      node->children.push_back(parse_expression());
    }
    expect_op("]");
  } else if (is_op("{")) {
    node = make(ExprKind::kDict, t);
    ++pos_;
    while (!is_op("}")) {
      if (!node->children.empty()) expect_op(",");
      if (is_op("}")) break;
      node->children.push_back(parse_expression());
      expect_op(":");
      node->children.push_back(parse_expression());
    }
    expect_op("}");
  } else {
    error("an expression");
  }
  return node;
}

ExprPtr Parser::parse_call(ExprPtr callee) {
  auto call = make(ExprKind::kCall, cur());
  call->children.push_back(std::move(callee));
  parse_call_args(*call);
  return call;
}

ExprPtr Parser::parse_postfix(ExprPtr node) {
  while (true) {
    if (is_op(".") || is_op("[")) {
      node = parse_subscript(std::move(node));
    } else if (is_op("(")) {
      node = parse_call(std::move(node));
    } else {
      return node;
    }
  }
}

ExprPtr Parser::parse_filter_expr(ExprPtr node) {
  while (true) {
    if (is_op("|")) {
      ++pos_;
      node = parse_filter_chain(std::move(node));
    } else if (is_name("is")) {
      node = parse_test(std::move(node));
    } else if (is_op("(")) {
      node = parse_call(std::move(node));
    } else {
      return node;
    }
  }
}

// One filter (the '|' already consumed, or none at the start of a filter block) and any
// '|'-chained filters after it.
ExprPtr Parser::parse_filter_chain(ExprPtr input) {
  while (true) {
    auto f = make(ExprKind::kFilter, cur());
    f->name = expect_name();
    while (skip_op(".")) f->name += "." + expect_name();
    f->children.push_back(std::move(input));
    if (is_op("(")) parse_call_args(*f);
    input = std::move(f);
    if (!skip_op("|")) return input;
  }
}

ExprPtr Parser::parse_subscript(ExprPtr node) {
  const Token at = cur();
  if (skip_op(".")) {
    if (cur().type == Tok::kInt) {
      auto n = make(ExprKind::kGetItem, at);
      n->children.push_back(std::move(node));
      auto idx = make(ExprKind::kLiteral, cur());
      idx->literal = Value::Int(std::strtoll(cur().text.c_str(), nullptr, 10));
      ++pos_;
      n->children.push_back(std::move(idx));
      return n;
    }
    auto n = make(ExprKind::kGetAttr, at);
    n->name = expect_name();
    n->children.push_back(std::move(node));
    return n;
  }
  expect_op("[");
  ExprPtr parts[3];
  bool is_slice = false;
  if (!is_op(":")) parts[0] = parse_expression();
  if (skip_op(":")) {
    is_slice = true;
    if (!is_op("]") && !is_op(":")) parts[1] = parse_expression();
    if (skip_op(":") && !is_op("]")) parts[2] = parse_expression();
  }
  expect_op("]");
  auto n = make(is_slice ? ExprKind::kSlice : ExprKind::kGetItem, at);
  n->children.push_back(std::move(node));
  for (int k = 0; k < (is_slice ? 3 : 1); ++k) n->children.push_back(std::move(parts[k]));
  return n;
}

void Parser::parse_call_args(Expr& node) {
  expect_op("(");
  bool first = true;
  while (!is_op(")")) {
    if (!first) expect_op(",");
    first = false;
    if (is_op(")")) break;
    if (is_op("*") || is_op("**")) error_here("*args / **kwargs calls are not supported");
    if (cur().type == Tok::kName && peek().type == Tok::kOp && peek().text == "=") {
      std::string key = toks_[pos_].text;
      pos_ += 2;
      node.kwargs.emplace_back(std::move(key), parse_expression());
    } else {
      if (!node.kwargs.empty()) error_here("positional argument follows keyword argument");
      node.children.push_back(parse_expression());
    }
  }
  expect_op(")");
}

ExprPtr Parser::parse_test(ExprPtr node) {
  const Token at = cur();
  ++pos_;  // 'is'
  bool negated = skip_name("not");
  auto t = make(ExprKind::kTest, at);
  t->name = expect_name();
  while (skip_op(".")) t->name += "." + expect_name();
  t->children.push_back(std::move(node));
  const Token& c = cur();
  if (is_op("(")) {
    parse_call_args(*t);
  } else if ((c.type == Tok::kName || c.type == Tok::kString || c.type == Tok::kInt ||
              c.type == Tok::kFloat || is_op("[") || is_op("{")) &&
             !is_name("else") && !is_name("or") && !is_name("and")) {
    if (is_name("is")) error_here("cannot chain multiple tests with 'is'");
    t->children.push_back(parse_postfix(parse_primary()));
  }
  if (!negated) return t;
  auto n = make(ExprKind::kNot, at);
  n->children.push_back(std::move(t));
  return n;
}

}  // namespace hinge::jinja
