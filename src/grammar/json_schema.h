// JSON Schema -> GBNF (grammar/grammar.h): the subset OpenAI's strict structured outputs allow,
// compiled so that every text the grammar admits is one JSON value valid against the schema.
//
// Supported: "type" (string, number, integer, boolean, null, object, array, or an array of
// them), "properties" + "required" (object members in the schema's order: the required ones
// first, then any of the optional ones; no other members, i.e. additionalProperties false),
// "additionalProperties": false, "items", "minItems", "maxItems", "minLength", "maxLength",
// "enum", "const", "anyOf" / "oneOf" (as alternatives), "allOf" of one schema, "$ref" to
// "#/$defs/NAME" or "#/definitions/NAME" (recursion allowed), and annotations that constrain
// nothing ("title", "description", "default", "examples", "$schema", "$id", "strict",
// "$comment"). Anything else ("pattern", "format", "minimum", "additionalProperties" other than
// false, ...) is an error naming the keyword and where it is: a request gets a 400, never a
// grammar that checks less than the schema says.
//
// The JSON is compact: no whitespace but one optional space after ':' and ','.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "common/status.h"

namespace hinge::grammar {

StatusOr<std::string> json_schema_to_gbnf(const nlohmann::ordered_json& schema);
// The schema's rules only, every name starting with `prefix`, its value rule `<prefix>root`; to
// be joined with json_primitives_gbnf() once (several schemas in one grammar: tool calls).
StatusOr<std::string> json_schema_rules(const nlohmann::ordered_json& schema, const std::string& prefix);
// The shared rules: ws, string, integer, number, boolean, null, and any-object / any-value.
std::string json_primitives_gbnf();
// A GBNF string literal of any UTF-8 text.
std::string gbnf_literal(const std::string& text);
// Any JSON object (response_format {"type": "json_object"}).
std::string json_object_gbnf();
// One of the strings, exactly (vLLM's guided_choice).
std::string choice_gbnf(const std::vector<std::string>& choices);

}  // namespace hinge::grammar
