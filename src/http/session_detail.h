// Constants and helpers shared by the reading and writing halves of http::Session
// (session.cpp, session_write.cpp). Internal to http/.
#pragma once

#include <boost/beast/http.hpp>

#include <chrono>
#include <cstddef>
#include <string>

#include <nlohmann/json.hpp>

namespace hinge::http::detail {

namespace bhttp = boost::beast::http;
using Clock = std::chrono::steady_clock;

inline constexpr size_t kTrailerSlack = 16u << 10;     // minimum read-buffer room while reading a body
inline constexpr size_t kSlowCutMinBytes = 64u << 10;  // the global output cap cuts only backlogs above
inline constexpr auto kPeerCheckInterval = std::chrono::milliseconds(200);
inline constexpr auto kLingerQuiet = std::chrono::seconds(2);
inline constexpr double kOverflowHeaderTimeout = 1.0;

inline Clock::duration seconds(double s) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
}

inline std::string reason_phrase(int status) {
  const auto r = bhttp::obsolete_reason(bhttp::int_to_status(static_cast<unsigned>(status)));
  return r.empty() ? std::string("Unknown") : std::string(r);
}

// OpenAI's error shape, for the answers the transport gives itself.
inline std::string error_body(int status, const std::string& message) {
  nlohmann::ordered_json inner = nlohmann::ordered_json::object();
  inner["message"] = message;
  inner["type"] = status == 503 ? "server_overloaded"
                  : status >= 500 ? "server_error"
                                  : "invalid_request_error";
  inner["param"] = nullptr;
  inner["code"] = nullptr;
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  j["error"] = std::move(inner);
  return j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

inline bool header_is_safe(const std::string& k, const std::string& v) {
  return k.find_first_of("\r\n:") == std::string::npos && v.find_first_of("\r\n") == std::string::npos;
}

}  // namespace hinge::http::detail
