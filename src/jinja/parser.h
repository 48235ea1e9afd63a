// Jinja parser: tokens (jinja/lexer.h) -> TemplateAst (jinja/ast.h), with jinja2's grammar and
// operator precedence (or < and < not < comparisons/in < + - < ~ < * / // % < ** < unary - <
// postfix . [] () < filters | and tests `is`). Statements: if/elif/else, for (tuple targets,
// `if` filter, else), set (name, tuple, ns.attr, block set), macro, call, filter, break,
// continue. Nesting depth is bounded (hostile input must not overflow the stack).
// Errors throw jinja::Error: "line L, column C: expected X, got Y".
#pragma once

#include <string_view>

#include "jinja/ast.h"

namespace hinge::jinja {

inline constexpr int kMaxParseDepth = 200;

TemplateAst parse_template(std::string_view source);

}  // namespace hinge::jinja
