// A regular expression -> GBNF (grammar/grammar.h), for vLLM's `guided_regex`: the output must
// match the whole expression. The subset: literals, `.` (any character but a newline),
// classes `[a-z]`, `[^...]` with ranges and escapes, `\d \D \w \W \s \S`, escaped
// metacharacters and `\n \t \r \f \v \xHH \uHHHH`, groups `( )` and `(?: )`, `|`, and `* + ?
// {m} {m,} {m,n}` (a lazy `?` after them is the same language). `^` at the start and `$` at the
// end are accepted (the match is whole anyway). Anything else (backreferences, lookaround,
// anchors elsewhere, named groups, flags) is an error naming it and its offset.
//
// Thread-safety: a pure function.
#pragma once

#include <string>
#include <string_view>

#include "common/status.h"

namespace hinge::grammar {

StatusOr<std::string> regex_to_gbnf(std::string_view regex);

}  // namespace hinge::grammar
