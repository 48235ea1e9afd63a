#include "server/openai_response.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <utility>

namespace hinge::server {
namespace {

constexpr const char* kObjectChat = "chat.completion";
constexpr const char* kObjectChatChunk = "chat.completion.chunk";
constexpr const char* kObjectText = "text_completion";

OJson head(const ResponseHeader& h, const char* object) {
  OJson j = OJson::object();
  j["id"] = h.id;
  j["object"] = object;
  j["created"] = h.created;
  j["model"] = h.model;
  return j;
}

OJson chat_chunk(const ResponseHeader& h, int32_t index, OJson delta, FinishReason reason,
                 OJson logprobs = nullptr) {
  OJson choice = OJson::object();
  choice["index"] = index;
  choice["delta"] = std::move(delta);
  choice["logprobs"] = std::move(logprobs);
  choice["finish_reason"] = finish_reason_json(reason);
  OJson j = head(h, kObjectChatChunk);
  j["choices"] = OJson::array({std::move(choice)});
  if (h.include_usage) j["usage"] = nullptr;
  return j;
}

}  // namespace

std::vector<size_t> best_of_indices(std::span<const double> cumulative_logprobs, int32_t n) {
  std::vector<size_t> order(cumulative_logprobs.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return cumulative_logprobs[a] > cumulative_logprobs[b];
  });
  order.resize(std::min(order.size(), static_cast<size_t>(std::max(0, n))));
  return order;
}

OJson finish_reason_json(FinishReason reason, bool tool_calls) {
  switch (reason) {
    case FinishReason::kStop:
      return tool_calls ? "tool_calls" : "stop";
    case FinishReason::kLength:
      return "length";
    case FinishReason::kAborted:
      return "abort";
    case FinishReason::kError:  // the server answers an error instead (generation_job.cpp)
      return "error";
    case FinishReason::kNone:
      break;
  }
  return nullptr;
}

namespace {
// The shift context policy's mark on a choice (nothing when it dropped nothing).
void mark_truncated(OJson& choice, int32_t dropped_tokens) {
  if (dropped_tokens <= 0) return;
  choice["truncated"] = true;
  choice["dropped_tokens"] = dropped_tokens;
}
}  // namespace

RequestUsage total_usage(std::span<const RequestUsage> samples) {
  RequestUsage total;
  if (samples.empty()) return total;
  total.prompt_tokens = samples[0].prompt_tokens;
  total.cached_tokens = samples[0].cached_tokens;
  for (const RequestUsage& u : samples) {
    total.completion_tokens += u.completion_tokens;
    total.dropped_tokens += u.dropped_tokens;
  }
  return total;
}

OJson usage_json(const RequestUsage& usage) {
  OJson j = OJson::object();
  j["prompt_tokens"] = usage.prompt_tokens;
  j["completion_tokens"] = usage.completion_tokens;
  j["total_tokens"] = static_cast<int64_t>(usage.prompt_tokens) + usage.completion_tokens;
  j["prompt_tokens_details"] = OJson{{"cached_tokens", usage.cached_tokens}};
  if (usage.dropped_tokens > 0) j["dropped_tokens"] = usage.dropped_tokens;
  return j;
}

OJson chat_completion_response(const ResponseHeader& h, std::span<const ChoiceOutput> choices,
                               const RequestUsage& usage) {
  OJson arr = OJson::array();
  for (size_t i = 0; i < choices.size(); ++i) {
    const ChoiceOutput& o = choices[i];
    OJson message = OJson::object();
    message["role"] = "assistant";
    if (o.text.empty() && !o.tool_calls.empty()) message["content"] = nullptr;
    else message["content"] = o.text;
    message["refusal"] = nullptr;
    if (!o.reasoning.empty()) message["reasoning_content"] = o.reasoning;
    if (!o.tool_calls.empty()) {
      OJson calls = OJson::array();
      for (const ToolCall& t : o.tool_calls)
        calls.push_back(OJson{{"id", t.id},
                              {"type", "function"},
                              {"function", OJson{{"name", t.name}, {"arguments", t.arguments}}}});
      message["tool_calls"] = std::move(calls);
    }
    OJson c = OJson::object();
    c["index"] = i;
    c["message"] = std::move(message);
    c["logprobs"] = o.logprobs;
    c["finish_reason"] = finish_reason_json(o.finish_reason, !o.tool_calls.empty());
    mark_truncated(c, choices[i].dropped_tokens);
    arr.push_back(std::move(c));
  }
  OJson j = head(h, kObjectChat);
  j["choices"] = std::move(arr);
  j["usage"] = usage_json(usage);
  return j;
}

OJson completion_response(const ResponseHeader& h, std::span<const ChoiceOutput> choices,
                          const RequestUsage& usage) {
  OJson arr = OJson::array();
  for (size_t i = 0; i < choices.size(); ++i) {
    OJson c = OJson::object();
    c["text"] = choices[i].text;
    c["index"] = i;
    c["logprobs"] = choices[i].logprobs;
    c["finish_reason"] = finish_reason_json(choices[i].finish_reason);
    mark_truncated(c, choices[i].dropped_tokens);
    arr.push_back(std::move(c));
  }
  OJson j = head(h, kObjectText);
  j["choices"] = std::move(arr);
  j["usage"] = usage_json(usage);
  return j;
}

OJson chat_chunk_role(const ResponseHeader& h, int32_t index) {
  OJson delta = OJson::object();
  delta["role"] = "assistant";
  delta["content"] = "";
  return chat_chunk(h, index, std::move(delta), FinishReason::kNone);
}

OJson chat_chunk_content(const ResponseHeader& h, int32_t index, std::string_view text) {
  OJson delta = OJson::object();
  delta["content"] = std::string(text);
  return chat_chunk(h, index, std::move(delta), FinishReason::kNone);
}

OJson chat_chunk_finish(const ResponseHeader& h, int32_t index, FinishReason reason) {
  return chat_chunk(h, index, OJson::object(), reason);
}

OJson completion_chunk(const ResponseHeader& h, int32_t index, std::string_view text,
                       FinishReason reason) {
  OJson c = OJson::object();
  c["text"] = std::string(text);
  c["index"] = index;
  c["logprobs"] = nullptr;
  c["finish_reason"] = finish_reason_json(reason);
  OJson j = head(h, kObjectText);
  j["choices"] = OJson::array({std::move(c)});
  if (h.include_usage) j["usage"] = nullptr;
  return j;
}

OJson usage_chunk(const ResponseHeader& h, Endpoint endpoint, const RequestUsage& usage) {
  OJson j = head(h, endpoint == Endpoint::kChatCompletions ? kObjectChatChunk : kObjectText);
  j["choices"] = OJson::array();
  j["usage"] = usage_json(usage);
  return j;
}

namespace {
double finite_logprob(float v) { return std::isfinite(v) ? static_cast<double>(v) : -9999.0; }
OJson bytes_json(const std::string& s) {
  OJson a = OJson::array();
  for (unsigned char c : s) a.push_back(static_cast<int>(c));
  return a;
}
}  // namespace

OJson chat_logprobs_json(std::span<const LogprobEntry> entries) {
  OJson content = OJson::array();
  for (const LogprobEntry& e : entries) {
    OJson top = OJson::array();
    for (const auto& [tok, lp] : e.top) {
      OJson t = OJson::object();
      t["token"] = tok;
      t["logprob"] = finite_logprob(lp);
      t["bytes"] = bytes_json(tok);
      top.push_back(std::move(t));
    }
    OJson j = OJson::object();
    j["token"] = e.token;
    j["logprob"] = finite_logprob(e.logprob);
    j["bytes"] = bytes_json(e.token);
    j["top_logprobs"] = std::move(top);
    content.push_back(std::move(j));
  }
  OJson j = OJson::object();
  j["content"] = std::move(content);
  return j;
}

OJson completion_logprobs_json(std::span<const LogprobEntry> entries, int64_t text_offset0) {
  OJson tokens = OJson::array(), lps = OJson::array(), tops = OJson::array(),
        offsets = OJson::array();
  int64_t off = text_offset0;
  for (const LogprobEntry& e : entries) {
    tokens.push_back(e.token);
    offsets.push_back(off);
    off += static_cast<int64_t>(e.token.size());
    if (e.no_logprob) {
      lps.push_back(nullptr);
      tops.push_back(nullptr);
      continue;
    }
    lps.push_back(finite_logprob(e.logprob));
    OJson top = OJson::object();
    for (const auto& [tok, lp] : e.top)
      if (!top.contains(tok)) top[tok] = finite_logprob(lp);
    if (!top.contains(e.token)) top[e.token] = finite_logprob(e.logprob);
    tops.push_back(std::move(top));
  }
  OJson j = OJson::object();
  j["tokens"] = std::move(tokens);
  j["token_logprobs"] = std::move(lps);
  j["top_logprobs"] = std::move(tops);
  j["text_offset"] = std::move(offsets);
  return j;
}

void append_piece_events(const ResponseHeader& h, Endpoint endpoint, const ChoicePiece& p,
                         bool first_for_choice, std::string* out) {
  const bool finished = p.finish_reason != FinishReason::kNone;
  if (endpoint == Endpoint::kCompletions) {
    if (!p.text.empty() || finished || !p.logprobs.is_null()) {
      OJson j = completion_chunk(h, p.index, p.text, p.finish_reason);
      j["choices"][0]["logprobs"] = p.logprobs;
      if (finished) mark_truncated(j["choices"][0], p.dropped_tokens);
      *out += sse_event(j);
    }
    return;
  }
  if (first_for_choice) *out += sse_event(chat_chunk_role(h, p.index));
  if (p.parsed) {
    OJson logprobs = p.logprobs;  // on the first chunk of the piece
    int32_t call = p.calls_before;
    for (const ReplyEvent& e : p.events) {
      OJson delta = OJson::object();
      if (e.kind == ReplyEvent::Kind::kContent) {
        delta["content"] = e.text;
      } else if (e.kind == ReplyEvent::Kind::kReasoning) {
        delta["reasoning_content"] = e.text;
      } else {
        OJson begin = OJson::object();
        begin["index"] = call;
        begin["id"] = e.call.id;
        begin["type"] = "function";
        begin["function"] = OJson{{"name", e.call.name}, {"arguments", ""}};
        delta["tool_calls"] = OJson::array({std::move(begin)});
        *out += sse_event(chat_chunk(h, p.index, std::move(delta), FinishReason::kNone, std::move(logprobs)));
        logprobs = nullptr;
        OJson args = OJson::object();
        args["index"] = call++;
        args["function"] = OJson{{"arguments", e.call.arguments}};
        delta = OJson::object();
        delta["tool_calls"] = OJson::array({std::move(args)});
      }
      *out += sse_event(chat_chunk(h, p.index, std::move(delta), FinishReason::kNone, std::move(logprobs)));
      logprobs = nullptr;
    }
    if (!logprobs.is_null()) {  // tokens that made no event yet (held) still report logprobs
      OJson delta = OJson::object();
      delta["content"] = "";
      *out += sse_event(chat_chunk(h, p.index, std::move(delta), FinishReason::kNone, std::move(logprobs)));
    }
  } else if (!p.text.empty() || !p.logprobs.is_null()) {
    OJson delta = OJson::object();
    delta["content"] = p.text;
    *out += sse_event(chat_chunk(h, p.index, std::move(delta), FinishReason::kNone, p.logprobs));
  }
  if (finished) {
    OJson j = chat_chunk(h, p.index, OJson::object(), FinishReason::kNone);
    j["choices"][0]["finish_reason"] = finish_reason_json(p.finish_reason, p.any_tool_call);
    mark_truncated(j["choices"][0], p.dropped_tokens);
    *out += sse_event(j);
  }
}

void append_delta_events(const ResponseHeader& h, Endpoint endpoint, const RequestDelta& delta,
                         bool first_for_choice, std::string* out) {
  ChoicePiece p;
  p.index = delta.index;
  p.text = delta.text;
  p.finish_reason = delta.finish_reason;
  append_piece_events(h, endpoint, p, first_for_choice, out);
}

OJson tokenize_response(std::span<const int32_t> tokens) {
  OJson arr = OJson::array();
  for (int32_t t : tokens) arr.push_back(t);
  OJson j = OJson::object();
  j["tokens"] = std::move(arr);
  return j;
}

OJson detokenize_response(std::string_view content) {
  OJson j = OJson::object();
  j["content"] = std::string(content);
  return j;
}

std::string to_body(const OJson& j) {
  return j.dump(-1, ' ', false, OJson::error_handler_t::replace);
}

std::string sse_event(const OJson& j) {
  std::string s = "data: ";
  s += to_body(j);
  s += "\n\n";
  return s;
}

std::string sse_done() {
  return "data: [DONE]\n\n";
}

}  // namespace hinge::server
