// Jinja statement parser (see jinja/parser.h).
#include "jinja/parser.h"

#include <algorithm>

#include "jinja/parser_impl.h"

namespace hinge::jinja {

void Parser::error(const std::string& expected) const {
  failf("line {}, column {}: expected {}, got {}", cur().line, cur().col, expected,
        describe(cur()));
}
void Parser::error_here(const std::string& message) const {
  failf("line {}, column {}: {}", cur().line, cur().col, message);
}
void Parser::expect_op(const char* op) {
  if (!skip_op(op)) error(fmt::format("'{}'", op));
}
std::string Parser::expect_name() {
  if (cur().type != Tok::kName) error("a name");
  return toks_[pos_++].text;
}
void Parser::expect(Tok type, const char* what) {
  if (cur().type != type) error(what);
  ++pos_;
}

Body Parser::parse_body(const std::vector<std::string>& end_tags, std::string* ended_with) {
  DepthGuard guard(this);
  Body body;
  while (true) {
    const Token& t = cur();
    if (t.type == Tok::kEof) {
      if (end_tags.empty()) return body;
      std::string tags;
      for (const auto& e : end_tags) tags += (tags.empty() ? "'" : " or '") + e + "'";
      error(fmt::format("{{% {} %}}", tags));
    }
    if (t.type == Tok::kData) {
      auto s = std::make_unique<Stmt>();
      s->kind = StmtKind::kData;
      s->line = t.line;
      s->col = t.col;
      s->text = t.text;
      body.push_back(std::move(s));
      ++pos_;
    } else if (t.type == Tok::kVarBegin) {
      auto s = std::make_unique<Stmt>();
      s->kind = StmtKind::kPrint;
      s->line = t.line;
      s->col = t.col;
      ++pos_;
      s->expr = parse_tuple();
      expect(Tok::kVarEnd, "'}}'");
      body.push_back(std::move(s));
    } else if (t.type == Tok::kBlockBegin) {
      const Token& name = peek();
      if (name.type == Tok::kName &&
          std::find(end_tags.begin(), end_tags.end(), name.text) != end_tags.end()) {
        pos_ += 2;  // '{%' and the end tag; the caller consumes the rest
        *ended_with = name.text;
        return body;
      }
      body.push_back(parse_statement());
    } else {
      error("template data or a tag");
    }
  }
}

std::unique_ptr<Stmt> Parser::parse_statement() {
  DepthGuard guard(this);
  ++pos_;  // '{%'
  auto s = std::make_unique<Stmt>();
  s->line = cur().line;
  s->col = cur().col;
  if (cur().type != Tok::kName) error("a statement name");
  std::string tag = toks_[pos_++].text;
  std::string ended;
  if (tag == "if") {
    parse_if(*s);
  } else if (tag == "for") {
    parse_for(*s);
  } else if (tag == "set") {
    parse_set(*s);
  } else if (tag == "macro") {
    parse_macro(*s, false);
  } else if (tag == "call") {
    parse_macro(*s, true);
  } else if (tag == "filter") {
    s->kind = StmtKind::kFilterBlock;
    s->expr = parse_filter_chain(nullptr);
    expect(Tok::kBlockEnd, "'%}'");
    s->body = parse_body({"endfilter"}, &ended);
    expect(Tok::kBlockEnd, "'%}'");
  } else if (tag == "break" || tag == "continue") {
    s->kind = tag == "break" ? StmtKind::kBreak : StmtKind::kContinue;
    expect(Tok::kBlockEnd, "'%}'");
  } else {
    --pos_;
    error_here(fmt::format("unknown or unsupported tag '{}'", tag));
  }
  return s;
}

void Parser::parse_if(Stmt& s) {
  s.kind = StmtKind::kIf;
  while (true) {
    ExprPtr cond = parse_tuple(false);
    expect(Tok::kBlockEnd, "'%}'");
    std::string ended;
    Body body = parse_body({"elif", "else", "endif"}, &ended);
    s.branches.emplace_back(std::move(cond), std::move(body));
    if (ended == "elif") continue;
    if (ended == "else") {
      expect(Tok::kBlockEnd, "'%}'");
      s.else_body = parse_body({"endif"}, &ended);
    }
    expect(Tok::kBlockEnd, "'%}'");
    return;
  }
}

void Parser::parse_for(Stmt& s) {
  s.kind = StmtKind::kFor;
  bool parens = skip_op("(");
  do {
    s.targets.push_back(expect_name());
  } while (skip_op(",") && cur().type == Tok::kName);
  if (parens) expect_op(")");
  if (!skip_name("in")) error("'in'");
  s.expr = parse_tuple(false);
  if (skip_name("if")) s.cond = parse_expression();
  if (skip_name("recursive")) error_here("recursive loops are not supported");
  expect(Tok::kBlockEnd, "'%}'");
  std::string ended;
  s.body = parse_body({"endfor", "else"}, &ended);
  if (ended == "else") {
    expect(Tok::kBlockEnd, "'%}'");
    s.else_body = parse_body({"endfor"}, &ended);
  }
  expect(Tok::kBlockEnd, "'%}'");
}

void Parser::parse_set(Stmt& s) {
  s.kind = StmtKind::kSet;
  std::string first = expect_name();
  if (skip_op(".")) {
    s.targets.push_back(first);
    s.text = expect_name();
  } else {
    s.targets.push_back(first);
    while (skip_op(",")) s.targets.push_back(expect_name());
  }
  if (skip_op("=")) {
    s.expr = parse_tuple();
    expect(Tok::kBlockEnd, "'%}'");
    return;
  }
  if (s.targets.size() != 1 || !s.text.empty()) error("'='");
  s.kind = StmtKind::kSetBlock;
  if (skip_op("|")) s.expr = parse_filter_chain(nullptr);
  expect(Tok::kBlockEnd, "'%}'");
  std::string ended;
  s.body = parse_body({"endset"}, &ended);
  expect(Tok::kBlockEnd, "'%}'");
}

void Parser::parse_params(Stmt& s) {
  expect_op("(");
  while (!is_op(")")) {
    if (!s.params.empty()) expect_op(",");
    if (is_op(")")) break;
    std::string name = expect_name();
    ExprPtr def;
    if (skip_op("=")) def = parse_expression();
    s.params.emplace_back(std::move(name), std::move(def));
  }
  expect_op(")");
}

void Parser::parse_macro(Stmt& s, bool call_block) {
  std::string ended;
  if (call_block) {
    s.kind = StmtKind::kCallBlock;
    if (is_op("(")) parse_params(s);
    s.expr = parse_expression();
    if (s.expr->kind != ExprKind::kCall) error_here("expected a call in {% call %}");
    expect(Tok::kBlockEnd, "'%}'");
    s.body = parse_body({"endcall"}, &ended);
    expect(Tok::kBlockEnd, "'%}'");
    return;
  }
  s.kind = StmtKind::kMacro;
  s.text = expect_name();
  parse_params(s);
  expect(Tok::kBlockEnd, "'%}'");
  s.body = parse_body({"endmacro"}, &ended);
  if (cur().type == Tok::kName) ++pos_;  // {% endmacro name %}
  expect(Tok::kBlockEnd, "'%}'");
}

TemplateAst parse_template(std::string_view source) {
  Parser p(lex(source));
  TemplateAst ast;
  std::string ended;
  ast.body = p.parse_body({}, &ended);
  return ast;
}

}  // namespace hinge::jinja
