// Helpers for the request-parser tests (tests/server_openai_test.cpp,
// tests/server_openai_fields_test.cpp): valid bodies with extra members, and checks of the
// 400 a bad field must give.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "server/api_error.h"
#include "server/openai_request.h"

namespace hinge::server::request_test {

// A valid chat body plus `extra` members ("\"temperature\": 0.5").
inline std::string chat(const std::string& extra = "") {
  std::string b = R"({"model": "m", "messages": [{"role": "user", "content": "hi"}])";
  if (!extra.empty()) b += ", " + extra;
  return b + "}";
}
inline std::string completion(const std::string& extra = "") {
  std::string b = R"({"model": "m", "prompt": "hi")";
  if (!extra.empty()) b += ", " + extra;
  return b + "}";
}

// `r` is a 400 invalid_request_error naming `param`, whose message mentions `needle`.
template <typename T>
void expect_error(const ApiResult<T>& r, const std::string& param, const std::string& needle,
                  const std::string& what) {
  ASSERT_FALSE(r.ok()) << what;
  EXPECT_EQ(r.error().http_status, 400) << what;
  EXPECT_EQ(r.error().type, "invalid_request_error") << what;
  EXPECT_EQ(r.error().param, param) << what << " -> " << r.error().message;
  EXPECT_NE(r.error().message.find(needle), std::string::npos)
      << what << " -> " << r.error().message << " (expected to mention '" << needle << "')";
}
inline void chat_error(const std::string& extra, const std::string& param,
                       const std::string& needle) {
  expect_error(parse_chat_request(chat(extra)), param, needle, extra);
}
inline void completion_error(const std::string& extra, const std::string& param,
                             const std::string& needle) {
  expect_error(parse_completion_request(completion(extra)), param, needle, extra);
}

}  // namespace hinge::server::request_test
