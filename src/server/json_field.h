// Typed reads of the members of a JSON request body, for the OpenAI request parsers
// (openai_request.cpp): each failure is an ApiError (400, invalid_request_error) whose `param`
// names the field and whose message states the expected type or range, never the value of a
// string (client text). `null` or absent means "not given": the output is left as it was.
//
// Thread-safety: pure functions over their arguments.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "server/api_error.h"

namespace hinge::server::json_field {

using Json = nlohmann::ordered_json;
using OptError = std::optional<ApiError>;

#define HINGE_RETURN_IF_API_ERROR(expr)                                      \
  do {                                                                       \
    if (OptError _hinge_api_err = (expr)) return *std::move(_hinge_api_err); \
  } while (0)

inline constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();

// "an integer", "a string", ... for error messages.
const char* type_of(const Json& j);
ApiError type_error(const std::string& param, std::string_view expected, const Json& got);
// `got` must be a number (its dump is then digits, sign, '.', 'e' only).
ApiError range_error(const std::string& param, std::string_view expected, const Json& got);
ApiError value_error(const std::string& param, std::string_view what);
OptError check_utf8(const std::string& param, const std::string& s);

// The member `key` of `obj`, or null when absent or JSON null ("not given").
const Json* field(const Json& obj, const char* key);

// A whole number: a JSON integer or a float with an integral value, within [lo, hi]
// (|lo|, |hi| <= 2^53 so that the double comparisons are exact). range_text replaces the
// default "an integer in [lo, hi]" of the message.
OptError to_int(const Json& v, const std::string& param, int64_t lo, int64_t hi, int64_t* out,
                std::string_view range_text = {});

struct Range {
  double lo, hi;
  bool lo_open, hi_open;
  std::string text() const {
    return fmt::format("a number in {}{}, {}{}", lo_open ? '(' : '[', lo, hi, hi_open ? ')' : ']');
  }
  bool contains(double x) const {
    return (lo_open ? x > lo : x >= lo) && (hi_open ? x < hi : x <= hi);
  }
};

// A number within `range` that stays within it as a float (1e-50 is not in (0, 1]).
OptError get_float(const Json& obj, const char* key, Range range, float* out);
OptError get_bool(const Json& obj, const char* key, bool* out);
// param: the name in errors when it is not `key` ("messages[0].name").
OptError get_string(const Json& obj, const char* key, std::string* out,
                    const std::string& param = {});

}  // namespace hinge::server::json_field
