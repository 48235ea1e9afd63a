// ApiError: an error as the OpenAI-compatible HTTP API reports it, and ApiResult<T>, a value or
// an ApiError (the server's StatusOr, carrying the HTTP status and the offending field).
//
// JSON form (OpenAI's), param and code null when empty:
//   {"error": {"message": "...", "type": "invalid_request_error", "param": "top_p", "code": null}}
//
// Messages may quote request values (numbers, field names) but never prompt or message text.
// Plain values; no shared state (thread-compatible).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <variant>

namespace hinge::server {

struct ApiError {
  int http_status = 400;
  std::string message;
  std::string type = "invalid_request_error";  // "not_found_error", "server_error", ...
  std::string param;                           // the offending field; empty: none
  std::string code;                            // machine-readable code; empty: none

  // 400 invalid_request_error naming `param`.
  static ApiError invalid_request(std::string param, std::string message);
  // 404 not_found_error (unknown model, unknown route).
  static ApiError not_found(std::string message, std::string param = {});
  // 500 server_error.
  static ApiError server_error(std::string message);
  // 503 server_overloaded with a machine-readable code ("overloaded", "shutting_down",
  // "loading"); the caller adds Retry-After.
  static ApiError unavailable(std::string code, std::string message);
};

// {"error": {"message", "type", "param", "code"}}.
nlohmann::ordered_json api_error_json(const ApiError& error);
// The JSON above serialized (invalid UTF-8 in the message is replaced, never throws).
std::string api_error_body(const ApiError& error);

template <typename T>
class [[nodiscard]] ApiResult {
 public:
  ApiResult(T value) : v_(std::move(value)) {}         // NOLINT: implicit by design
  ApiResult(ApiError error) : v_(std::move(error)) {}  // NOLINT: implicit by design

  bool ok() const { return std::holds_alternative<T>(v_); }
  const ApiError& error() const { return std::get<ApiError>(v_); }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  std::variant<T, ApiError> v_;
};

}  // namespace hinge::server
