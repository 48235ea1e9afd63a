// Internal: the recursive-descent parser shared by jinja/parser.cpp (statements) and
// jinja/parser_expr.cpp (expressions). Not part of the public API.
#pragma once

#include <initializer_list>
#include <string>
#include <vector>

#include "jinja/ast.h"
#include "jinja/lexer.h"
#include "jinja/parser.h"

namespace hinge::jinja {

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : toks_(std::move(tokens)) {}

  // Statements (jinja/parser.cpp).
  Body parse_body(const std::vector<std::string>& end_tags, std::string* ended_with);

  // Expressions (jinja/parser_expr.cpp).
  ExprPtr parse_expression(bool with_condexpr = true);
  ExprPtr parse_tuple(bool with_condexpr = true, bool explicit_parens = false);
  ExprPtr parse_filter_chain(ExprPtr input);  // after the first '|' (or none in a filter block)

  // Token helpers.
  const Token& cur() const { return toks_[pos_]; }
  const Token& peek(size_t n = 1) const {
    return toks_[std::min(pos_ + n, toks_.size() - 1)];
  }
  bool is_op(const char* op) const { return cur().type == Tok::kOp && cur().text == op; }
  bool is_name(const char* n) const { return cur().type == Tok::kName && cur().text == n; }
  bool skip_op(const char* op) {
    if (!is_op(op)) return false;
    ++pos_;
    return true;
  }
  bool skip_name(const char* n) {
    if (!is_name(n)) return false;
    ++pos_;
    return true;
  }
  void expect_op(const char* op);
  std::string expect_name();
  void expect(Tok type, const char* what);
  [[noreturn]] void error(const std::string& expected) const;
  [[noreturn]] void error_here(const std::string& message) const;

 private:
  std::unique_ptr<Stmt> parse_statement();  // at a '{%' token
  void parse_for(Stmt& s);
  void parse_if(Stmt& s);
  void parse_set(Stmt& s);
  void parse_macro(Stmt& s, bool call_block);
  void parse_params(Stmt& s);

  ExprPtr make(ExprKind kind, const Token& at);
  // A left-associative chain `operand (op operand)*`. kBinary: the operators are operator
  // tokens and name their nodes; kOr / kAnd: they are names.
  template <typename Operand>
  ExprPtr parse_left_assoc(ExprKind kind, std::initializer_list<const char*> ops, Operand operand);
  ExprPtr parse_condexpr();
  ExprPtr parse_or();
  ExprPtr parse_and();
  ExprPtr parse_not();
  ExprPtr parse_compare();
  ExprPtr parse_math1();
  ExprPtr parse_concat();
  ExprPtr parse_math2();
  ExprPtr parse_pow();
  ExprPtr parse_unary(bool with_filter);
  ExprPtr parse_primary();
  ExprPtr parse_postfix(ExprPtr node);
  ExprPtr parse_filter_expr(ExprPtr node);
  ExprPtr parse_subscript(ExprPtr node);
  ExprPtr parse_slice_part();
  ExprPtr parse_call(ExprPtr callee);  // at '(': callee(args)
  void parse_call_args(Expr& node);
  ExprPtr parse_test(ExprPtr node);

  struct DepthGuard {
    explicit DepthGuard(Parser* p) : p_(p) {
      if (++p_->depth_ > kMaxParseDepth) p_->error_here("template nested too deeply");
    }
    ~DepthGuard() { --p_->depth_; }
    Parser* p_;
  };

  std::vector<Token> toks_;
  size_t pos_ = 0;
  int depth_ = 0;
};

}  // namespace hinge::jinja
