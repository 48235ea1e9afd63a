// Test helper for chat/reply_parser.h: a reply fed in pieces of random sizes, its events joined
// into the message (as a stream's client would put it together).
#pragma once

#include <random>
#include <string_view>
#include <vector>

#include "chat/reply_parser.h"

namespace hinge::testing {

// Pieces of 1 to max_piece bytes drawn from `seed` (seed 0: one byte at a time).
inline ParsedReply parse_in_pieces(const ReplyParserOptions& o, std::string_view text, uint64_t seed,
                                   size_t max_piece = 9) {
  ReplyParser p(o);
  std::mt19937_64 rng(seed);
  std::vector<ReplyEvent> events;
  for (size_t i = 0; i < text.size();) {
    const size_t n = seed == 0 ? 1 : std::uniform_int_distribution<size_t>(1, max_piece)(rng);
    p.feed(text.substr(i, n), &events);
    i += n;
  }
  p.finish(&events);
  ParsedReply r;
  for (ReplyEvent& e : events) {
    if (e.kind == ReplyEvent::Kind::kContent) r.content += e.text;
    if (e.kind == ReplyEvent::Kind::kReasoning) r.reasoning_content += e.text;
    if (e.kind == ReplyEvent::Kind::kToolCall) r.tool_calls.push_back(e.call);
  }
  return r;
}

}  // namespace hinge::testing
