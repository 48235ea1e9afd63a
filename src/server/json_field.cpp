#include "server/json_field.h"

#include <fmt/format.h>

#include <cmath>

#include "common/utf8.h"

namespace hinge::server::json_field {

const char* type_of(const Json& j) {
  switch (j.type()) {
    case Json::value_t::null:
      return "null";
    case Json::value_t::object:
      return "an object";
    case Json::value_t::array:
      return "an array";
    case Json::value_t::string:
      return "a string";
    case Json::value_t::boolean:
      return "a boolean";
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned:
      return "an integer";
    case Json::value_t::number_float:
      return "a number";
    default:
      return "an unsupported value";
  }
}

ApiError type_error(const std::string& param, std::string_view expected, const Json& got) {
  return ApiError::invalid_request(
      param, fmt::format("Invalid type for '{}': expected {}, but got {}.", param, expected,
                         type_of(got)));
}

// `got` is a number here: its dump is digits, sign, '.', 'e' only.
ApiError range_error(const std::string& param, std::string_view expected, const Json& got) {
  return ApiError::invalid_request(
      param,
      fmt::format("Invalid value for '{}': expected {}, but got {}.", param, expected, got.dump()));
}

ApiError value_error(const std::string& param, std::string_view what) {
  return ApiError::invalid_request(param, fmt::format("Invalid value for '{}': {}", param, what));
}

OptError check_utf8(const std::string& param, const std::string& s) {
  if (is_valid_utf8(s)) return std::nullopt;
  return value_error(param, "the string is not valid UTF-8.");
}

// The member `key` of `obj`, or null when absent or JSON null ("not given").
const Json* field(const Json& obj, const char* key) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return nullptr;
  return &*it;
}

// A whole number: a JSON integer or a float with an integral value, within [lo, hi]
// (|lo|, |hi| <= 2^53 so that the double comparisons are exact).
OptError to_int(const Json& v, const std::string& param, int64_t lo, int64_t hi, int64_t* out,
                std::string_view range_text) {
  const std::string range =
      range_text.empty() ? fmt::format("an integer in [{}, {}]", lo, hi) : std::string(range_text);
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    // nlohmann stores every non-negative integer as unsigned: check both bounds.
    if (hi < 0 || u > static_cast<uint64_t>(hi) || (lo > 0 && u < static_cast<uint64_t>(lo)))
      return range_error(param, range, v);
    *out = static_cast<int64_t>(u);
    return std::nullopt;
  }
  if (v.is_number_integer()) {
    const int64_t i = v.get<int64_t>();
    if (i < lo || i > hi) return range_error(param, range, v);
    *out = i;
    return std::nullopt;
  }
  if (v.is_number_float()) {
    const double d = v.get<double>();
    if (!std::isfinite(d) || d != std::floor(d)) return type_error(param, "an integer", v);
    if (d < static_cast<double>(lo) || d > static_cast<double>(hi))
      return range_error(param, range, v);
    *out = static_cast<int64_t>(d);
    return std::nullopt;
  }
  return type_error(param, "an integer", v);
}

OptError get_float(const Json& obj, const char* key, Range range, float* out) {
  const Json* v = field(obj, key);
  if (!v) return std::nullopt;
  if (!v->is_number()) return type_error(key, "a number", *v);
  const double d = v->get<double>();
  if (!std::isfinite(d) || !range.contains(d)) return range_error(key, range.text(), *v);
  const float f = static_cast<float>(d);  // in range: the conversion is defined
  if (!range.contains(f)) return range_error(key, range.text(), *v);  // e.g. 1e-50 -> 0
  *out = f;
  return std::nullopt;
}

OptError get_bool(const Json& obj, const char* key, bool* out) {
  const Json* v = field(obj, key);
  if (!v) return std::nullopt;
  if (!v->is_boolean()) return type_error(key, "a boolean", *v);
  *out = v->get<bool>();
  return std::nullopt;
}

OptError get_string(const Json& obj, const char* key, std::string* out,
                    const std::string& param) {
  const Json* v = field(obj, key);
  if (!v) return std::nullopt;
  const std::string& name = param.empty() ? std::string(key) : param;
  if (!v->is_string()) return type_error(name, "a string", *v);
  HINGE_RETURN_IF_API_ERROR(check_utf8(name, v->get_ref<const std::string&>()));
  *out = v->get<std::string>();
  return std::nullopt;
}

}  // namespace hinge::server::json_field
