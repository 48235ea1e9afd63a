// libFuzzer target: an HTTP request body is hostile input. The whole input is parsed as a chat
// completions body, a completions body, a /tokenize and a /detokenize body; errors must come
// back as ApiError (never a crash, sanitizer report, hang or exception), and both a parsed
// request and an error must serialize. Links hinge_core (src/server/ lives there).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "common/utf8.h"
#include "server/api_error.h"
#include "server/openai_request.h"
#include "server/openai_response.h"

namespace {

template <typename T>
void check_error(const hinge::server::ApiResult<T>& r) {
  if (r.ok()) return;
  const std::string body = hinge::server::api_error_body(r.error());
  if (body.empty() || !hinge::is_valid_utf8(body)) __builtin_trap();
  if (r.error().http_status != 400) __builtin_trap();
}

void use(const hinge::server::OpenAiRequest& r) {
  if (!r.sampling.validate().ok()) __builtin_trap();  // the parser's ranges are stricter
  hinge::server::ResponseHeader h{"chatcmpl-0", 0, r.model, r.include_usage};
  const std::string s = hinge::server::sse_event(hinge::server::chat_chunk_role(h, 0)) +
                        hinge::server::to_body(r.messages) + hinge::server::to_body(r.tools);
  if (s.empty()) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  auto chat = hinge::server::parse_chat_request(body);
  check_error(chat);
  if (chat.ok()) use(*chat);
  auto completion = hinge::server::parse_completion_request(body);
  check_error(completion);
  if (completion.ok()) use(*completion);
  check_error(hinge::server::parse_tokenize_request(body));
  check_error(hinge::server::parse_detokenize_request(body));
  return 0;
}
