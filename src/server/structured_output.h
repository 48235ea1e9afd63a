// Structured outputs of an OpenAI-compatible request, compiled to a grammar that constrains the
// sampler (grammar/): OpenAI's `response_format` ({"type": "text"}, {"type": "json_object"},
// {"type": "json_schema", "json_schema": {"name", "schema", "strict"}}), vLLM's `guided_json`
// (a schema, or its JSON text), `guided_choice` (strings), `guided_regex` (grammar/regex.h),
// `guided_grammar` (GBNF), and llama-server's `grammar` (GBNF) and `json_schema`. At most one
// of them per request; each error is a 400 naming the field (and for a schema, the keyword and
// where it is).
//
// Thread-safety: pure functions (compiling runs on the request worker).
#pragma once

#include <memory>
#include <string>

#include "grammar/grammar.h"
#include "server/json_field.h"

namespace hinge::server {

struct StructuredOutput {
  std::shared_ptr<const grammar::Grammar> grammar;  // null: unconstrained
  std::string param;                                // the field that asked for it
};

// Reads and compiles the request's structured-output field, if any.
json_field::OptError parse_structured_output(const json_field::Json& body, StructuredOutput* out);

}  // namespace hinge::server
