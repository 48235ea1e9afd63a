#include "server/api_error.h"

namespace hinge::server {

ApiError ApiError::invalid_request(std::string param, std::string message) {
  return ApiError{400, std::move(message), "invalid_request_error", std::move(param), ""};
}

ApiError ApiError::not_found(std::string message, std::string param) {
  return ApiError{404, std::move(message), "not_found_error", std::move(param), ""};
}

ApiError ApiError::server_error(std::string message) {
  return ApiError{500, std::move(message), "server_error", "", ""};
}

ApiError ApiError::unavailable(std::string code, std::string message) {
  return ApiError{503, std::move(message), "server_overloaded", "", std::move(code)};
}

nlohmann::ordered_json api_error_json(const ApiError& error) {
  auto or_null = [](const std::string& s) {
    return s.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(s);
  };
  nlohmann::ordered_json inner = nlohmann::ordered_json::object();
  inner["message"] = error.message;
  inner["type"] = error.type;
  inner["param"] = or_null(error.param);
  inner["code"] = or_null(error.code);
  nlohmann::ordered_json out = nlohmann::ordered_json::object();
  out["error"] = std::move(inner);
  return out;
}

std::string api_error_body(const ApiError& error) {
  return api_error_json(error).dump(-1, ' ', false,
                                    nlohmann::ordered_json::error_handler_t::replace);
}

}  // namespace hinge::server
