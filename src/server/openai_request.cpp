#include "server/openai_request.h"

#include <algorithm>
#include <cctype>

#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <utility>

#include "server/json_field.h"
#include "server/openai_tools.h"
#include "server/structured_output.h"

namespace hinge::server {
namespace {

using namespace json_field;  // NOLINT: this file is its main user

// Rejects bodies whose tree would be pathological before nlohmann builds it: nesting deeper
// than kMaxJsonDepth (recursive copies and destructors) and objects with more than
// kMaxObjectMembers members (ordered_json inserts in linear time). Syntax is not checked here.
OptError check_structure(std::string_view body) {
  struct Level {
    bool object;
    int commas;
  };
  Level stack[kMaxJsonDepth];
  int depth = 0;
  bool in_string = false, escape = false;
  for (size_t i = 0; i < body.size(); ++i) {
    const char c = body[i];
    if (in_string) {
      if (escape) {
        escape = false;
      } else if (c == '\\') {
        escape = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    switch (c) {
      case '"':
        in_string = true;
        break;
      case '{':
      case '[':
        if (depth == kMaxJsonDepth)
          return ApiError::invalid_request(
              "", fmt::format("Invalid JSON in request body at byte {}: nesting deeper than {}.", i,
                              kMaxJsonDepth));
        stack[depth++] = Level{c == '{', 0};
        break;
      case '}':
      case ']':
        if (depth > 0) --depth;
        break;
      case ',':
        if (depth > 0 && stack[depth - 1].object && ++stack[depth - 1].commas >= kMaxObjectMembers)
          return ApiError::invalid_request(
              "", fmt::format("Invalid JSON in request body at byte {}: an object with more "
                              "than {} members.",
                              i, kMaxObjectMembers));
        break;
      default:
        break;
    }
  }
  return std::nullopt;
}

// nlohmann's message without its "[json.exception...] " prefix and without the "last read"
// excerpt (request text, maybe invalid UTF-8, never echoed back).
std::string parse_error_reason(const char* what) {
  std::string s(what);
  if (auto p = s.find("] "); p != std::string::npos && s.rfind("[json.exception", 0) == 0)
    s.erase(0, p + 2);
  if (s.rfind("parse error at line", 0) == 0)  // "... line L, column C: " (the byte says it)
    if (auto p = s.find(": "); p != std::string::npos) s.erase(0, p + 2);
  if (auto p = s.find("; last read"); p != std::string::npos) s.erase(p);
  return s;
}

ApiResult<Json> parse_body(std::string_view body) {
  HINGE_RETURN_IF_API_ERROR(check_structure(body));
  Json j;
  try {
    j = Json::parse(body.begin(), body.end());
  } catch (const Json::parse_error& e) {
    return ApiError::invalid_request(
        "", fmt::format("Invalid JSON in request body at byte {}: {}",
                        e.byte > 0 ? e.byte - 1 : 0,  // nlohmann counts from 1
                        parse_error_reason(e.what())));
  } catch (const Json::exception&) {  // out_of_range.406: a number beyond double's range
    return ApiError::invalid_request("", "Invalid JSON in request body: a number is out of range.");
  }
  if (!j.is_object())
    return ApiError::invalid_request(
        "", fmt::format("The request body must be a JSON object, but got {}.", type_of(j)));
  return j;
}

SamplingParams openai_default_sampling() {
  SamplingParams p;
  p.temperature = 1.0f;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 0.0f;
  p.repetition_penalty = 1.0f;
  p.presence_penalty = 0.0f;
  p.frequency_penalty = 0.0f;
  p.penalty_last_n = -1;
  return p;
}

OptError parse_stop(const Json& body, std::vector<std::string>* out) {
  const Json* v = field(body, "stop");
  if (!v) return std::nullopt;
  auto one = [&](const Json& s, const std::string& param) -> OptError {
    if (!s.is_string()) return type_error(param, "a string", s);
    const auto& str = s.get_ref<const std::string&>();
    if (str.empty()) return value_error(param, "stop strings must not be empty.");
    if (str.size() > kMaxStopBytes)
      return value_error(param,
                         fmt::format("stop strings must be at most {} bytes.", kMaxStopBytes));
    HINGE_RETURN_IF_API_ERROR(check_utf8(param, str));
    out->push_back(str);
    return std::nullopt;
  };
  if (v->is_string()) return one(*v, "stop");
  if (!v->is_array()) return type_error("stop", "a string or an array of strings", *v);
  if (v->size() > static_cast<size_t>(kMaxStopStrings))
    return value_error("stop", fmt::format("expected at most {} stop strings, but got {}.",
                                           kMaxStopStrings, v->size()));
  for (size_t i = 0; i < v->size(); ++i)
    HINGE_RETURN_IF_API_ERROR(one((*v)[i], fmt::format("stop[{}]", i)));
  return std::nullopt;
}

OptError parse_seed(const Json& body, std::optional<uint64_t>* out) {
  const Json* v = field(body, "seed");
  if (!v) return std::nullopt;
  constexpr std::string_view kRange = "an integer in [-9223372036854775808, 18446744073709551615]";
  if (v->is_number_unsigned()) {
    *out = v->get<uint64_t>();
  } else if (v->is_number_integer()) {
    *out = static_cast<uint64_t>(v->get<int64_t>());
  } else if (v->is_number_float()) {
    const double d = v->get<double>();
    if (!std::isfinite(d) || d != std::floor(d)) return type_error("seed", "an integer", *v);
    if (d < -0x1p63 || d >= 0x1p64) return range_error("seed", kRange, *v);
    *out = d < 0 ? static_cast<uint64_t>(static_cast<int64_t>(d)) : static_cast<uint64_t>(d);
  } else {
    return type_error("seed", "an integer", *v);
  }
  return std::nullopt;
}

OptError parse_token_ids(const Json& arr, const std::string& param, std::vector<int32_t>* out) {
  out->clear();
  out->reserve(arr.size());
  for (size_t i = 0; i < arr.size(); ++i) {
    int64_t id = 0;
    HINGE_RETURN_IF_API_ERROR(to_int(arr[i], fmt::format("{}[{}]", param, i), 0, kInt32Max, &id,
                                     "a token id (an integer >= 0)"));
    out->push_back(static_cast<int32_t>(id));
  }
  return std::nullopt;
}

OptError parse_prompt(const Json& body, OpenAiRequest* r) {
  constexpr std::string_view kExpected =
      "a string, an array of token ids, or an array with exactly one string";
  const Json* v = field(body, "prompt");
  if (!v) return ApiError::invalid_request("prompt", "'prompt' is required.");
  const Json* text = nullptr;
  if (v->is_string()) {
    text = v;
  } else if (v->is_array()) {
    if (v->empty()) return value_error("prompt", "the prompt must not be empty.");
    const Json& first = (*v)[0];
    if (first.is_string() || first.is_array()) {
      if (v->size() != 1)
        return value_error(
            "prompt", fmt::format("batched prompts are not supported; expected {}.", kExpected));
      if (first.is_string()) {
        text = &first;
      } else {  // [[ids...]]: one token-id prompt
        if (first.empty()) return value_error("prompt[0]", "the prompt must not be empty.");
        r->prompt_is_tokens = true;
        return parse_token_ids(first, "prompt[0]", &r->prompt_token_ids);
      }
    } else {
      r->prompt_is_tokens = true;
      return parse_token_ids(*v, "prompt", &r->prompt_token_ids);
    }
  } else {
    return type_error("prompt", kExpected, *v);
  }
  const auto& s = text->get_ref<const std::string&>();
  if (s.empty()) return value_error("prompt", "the prompt must not be empty.");
  HINGE_RETURN_IF_API_ERROR(check_utf8("prompt", s));
  r->prompt_text = s;
  return std::nullopt;
}

bool valid_role(const std::string& role) {
  return role == "system" || role == "user" || role == "assistant" || role == "tool" ||
         role == "developer";
}

// Validates one message in place and joins text content parts into one string.
OptError normalize_message(Json& m, size_t index) {
  const std::string p = fmt::format("messages[{}]", index);
  if (!m.is_object()) return type_error(p, "a message object", m);
  const Json* role_v = field(m, "role");
  if (!role_v)
    return ApiError::invalid_request(p + ".role", fmt::format("'{}.role' is required.", p));
  if (!role_v->is_string()) return type_error(p + ".role", "a string", *role_v);
  const std::string role = role_v->get<std::string>();
  if (!valid_role(role))
    return value_error(p + ".role",
                       "expected one of 'system', 'user', 'assistant', 'tool', 'developer'.");
  std::string name;
  HINGE_RETURN_IF_API_ERROR(get_string(m, "name", &name, p + ".name"));
  if (const Json* id = field(m, "tool_call_id")) {
    if (!id->is_string()) return type_error(p + ".tool_call_id", "a string", *id);
  }
  bool has_tool_calls = false;
  if (auto cit = m.find("tool_calls"); cit != m.end() && !cit->is_null()) {
    if (!cit->is_array()) return type_error(p + ".tool_calls", "an array", *cit);
    if (role != "assistant")
      return value_error(p + ".tool_calls", "only assistant messages may have tool_calls.");
    HINGE_RETURN_IF_API_ERROR(check_history_tool_calls(*cit, p + ".tool_calls"));
    has_tool_calls = !cit->empty();
    if (cit->empty()) m.erase(cit);  // templates test `tool_calls is defined`
  }
  const std::string cp = p + ".content";
  auto it = m.find("content");
  if (it == m.end() || it->is_null()) {
    if (role == "assistant" && has_tool_calls) {
      m["content"] = nullptr;
      return std::nullopt;
    }
    return ApiError::invalid_request(
        cp, fmt::format("'{}' is required: a string or an array of text parts (null only for "
                        "an assistant message with tool_calls).",
                        cp));
  }
  Json& content = *it;
  if (content.is_string()) return check_utf8(cp, content.get_ref<const std::string&>());
  if (!content.is_array()) return type_error(cp, "a string or an array of text parts", content);
  if (content.empty()) return value_error(cp, "the array of content parts must not be empty.");
  std::string joined;
  for (size_t i = 0; i < content.size(); ++i) {
    const Json& part = content[i];
    const std::string pp = fmt::format("{}[{}]", cp, i);
    if (!part.is_object()) return type_error(pp, "a content part object", part);
    const Json* type = field(part, "type");
    if (!type || !type->is_string() || type->get_ref<const std::string&>() != "text")
      return value_error(pp + ".type", "only content parts of type 'text' are supported.");
    const Json* text = field(part, "text");
    if (!text)
      return ApiError::invalid_request(pp + ".text", fmt::format("'{}.text' is required.", pp));
    if (!text->is_string()) return type_error(pp + ".text", "a string", *text);
    HINGE_RETURN_IF_API_ERROR(check_utf8(pp + ".text", text->get_ref<const std::string&>()));
    if (i > 0) joined += '\n';
    joined += text->get_ref<const std::string&>();
  }
  content = std::move(joined);
  return std::nullopt;
}

OptError parse_messages(Json& body, OpenAiRequest* r) {
  auto it = body.find("messages");
  if (it == body.end() || it->is_null())
    return ApiError::invalid_request("messages", "'messages' is required.");
  if (!it->is_array()) return type_error("messages", "an array of message objects", *it);
  if (it->empty()) return value_error("messages", "expected a non-empty array of messages.");
  for (size_t i = 0; i < it->size(); ++i) HINGE_RETURN_IF_API_ERROR(normalize_message((*it)[i], i));
  r->messages = std::move(*it);
  return std::nullopt;
}

OptError parse_max_tokens(const Json& body, OpenAiRequest* r) {
  // Completions allow 0 (with echo: scoring a prompt; checked in parse_echo_best_of).
  const int64_t lo = r->endpoint == Endpoint::kCompletions ? 0 : 1;
  for (const char* key : {"max_tokens", "max_completion_tokens"}) {  // the latter wins
    if (const Json* v = field(body, key)) {
      int64_t n = 0;
      HINGE_RETURN_IF_API_ERROR(to_int(*v, key, lo, kInt32Max, &n));
      r->max_tokens = static_cast<int32_t>(n);
    }
  }
  return std::nullopt;
}

OptError parse_logprobs(const Json& body, OpenAiRequest* r) {
  if (r->endpoint == Endpoint::kCompletions) {
    if (const Json* v = field(body, "logprobs")) {
      int64_t k = 0;
      HINGE_RETURN_IF_API_ERROR(to_int(*v, "logprobs", 0, kMaxTopLogprobs, &k));
      r->logprobs = true;
      r->top_logprobs = static_cast<int32_t>(k);
    }
    return std::nullopt;
  }
  HINGE_RETURN_IF_API_ERROR(get_bool(body, "logprobs", &r->logprobs));
  if (const Json* v = field(body, "top_logprobs")) {
    int64_t k = 0;
    HINGE_RETURN_IF_API_ERROR(to_int(*v, "top_logprobs", 0, kMaxTopLogprobs, &k));
    if (k > 0 && !r->logprobs)
      return value_error("top_logprobs", "'logprobs' must be true when 'top_logprobs' is used.");
    r->top_logprobs = static_cast<int32_t>(k);
  }
  return std::nullopt;
}

OptError parse_sampling(const Json& body, OpenAiRequest* r) {
  SamplingParams& s = r->sampling;
  HINGE_RETURN_IF_API_ERROR(get_float(body, "temperature", {0, 2, false, false}, &s.temperature));
  HINGE_RETURN_IF_API_ERROR(get_float(body, "top_p", {0, 1, true, false}, &s.top_p));
  HINGE_RETURN_IF_API_ERROR(get_float(body, "min_p", {0, 1, false, false}, &s.min_p));
  HINGE_RETURN_IF_API_ERROR(
      get_float(body, "presence_penalty", {-2, 2, false, false}, &s.presence_penalty));
  HINGE_RETURN_IF_API_ERROR(
      get_float(body, "frequency_penalty", {-2, 2, false, false}, &s.frequency_penalty));
  HINGE_RETURN_IF_API_ERROR(
      get_float(body, "repetition_penalty", {0, 10, true, false}, &s.repetition_penalty));
  if (const Json* v = field(body, "top_k")) {
    int64_t k = 0;
    HINGE_RETURN_IF_API_ERROR(
        to_int(*v, "top_k", -1, kInt32Max, &k, "an integer >= -1 (-1 or 0: disabled)"));
    s.top_k = k <= 0 ? 0 : static_cast<int32_t>(k);
  }
  HINGE_RETURN_IF_API_ERROR(parse_stop(body, &s.stop));
  HINGE_RETURN_IF_API_ERROR(get_bool(body, "ignore_eos", &s.ignore_eos));
  HINGE_RETURN_IF_API_ERROR(parse_seed(body, &r->seed));
  return std::nullopt;
}

// {"<token id>": bias, ...}: keys decimal digits (a token id <= INT32_MAX; the vocabulary is the
// caller's check), values numbers in [-100, 100], at most kMaxLogitBias entries, ids distinct
// ("7" and "007" are one id). Keys that are not ids are never quoted back (client text).
OptError parse_logit_bias(const Json& body, OpenAiRequest* r) {
  const Json* v = field(body, "logit_bias");
  if (!v) return std::nullopt;
  if (!v->is_object())
    return type_error("logit_bias", "an object mapping token ids to biases", *v);
  if (v->size() > static_cast<size_t>(kMaxLogitBias))
    return value_error("logit_bias", fmt::format("expected at most {} entries, but got {}.",
                                                 kMaxLogitBias, v->size()));
  std::vector<LogitBias>& out = r->sampling.logit_bias;
  out.reserve(v->size());
  for (const auto& [key, bias] : v->items()) {
    int64_t id = 0;
    bool digits = !key.empty() && key.size() <= 10;
    for (char c : key) digits = digits && c >= '0' && c <= '9';
    if (digits) id = std::stoll(key);
    if (!digits || id > kInt32Max)
      return value_error("logit_bias",
                         "keys must be token ids: decimal integers in [0, 2147483647].");
    const std::string param = fmt::format("logit_bias.{}", key);
    if (!bias.is_number()) return type_error(param, "a number", bias);
    const double d = bias.get<double>();
    if (!std::isfinite(d) || d < -100.0 || d > 100.0)
      return range_error(param, "a number in [-100, 100]", bias);
    const auto tok = static_cast<int32_t>(id);
    for (const LogitBias& b : out)
      if (b.token == tok)
        return value_error(param, fmt::format("token id {} appears more than once.", tok));
    out.push_back({tok, static_cast<float>(d)});
  }
  return std::nullopt;
}

// Completions: echo, best_of, and what they allow (max_tokens 0 needs echo; best_of >= n, and
// best_of > n is not streamable).
OptError parse_echo_best_of(const Json& body, OpenAiRequest* r) {
  HINGE_RETURN_IF_API_ERROR(get_bool(body, "echo", &r->echo));
  if (r->max_tokens && *r->max_tokens == 0 && !r->echo)
    return value_error("max_tokens",
                       "expected an integer >= 1; 0 is only allowed with 'echo': true (scoring "
                       "the prompt).");
  r->best_of = r->n;
  if (const Json* v = field(body, "best_of")) {
    int64_t b = 0;
    HINGE_RETURN_IF_API_ERROR(to_int(*v, "best_of", 1, kMaxN, &b));
    if (b < r->n)
      return value_error("best_of", fmt::format("best_of ({}) must be >= n ({}).", b, r->n));
    r->best_of = static_cast<int32_t>(b);
  }
  if (r->stream && r->best_of > r->n)
    return value_error("best_of",
                       "best_of > n cannot be used with 'stream' (the best choices are known "
                       "only at the end).");
  return std::nullopt;
}

// OpenAI fields hinge does not implement whose silent ignore would give a wrong result: each a
// 400 naming the field. Harmless ones (user, metadata, store, service_tier,
// parallel_tool_calls, prediction, reasoning_effort, ...) stay ignored.
OptError reject_unsupported(const Json& body, Endpoint endpoint) {
  auto unsupported = [](const char* key, std::string_view why) {
    return ApiError::invalid_request(key, fmt::format("'{}' is not supported: {}", key, why));
  };
  if (endpoint == Endpoint::kCompletions) {
    if (const Json* v = field(body, "suffix"); v && !(v->is_string() && v->get_ref<const std::string&>().empty()))
      return unsupported("suffix", "hinge does not do fill-in-the-middle insertion.");
    return std::nullopt;
  }
  if (field(body, "functions"))
    return unsupported("functions", "it is deprecated; use 'tools'.");
  if (field(body, "function_call"))
    return unsupported("function_call", "it is deprecated; use 'tool_choice'.");
  if (const Json* v = field(body, "modalities")) {
    if (!v->is_array()) return type_error("modalities", "an array of strings", *v);
    for (const Json& m : *v)
      if (!m.is_string() || m.get_ref<const std::string&>() != "text")
        return unsupported("modalities", "only [\"text\"] (text output) is available.");
  }
  if (field(body, "audio")) return unsupported("audio", "this server produces text only.");
  if (field(body, "web_search_options"))
    return unsupported("web_search_options", "this server has no web search.");
  return std::nullopt;
}

OptError parse_stream(const Json& body, OpenAiRequest* r) {
  HINGE_RETURN_IF_API_ERROR(get_bool(body, "stream", &r->stream));
  if (const Json* opts = field(body, "stream_options")) {
    if (!opts->is_object()) return type_error("stream_options", "an object", *opts);
    if (!r->stream)
      return value_error("stream_options",
                         "'stream_options' is only allowed when 'stream' is true.");
    if (const Json* inc = field(*opts, "include_usage")) {
      if (!inc->is_boolean()) return type_error("stream_options.include_usage", "a boolean", *inc);
      r->include_usage = inc->get<bool>();
    }
  }
  return std::nullopt;
}

OptError parse_priority(const Json& body, OpenAiRequest* r) {
  const Json* v = field(body, "priority");
  if (!v) return std::nullopt;
  if (!v->is_string()) return type_error("priority", "a string ('interactive' or 'batch')", *v);
  const auto& s = v->get_ref<const std::string&>();
  if (s == "interactive") {
    r->priority = sched::Priority::kInteractive;
  } else if (s == "batch") {
    r->priority = sched::Priority::kBatch;
  } else {
    return value_error("priority", "expected 'interactive' or 'batch'.");
  }
  return std::nullopt;
}

ApiResult<OpenAiRequest> parse_generate(std::string_view text, Endpoint endpoint) {
  ApiResult<Json> parsed = parse_body(text);
  if (!parsed.ok()) return parsed.error();
  Json& body = *parsed;
  OpenAiRequest r;
  r.endpoint = endpoint;
  r.sampling = openai_default_sampling();
  HINGE_RETURN_IF_API_ERROR(reject_unsupported(body, endpoint));
  HINGE_RETURN_IF_API_ERROR(get_string(body, "model", &r.model));
  if (endpoint == Endpoint::kChatCompletions) {
    HINGE_RETURN_IF_API_ERROR(parse_messages(body, &r));
    HINGE_RETURN_IF_API_ERROR(parse_tools(body, &r));
  } else {
    HINGE_RETURN_IF_API_ERROR(parse_prompt(body, &r));
  }
  HINGE_RETURN_IF_API_ERROR(parse_max_tokens(body, &r));
  HINGE_RETURN_IF_API_ERROR(parse_sampling(body, &r));
  if (const Json* v = field(body, "n")) {
    int64_t n = 0;
    HINGE_RETURN_IF_API_ERROR(to_int(*v, "n", 1, kMaxN, &n));
    r.n = static_cast<int32_t>(n);
  }
  HINGE_RETURN_IF_API_ERROR(parse_logprobs(body, &r));
  HINGE_RETURN_IF_API_ERROR(parse_logit_bias(body, &r));
  HINGE_RETURN_IF_API_ERROR(parse_structured_output(body, &r.structured));
  HINGE_RETURN_IF_API_ERROR(parse_stream(body, &r));
  if (endpoint == Endpoint::kCompletions) {
    HINGE_RETURN_IF_API_ERROR(parse_echo_best_of(body, &r));
  } else {
    r.best_of = r.n;
  }
  HINGE_RETURN_IF_API_ERROR(get_string(body, "user", &r.user));
  for (auto [name, out] : {std::pair{"cache_salt", &r.cache_salt},
                           std::pair{"prompt_cache_key", &r.prompt_cache_key}}) {
    std::string v;
    if (field(body, name) == nullptr) continue;
    HINGE_RETURN_IF_API_ERROR(get_string(body, name, &v));
    if (v.size() > 1024)
      return ApiError::invalid_request(name, fmt::format("{} must be at most 1024 bytes", name));
    *out = std::move(v);
  }
  HINGE_RETURN_IF_API_ERROR(parse_priority(body, &r));
  // The checks above are stricter than SamplingParams', so this only catches a mapping bug.
  if (Status st = r.sampling.validate(); !st.ok())
    return ApiError::invalid_request("", st.message());
  return r;
}

}  // namespace

ApiResult<OpenAiRequest> parse_chat_request(std::string_view body) {
  return parse_generate(body, Endpoint::kChatCompletions);
}

ApiResult<OpenAiRequest> parse_completion_request(std::string_view body) {
  return parse_generate(body, Endpoint::kCompletions);
}

ApiResult<TokenizeRequest> parse_tokenize_request(std::string_view text) {
  ApiResult<Json> parsed = parse_body(text);
  if (!parsed.ok()) return parsed.error();
  const Json& body = *parsed;
  TokenizeRequest r;
  const char* key = field(body, "content") ? "content" : "prompt";
  const Json* v = field(body, key);
  if (!v) return ApiError::invalid_request("content", "'content' (or 'prompt') is required.");
  if (!v->is_string()) return type_error(key, "a string", *v);
  HINGE_RETURN_IF_API_ERROR(check_utf8(key, v->get_ref<const std::string&>()));
  r.text = v->get<std::string>();
  r.add_special = std::string_view(key) == "prompt";  // vLLM's default; llama-server's: false
  HINGE_RETURN_IF_API_ERROR(get_bool(body, "add_special_tokens", &r.add_special));
  HINGE_RETURN_IF_API_ERROR(get_bool(body, "add_special", &r.add_special));
  return r;
}

ApiResult<DetokenizeRequest> parse_detokenize_request(std::string_view text) {
  ApiResult<Json> parsed = parse_body(text);
  if (!parsed.ok()) return parsed.error();
  const Json& body = *parsed;
  const Json* v = field(body, "tokens");
  if (!v) return ApiError::invalid_request("tokens", "'tokens' is required.");
  if (!v->is_array()) return type_error("tokens", "an array of token ids", *v);
  DetokenizeRequest r;
  HINGE_RETURN_IF_API_ERROR(parse_token_ids(*v, "tokens", &r.tokens));
  return r;
}

}  // namespace hinge::server
