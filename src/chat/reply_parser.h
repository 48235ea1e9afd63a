// Turning a model's reply text back into an assistant message: content, reasoning_content and
// tool_calls, in the syntax of its family (chat/tool_format.h). One parser serves both modes:
// a stream feeds text as it is detokenized and gets events as soon as they are certain, and a
// whole reply is the same feed and finish, so both give the same message.
//
// - Text that may still become a marker (a suffix of the reply that is a prefix of "<tool_call>",
//   "</think>", ...) is held until the next text decides it. Content before the first call
//   streams as it comes.
// - Calls are all or nothing: from the first call on, the reply is held until it ends; then
//   either every call parsed (each sent as one event with its name and its arguments, compact
//   JSON, and the text between them as content), or one did not (bad JSON, no name, a missing
//   end marker) and the whole text from the first call on is content, as written. Never a
//   half-written call as content, never a call that later turns out malformed; nothing fails.
// - Leading and trailing whitespace of the content and of the reasoning is dropped (the space
//   around markers), the rest is sent as written.
// - With tools off (tool_choice "none", or no tools), calls are not parsed, only reasoning.
//
// Thread-safety: one parser per reply, used by one thread at a time.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "chat/tool_call_syntax.h"
#include "chat/tool_format.h"

namespace hinge {

struct ToolCall {
  std::string id;         // "call_" + 24 alphanumerics (Mistral: 9, as its template demands)
  std::string name;
  std::string arguments;  // a JSON object, compact
};

struct ReplyEvent {
  enum class Kind : uint8_t { kContent, kReasoning, kToolCall };
  Kind kind = Kind::kContent;
  std::string text;  // content / reasoning
  ToolCall call;     // kToolCall; its index is the count of calls before it
};

struct ParsedReply {
  std::string content;
  std::string reasoning_content;
  std::vector<ToolCall> tool_calls;
};

struct ReplyParserOptions {
  ToolFormat format = ToolFormat::kNone;
  bool parse_tools = true;      // false: tool syntax stays text (tool_choice "none")
  bool reasoning_open = false;  // the prompt ended inside a reasoning block ("<think>\n")
  uint64_t id_seed = 0;         // tool call ids
};

class ReplyParser {
 public:
  explicit ReplyParser(const ReplyParserOptions& options);

  // More reply text; appends the events it makes certain.
  void feed(std::string_view text, std::vector<ReplyEvent>* out);
  // The reply ended: everything held is decided.
  void finish(std::vector<ReplyEvent>* out);

  int32_t num_tool_calls() const { return num_calls_; }

 private:
  void advance(bool final, std::vector<ReplyEvent>* out);
  void emit_text(ReplyEvent::Kind kind, std::string_view text, bool final, std::vector<ReplyEvent>* out);
  void add_calls(size_t region_start, const std::vector<tool_syntax::RawCall>& calls,
                 std::vector<ReplyEvent>* out);
  std::vector<ReplyEvent>* sink(std::vector<ReplyEvent>* out) { return calls_open_ ? &held_ : out; }
  std::string next_id();

  ReplyParserOptions opt_;
  std::string buf_;
  size_t pos_ = 0;             // buf_[0, pos_) is decided
  bool in_reasoning_ = false;
  bool any_content_ = false;   // content sent (leading whitespace is dropped before it)
  bool any_reasoning_ = false;
  bool any_output_ = false;    // anything decided but whitespace (formats whose calls open a reply)
  std::string pending_ws_;     // whitespace held until text follows it
  ReplyEvent::Kind pending_kind_ = ReplyEvent::Kind::kContent;
  int32_t num_calls_ = 0;
  // From the first call on: what is held until the reply ends, where it started, the space
  // before it, and whether a later call failed (then all of it is content).
  bool calls_open_ = false;
  bool degrade_ = false;
  size_t calls_from_ = 0;
  std::string ws_before_calls_;
  std::vector<ReplyEvent> held_;
  std::mt19937_64 rng_;
};

// The whole reply at once: feed and finish, the events joined.
ParsedReply parse_reply(const ReplyParserOptions& options, std::string_view text);

}  // namespace hinge
