#include "server/structured_output.h"

#include "grammar/json_schema.h"
#include "grammar/regex.h"

namespace hinge::server {

using json_field::field;
using json_field::Json;
using json_field::OptError;
using json_field::type_error;
using json_field::value_error;

namespace {

OptError compile(const std::string& gbnf, const std::string& param, StructuredOutput* out) {
  auto g = grammar::Grammar::parse(gbnf);
  if (!g.ok()) return value_error(param, g.status().message());
  out->grammar = std::make_shared<const grammar::Grammar>(std::move(g).value());
  out->param = param;
  return std::nullopt;
}

OptError from_schema(const Json& schema, const std::string& param, StructuredOutput* out) {
  if (!schema.is_object()) return type_error(param, "a JSON Schema object", schema);
  auto gbnf = grammar::json_schema_to_gbnf(schema);
  if (!gbnf.ok()) return value_error(param, gbnf.status().message());
  return compile(*gbnf, param, out);
}

}  // namespace

OptError parse_structured_output(const Json& body, StructuredOutput* out) {
  int given = 0;
  for (const char* k : {"guided_json", "guided_choice", "guided_grammar", "guided_regex", "grammar", "json_schema"})
    given += field(body, k) != nullptr;
  const Json* rf = field(body, "response_format");
  bool rf_constrains = false;
  if (rf) {
    if (!rf->is_object()) return type_error("response_format", "an object", *rf);
    const Json* type = field(*rf, "type");
    if (!type || !type->is_string())
      return ApiError::invalid_request("response_format.type",
                                       "'response_format.type' is required: 'text', 'json_object' or 'json_schema'.");
    const std::string& t = type->get_ref<const std::string&>();
    if (t != "text" && t != "json_object" && t != "json_schema")
      return value_error("response_format.type", "expected 'text', 'json_object' or 'json_schema'.");
    rf_constrains = t != "text";
  }
  if (given + (rf_constrains ? 1 : 0) > 1)
    return ApiError::invalid_request(
        "response_format", "give at most one of response_format (json_object / json_schema), "
                           "guided_json, guided_choice, guided_grammar, grammar and json_schema.");
  if (rf_constrains) {
    const std::string& t = (*rf)["type"].get_ref<const std::string&>();
    if (t == "json_object") return compile(grammar::json_object_gbnf(), "response_format", out);
    const Json* js = field(*rf, "json_schema");
    if (!js || !js->is_object())
      return ApiError::invalid_request("response_format.json_schema",
                                       "'response_format.json_schema' is required: {\"name\", \"schema\"}.");
    const Json* name = field(*js, "name");
    if (!name || !name->is_string())
      return ApiError::invalid_request("response_format.json_schema.name", "a name (a string) is required.");
    if (const Json* strict = field(*js, "strict"); strict && !strict->is_boolean())
      return type_error("response_format.json_schema.strict", "a boolean", *strict);
    const Json* schema = field(*js, "schema");
    if (!schema) return ApiError::invalid_request("response_format.json_schema.schema", "a schema is required.");
    return from_schema(*schema, "response_format.json_schema.schema", out);
  }
  if (const Json* v = field(body, "guided_json")) {
    if (v->is_string()) {
      const Json parsed = Json::parse(v->get_ref<const std::string&>(), nullptr, false);
      if (parsed.is_discarded()) return value_error("guided_json", "expected a JSON Schema (an object, or its JSON text).");
      return from_schema(parsed, "guided_json", out);
    }
    return from_schema(*v, "guided_json", out);
  }
  if (const Json* v = field(body, "json_schema")) return from_schema(*v, "json_schema", out);
  if (const Json* v = field(body, "guided_choice")) {
    if (!v->is_array() || v->empty()) return type_error("guided_choice", "a non-empty array of strings", *v);
    std::vector<std::string> choices;
    for (const Json& c : *v) {
      if (!c.is_string() || c.get_ref<const std::string&>().empty())
        return type_error("guided_choice", "a non-empty array of non-empty strings", c);
      choices.push_back(c.get<std::string>());
    }
    return compile(grammar::choice_gbnf(choices), "guided_choice", out);
  }
  for (const char* k : {"guided_grammar", "grammar"})
    if (const Json* v = field(body, k)) {
      if (!v->is_string()) return type_error(k, "a GBNF grammar (a string)", *v);
      return compile(v->get<std::string>(), k, out);
    }
  if (const Json* v = field(body, "guided_regex")) {
    if (!v->is_string()) return type_error("guided_regex", "a regular expression (a string)", *v);
    auto gbnf = grammar::regex_to_gbnf(v->get_ref<const std::string&>());
    if (!gbnf.ok()) return value_error("guided_regex", gbnf.status().message());
    return compile(*gbnf, "guided_regex", out);
  }
  return std::nullopt;
}

}  // namespace hinge::server
