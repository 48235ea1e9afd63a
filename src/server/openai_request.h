// Parsing and validation of OpenAI-compatible request bodies (pure functions, no I/O):
//   POST /v1/chat/completions  parse_chat_request
//   POST /v1/completions       parse_completion_request
//   POST /tokenize             parse_tokenize_request    {"content"|"prompt": str, "add_special"}
//   POST /detokenize           parse_detokenize_request  {"tokens": [ids]}
//
// Contract:
// - The body must be a JSON object; malformed JSON is a 400 naming the byte offset. Nesting
//   deeper than kMaxJsonDepth or an object with more than kMaxObjectMembers members is a 400
//   before any tree is built (bounds parse time and recursion on hostile bodies).
// - Every error is an ApiError (400, invalid_request_error) whose `param` is the offending
//   field ("messages[1].role", "stop[2]") and whose message states the expected type or range.
// - Unknown fields are ignored, as OpenAI-compatible servers do. `null` means "not given" for
//   every optional field. OpenAI fields hinge does not implement and whose silent ignore would
//   change the result are a 400 naming the field: completions `suffix` (non-empty); chat
//   `functions` / `function_call` (deprecated: the message points to `tools` / `tool_choice`),
//   `modalities` other than ["text"], `audio`, `web_search_options`.
// - Structured outputs (`response_format`, `guided_*`, `grammar`, `json_schema`) compile to a
//   grammar here (server/structured_output.h); a schema or grammar error is a 400 naming it. Harmless ones (`user`, `metadata`, `store`, `service_tier`,
//   `prediction`, ...) are ignored.
// - Tools: `tools` entries, `tool_choice` and `parallel_tool_calls` are checked (a tool_choice
//   without tools, or naming a function not among them, is a 400); assistant history messages'
//   tool_calls need {"function": {"name", "arguments"}} with arguments a JSON object or JSON
//   text of one (OpenAI's shape; ApiServer::chat_prompt hands each template the shape it
//   reads); an empty tool_calls array is dropped.
// - `logit_bias` (both endpoints): {"<token id>": bias} with decimal-id keys (param
//   `logit_bias`), biases in [-100, 100] (param `logit_bias.<id>`), at most kMaxLogitBias
//   entries (OpenAI's limit), distinct ids; into SamplingParams::logit_bias.
// - Completions only: `echo` (bool), `best_of` in [n, kMaxN] (best_of > n with `stream` is a
//   400), `max_tokens` 0 only with `echo` (prompt scoring). Chat has neither (not OpenAI's).
// - Integers: JSON integers, or numbers with an integral value (2.0); anything out of the
//   field's range (1e308 included) is a range error, never a wrap or UB.
// - Strings are checked to be valid UTF-8 (the JSON parser checks too; this is defense in depth).
// - Sampling defaults are OpenAI's, not hinge's CLI defaults: temperature 1, top_p 1, top_k off,
//   min_p off, penalties 0 / repetition 1, penalty window -1 (all tokens, OpenAI's "so far").
//   `seed` absent leaves OpenAiRequest::seed empty: the caller picks a random one and sets
//   sampling.seed. `max_tokens` absent stays empty: the caller applies its default (OpenAI's
//   legacy completions default is 16; chat: up to the context).
// - Not checked here (the caller's job): the model name, token ids (prompt, logit_bias)
//   against the vocabulary, the
//   prompt + max_tokens against the context, whether logprobs / tools are supported.
//
// Thread-safety: pure functions over their arguments.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/sampling_params.h"
#include "sched/request.h"
#include "server/api_error.h"
#include "server/structured_output.h"

namespace hinge::server {

inline constexpr int kMaxJsonDepth = 128;
inline constexpr int kMaxObjectMembers = 4096;
inline constexpr int kMaxStopStrings = 16;
inline constexpr size_t kMaxStopBytes = 1024;
inline constexpr int kMaxN = 16;
inline constexpr int kMaxTopLogprobs = 20;
inline constexpr int kMaxLogitBias = 300;  // OpenAI's limit per request

enum class Endpoint : uint8_t { kChatCompletions, kCompletions };

struct OpenAiRequest {
  Endpoint endpoint = Endpoint::kChatCompletions;
  std::string model;  // empty when absent

  // Chat: the messages for the chat template, key order kept. Text content-part arrays are
  // joined into one string ("\n" between parts, as vLLM does); null content (assistant with
  // tool_calls) stays null; every other key is passed through as given.
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  // Each {"type": "function", "function": {"name" (1-64 of [A-Za-z0-9_-]), "description"?,
  // "parameters"? (an object), "strict"?}}; null when absent, else the array as given.
  nlohmann::ordered_json tools;
  nlohmann::ordered_json tool_choice;  // null when absent, else a string or an object
  // tool_choice: "auto" (the default with tools), "none", "required" or {"type": "function",
  // "function": {"name"}} naming one of the tools (kFunction, tool_choice_function).
  enum class ToolChoice : uint8_t { kAuto, kNone, kRequired, kFunction };
  ToolChoice tool_choice_mode = ToolChoice::kAuto;
  std::string tool_choice_function;
  bool parallel_tool_calls = true;  // false: a reply's first call only

  // Completions: the prompt as text (non-empty) or as token ids (non-empty, each >= 0).
  bool prompt_is_tokens = false;
  std::string prompt_text;
  std::vector<int32_t> prompt_token_ids;

  // max_completion_tokens, else max_tokens; >= 1 (completions: 0 when echo, score only)
  std::optional<int32_t> max_tokens;
  SamplingParams sampling;            // OpenAI defaults (see above); seed: see `seed`
  std::optional<uint64_t> seed;       // absent: random (the caller's choice)
  int32_t n = 1;                      // [1, kMaxN]: choices returned
  int32_t best_of = 1;                // [n, kMaxN]: samples generated (completions; chat: n)
  bool echo = false;                  // completions: the prompt text starts each choice

  // Chat: logprobs (bool) + top_logprobs. Completions: logprobs = k sets logprobs = true and
  // top_logprobs = k.
  bool logprobs = false;
  int32_t top_logprobs = 0;  // [0, kMaxTopLogprobs]

  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage (needs stream)
  std::string user;
  // Narrow the prefix-cache scope inside the caller's tenant (vLLM's cache_salt, OpenAI's
  // prompt_cache_key); never a way into another tenant's entries (server/tenancy.h).
  std::optional<std::string> cache_salt;
  std::optional<std::string> prompt_cache_key;
  sched::Priority priority = sched::Priority::kInteractive;  // "interactive" | "batch"
  // response_format json_object / json_schema, guided_json / guided_choice / guided_grammar,
  // grammar, json_schema (server/structured_output.h): the grammar the output must follow.
  StructuredOutput structured;
};

struct TokenizeRequest {
  std::string text;
  // "add_special" (llama-server) or "add_special_tokens" (vLLM); default: false with
  // "content" (llama-server's default), true with "prompt" (vLLM's default).
  bool add_special = false;
};

struct DetokenizeRequest {
  std::vector<int32_t> tokens;  // may be empty; each >= 0
};

ApiResult<OpenAiRequest> parse_chat_request(std::string_view body);
ApiResult<OpenAiRequest> parse_completion_request(std::string_view body);
ApiResult<TokenizeRequest> parse_tokenize_request(std::string_view body);
ApiResult<DetokenizeRequest> parse_detokenize_request(std::string_view body);

}  // namespace hinge::server
