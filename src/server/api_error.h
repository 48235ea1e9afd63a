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

#include "common/status.h"

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

// A value or an ApiError (common/status.h's Result, as StatusOr is).
template <typename T>
using ApiResult = Result<T, ApiError>;

}  // namespace hinge::server
