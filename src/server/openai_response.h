// Builders for OpenAI-compatible response bodies and server-sent-event chunks (pure functions).
//
// Non-streaming:
//   chat:        {"id", "object": "chat.completion", "created", "model",
//                 "choices": [{"index", "message": {"role": "assistant", "content",
//                 "refusal": null[, "reasoning_content"][, "tool_calls": [{"id", "type":
//                 "function", "function": {"name", "arguments"}}]]}, "logprobs": null,
//                 "finish_reason"}], "usage"}
//   completions: {"id", "object": "text_completion", "created", "model",
//                 "choices": [{"text", "index", "logprobs": null, "finish_reason"}], "usage"}
//   usage:       {"prompt_tokens", "completion_tokens", "total_tokens",
//                 "prompt_tokens_details": {"cached_tokens"}}
// Streaming (each chunk framed by sse_event, the stream ended by sse_done):
//   chat: per choice a first chunk with delta {"role": "assistant", "content": ""}, then chunks
//   with delta {"content": "..."} ({"reasoning_content": "..."}, {"tool_calls": [...]} when
//   parsed), then one with an empty delta and the finish_reason;
//   completions: chunks {"text", "index", "logprobs": null, "finish_reason"} (object
//   "text_completion", as OpenAI streams it), the last one carrying the finish_reason.
//   With include_usage every chunk has "usage": null and a last chunk has "choices": [] and the
//   usage; without it no chunk has a "usage" key.
// finish_reason: kStop -> "stop", kLength -> "length", kNone -> null (still streaming),
// kAborted -> "abort" (vLLM's string; OpenAI has none; a client that disconnected never sees it),
// kError -> "error" (never sent: a failed step answers a 500 or a final SSE error event).
// Ids ("chatcmpl-<hex>", "cmpl-<hex>") and `created` (unix seconds) come from the caller.
// Serialization never throws: invalid UTF-8 is replaced by U+FFFD.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "chat/reply_parser.h"
#include "hinge/engine.h"
#include "server/openai_request.h"

namespace hinge::server {

// What every response and chunk of one request shares.
struct ResponseHeader {
  std::string id;       // "chatcmpl-..." / "cmpl-..."
  int64_t created = 0;  // unix seconds
  std::string model;
  bool include_usage = false;  // streaming only: "usage": null on every chunk but the last
};

// One finished choice of a non-streaming response; its index is its position.
struct ChoiceOutput {
  std::string text;
  FinishReason finish_reason = FinishReason::kStop;
  nlohmann::ordered_json logprobs = nullptr;  // chat_logprobs_json / completion_logprobs_json
  // --context-policy shift dropped this many tokens of the choice's sequence: the choice gets
  // "truncated": true and "dropped_tokens" (absent when 0, so OpenAI's shape is unchanged).
  int32_t dropped_tokens = 0;
  // Chat replies parsed for tool calls / reasoning (chat/reply_parser.h): `text` is the content
  // (null in the message when empty and there are calls), "reasoning_content" when non-empty,
  // "tool_calls" when any, and finish_reason "tool_calls" for a reply that stopped after calls.
  std::string reasoning;
  std::vector<ToolCall> tool_calls;
};

// One generated (or echoed prompt) token with its log-probability and the most likely
// alternatives, as text.
struct LogprobEntry {
  std::string token;  // the token's piece (may be part of a UTF-8 character)
  float logprob = 0;
  std::vector<std::pair<std::string, float>> top;
  // The first echoed prompt token: it has no log-probability (completions emit null for its
  // token_logprobs and top_logprobs entries, as OpenAI does).
  bool no_logprob = false;
};

// What a stream sends for one choice at once: new text (and its tokens' logprobs), maybe the end.
struct ChoicePiece {
  int32_t index = 0;
  std::string text;
  nlohmann::ordered_json logprobs = nullptr;
  FinishReason finish_reason = FinishReason::kNone;
  int32_t dropped_tokens = 0;  // with the finish: as ChoiceOutput::dropped_tokens
  // A parsed chat reply (chat/reply_parser.h): the events stand for `text`. A tool call event
  // is sent as OpenAI streams one: a chunk with its index, id, type and name (arguments ""),
  // then one with its arguments. `calls_before`: the choice's calls already sent (their
  // indices); `any_tool_call`: the choice made one (its finish_reason is then "tool_calls").
  bool parsed = false;
  std::vector<ReplyEvent> events;
  int32_t calls_before = 0;
  bool any_tool_call = false;
};

using OJson = nlohmann::ordered_json;  // key order kept, as OpenAI emits it

// best_of: the indices of the n choices to return, highest cumulative logprob first (ties: the
// lower index first), from the cumulative logprob of each of the best_of samples (vLLM v0's
// ranking). n is clamped to [0, size].
std::vector<size_t> best_of_indices(std::span<const double> cumulative_logprobs, int32_t n);

// "stop" / "length" / "abort"; null for kNone. With tool_calls: "tool_calls" instead of "stop".
OJson finish_reason_json(FinishReason reason, bool tool_calls = false);

// Usage of a whole request from its samples' final RequestUsage: prompt and cached tokens once,
// completion tokens summed. Empty span: all zero.
RequestUsage total_usage(std::span<const RequestUsage> samples);
OJson usage_json(const RequestUsage& usage);

OJson chat_completion_response(const ResponseHeader& h, std::span<const ChoiceOutput> choices,
                               const RequestUsage& usage);
OJson completion_response(const ResponseHeader& h, std::span<const ChoiceOutput> choices,
                          const RequestUsage& usage);

// Streaming chat chunks for choice `index`.
OJson chat_chunk_role(const ResponseHeader& h, int32_t index);
OJson chat_chunk_content(const ResponseHeader& h, int32_t index, std::string_view text);
OJson chat_chunk_finish(const ResponseHeader& h, int32_t index, FinishReason reason);
// Streaming completions chunk for choice `index` (finish_reason null while streaming).
OJson completion_chunk(const ResponseHeader& h, int32_t index, std::string_view text,
                       FinishReason reason);
// The last chunk with include_usage: "choices": [] and the usage.
OJson usage_chunk(const ResponseHeader& h, Endpoint endpoint, const RequestUsage& usage);

// Chat: {"content": [{"token", "logprob", "bytes", "top_logprobs": [{"token", "logprob",
// "bytes"}]}]}. Completions (legacy): {"tokens", "token_logprobs", "top_logprobs": [{token:
// logprob}], "text_offset"} with offsets counted from text_offset0 (bytes of text before).
// Non-finite log-probabilities (-inf) become -9999.0, as OpenAI reports them. Entries with
// no_logprob: null in token_logprobs and top_logprobs (completions only; echo's first token).
nlohmann::ordered_json chat_logprobs_json(std::span<const LogprobEntry> entries);
nlohmann::ordered_json completion_logprobs_json(std::span<const LogprobEntry> entries,
                                                int64_t text_offset0);

// Appends the SSE events of one piece: chat -> the role chunk when `first_for_choice`, a
// content chunk when it has text (or logprobs), the finish chunk when it finished;
// completions -> one chunk when it has text or finished.
void append_piece_events(const ResponseHeader& h, Endpoint endpoint, const ChoicePiece& piece,
                         bool first_for_choice, std::string* out);

// Appends the SSE events one engine delta produces: chat -> the role chunk when
// `first_for_choice`, a content chunk when the delta has text, the finish chunk when it
// finished; completions -> one chunk when it has text or finished.
void append_delta_events(const ResponseHeader& h, Endpoint endpoint, const RequestDelta& delta,
                         bool first_for_choice, std::string* out);

// /tokenize and /detokenize responses: {"tokens": [...]}, {"content": "..."}.
OJson tokenize_response(std::span<const int32_t> tokens);
OJson detokenize_response(std::string_view content);

// Compact JSON, never throws (invalid UTF-8 replaced).
std::string to_body(const OJson& j);
// "data: <compact json>\n\n" and "data: [DONE]\n\n".
std::string sse_event(const OJson& j);
std::string sse_done();

}  // namespace hinge::server
