// Jinja lexer with the whitespace rules of jinja2 3.1 as Hugging Face configures it
// (trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=False):
//   - "\r\n" and "\r" become "\n"; one trailing newline of the source is dropped;
//   - "{%-", "{{-", "{#-" strip all whitespace before the tag; "-%}", "-}}", "-#}" all after;
//   - lstrip_blocks: a "{%" or "{#" (not "{{") preceded on its line only by spaces/tabs removes
//     them, unless written "{%+";
//   - trim_blocks: the first newline after "%}" or "#}" is removed, unless written "+%}".
// Comments are dropped; {% raw %}...{% endraw %} becomes data. Inside tags the tokens are
// names, strings (Python escapes), ints, floats and operators; "}}" / "%}" close a tag only
// when brackets are balanced, as in jinja2.
// Errors throw jinja::Error with "line L, column C: ...".
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace hinge::jinja {

enum class Tok : uint8_t {
  kData,
  kVarBegin,
  kVarEnd,
  kBlockBegin,
  kBlockEnd,
  kName,
  kString,
  kInt,
  kFloat,
  kOp,
  kEof,
};

struct Token {
  Tok type = Tok::kEof;
  std::string text;  // data, name, operator, unescaped string, number literal
  int line = 1;
  int col = 1;
};

std::vector<Token> lex(std::string_view source);

// Human-readable name of a token for "expected X, got Y" messages.
std::string describe(const Token& t);

}  // namespace hinge::jinja
