#include "chat/reply_parser.h"

#include <algorithm>
#include <cctype>

#include "chat/tool_call_syntax.h"

namespace hinge {
namespace {

using tool_syntax::Scan;

bool is_space(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

// The longest suffix of `s` that is a proper prefix of `marker` (text that may become it).
size_t partial_suffix(std::string_view s, std::string_view marker) {
  for (size_t n = std::min(s.size(), marker.size() - 1); n > 0; --n)
    if (s.substr(s.size() - n) == marker.substr(0, n)) return n;
  return 0;
}

bool valid_id(const std::string& id, ToolFormat f) {
  if (id.empty() || id.size() > 64) return false;
  for (char c : id)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-') return false;
  return f != ToolFormat::kMistral || id.size() == 9;
}

}  // namespace

ReplyParser::ReplyParser(const ReplyParserOptions& options)
    : opt_(options), in_reasoning_(options.reasoning_open), rng_(options.id_seed) {}

std::string ReplyParser::next_id() {
  static constexpr char kAlnum[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  const bool mistral = opt_.format == ToolFormat::kMistral;
  std::string id = mistral ? "" : "call_";
  for (int i = 0; i < (mistral ? 9 : 24); ++i) id += kAlnum[rng_() % 62];
  return id;
}

void ReplyParser::emit_text(ReplyEvent::Kind kind, std::string_view text, bool final,
                            std::vector<ReplyEvent>* out) {
  if (kind != pending_kind_) {  // whitespace before a switch is the space around a marker
    pending_ws_.clear();
    pending_kind_ = kind;
  }
  bool& any = kind == ReplyEvent::Kind::kContent ? any_content_ : any_reasoning_;
  if (!any)
    while (!text.empty() && is_space(text.front())) text.remove_prefix(1);
  size_t body = text.size();
  while (body > 0 && is_space(text[body - 1])) --body;
  if (body > 0) {
    ReplyEvent e;
    e.kind = kind;
    e.text = pending_ws_;
    e.text.append(text.substr(0, body));
    pending_ws_.clear();
    sink(out)->push_back(std::move(e));
    any = true;
    if (kind == ReplyEvent::Kind::kContent) any_output_ = true;
  }
  if (!final && any) pending_ws_.append(text.substr(body));
}

void ReplyParser::feed(std::string_view text, std::vector<ReplyEvent>* out) {
  buf_.append(text);
  advance(false, out);
}

void ReplyParser::finish(std::vector<ReplyEvent>* out) {
  advance(true, out);
  pending_ws_.clear();
  if (!calls_open_) return;
  calls_open_ = false;
  if (!degrade_) {
    for (ReplyEvent& e : held_) out->push_back(std::move(e));
  } else {  // one call failed: every call's text is content, as written
    num_calls_ = 0;
    pending_ws_ = ws_before_calls_;
    pending_kind_ = ReplyEvent::Kind::kContent;
    emit_text(ReplyEvent::Kind::kContent, std::string_view(buf_).substr(calls_from_), true, out);
  }
  held_.clear();
}

void ReplyParser::add_calls(size_t region_start, const std::vector<tool_syntax::RawCall>& calls,
                            std::vector<ReplyEvent>* out) {
  if (!calls_open_) {
    calls_open_ = true;
    calls_from_ = region_start;
    ws_before_calls_ = any_content_ && pending_kind_ == ReplyEvent::Kind::kContent ? pending_ws_ : "";
  }
  pending_ws_.clear();
  for (const tool_syntax::RawCall& c : calls) {
    ReplyEvent e;
    e.kind = ReplyEvent::Kind::kToolCall;
    e.call = {valid_id(c.id, opt_.format) ? c.id : next_id(), c.name, c.arguments};
    sink(out)->push_back(std::move(e));
    ++num_calls_;
  }
  any_output_ = true;
}

void ReplyParser::advance(bool final, std::vector<ReplyEvent>* out) {
  const tool_syntax::Markers& mk = tool_syntax::markers(opt_.format);
  const bool tools = opt_.parse_tools && opt_.format != ToolFormat::kNone;
  while (true) {
    const std::string_view p = std::string_view(buf_).substr(pos_);
    if (in_reasoning_) {
      if (!any_reasoning_ && !mk.think_open.empty()) {  // "<think>" written again inside it
        size_t k = 0;
        while (k < p.size() && is_space(p[k])) ++k;
        const std::string_view rest = p.substr(k);
        if (rest.substr(0, mk.think_open.size()) == mk.think_open) {
          pos_ += k + mk.think_open.size();
          continue;
        }
        if (!final && mk.think_open.substr(0, rest.size()) == rest) return;
      }
      const size_t close = mk.think_close.empty() ? std::string_view::npos : p.find(mk.think_close);
      if (close != std::string_view::npos) {
        emit_text(ReplyEvent::Kind::kReasoning, p.substr(0, close), true, out);
        pos_ += close + mk.think_close.size();
        in_reasoning_ = false;
        continue;
      }
      const size_t hold = final || mk.think_close.empty() ? 0 : partial_suffix(p, mk.think_close);
      emit_text(ReplyEvent::Kind::kReasoning, p.substr(0, p.size() - hold), final, out);
      pos_ += p.size() - hold;
      return;
    }
    // A region that may only open the reply (Llama 3's bare JSON, functionary v3.2's recipient).
    if (tools && !any_output_ && num_calls_ == 0 && !mk.at_start.empty()) {
      size_t k = 0;
      while (k < p.size() && is_space(p[k])) ++k;
      const std::string_view rest = p.substr(k);
      bool held = false;
      for (std::string_view m : mk.at_start) {
        if (rest.size() < m.size() || (m.empty() && rest.empty())) {
          if (!final && m.substr(0, rest.size()) == rest) held = true;
          continue;
        }
        if (rest.substr(0, m.size()) != m) continue;
        const tool_syntax::Region r = tool_syntax::parse_region(opt_.format, buf_, pos_ + k, m, final);
        if (r.scan == Scan::kNeedMore) return;
        any_output_ = true;  // decided either way: the start is behind us
        if (r.scan == Scan::kDone) {
          if (!r.calls.empty()) add_calls(pos_ + k, r.calls, out);
          pos_ = r.end;
        }
        held = false;
        break;
      }
      if (held) return;
      any_output_ = true;  // the reply did not open with a region: what follows is text
      continue;
    }
    // The earliest marker in the text.
    size_t at = std::string_view::npos, len = 0;
    enum { kThink, kDropped, kCall } what = kCall;
    std::string_view marker;
    auto consider = [&](std::string_view m, decltype(what) w) {
      if (m.empty()) return;
      const size_t i = p.find(m);
      if (i != std::string_view::npos && (i < at || (i == at && m.size() > len))) {
        at = i;
        len = m.size();
        what = w;
        marker = m;
      }
    };
    consider(mk.think_open, kThink);
    for (std::string_view m : mk.dropped) consider(m, kDropped);
    if (tools)
      for (std::string_view m : mk.call_starts) consider(m, kCall);
    if (at == std::string_view::npos) {
      size_t hold = 0;
      if (!final) {
        hold = partial_suffix(p, mk.think_open);
        for (std::string_view m : mk.dropped) hold = std::max(hold, partial_suffix(p, m));
        if (tools)
          for (std::string_view m : mk.call_starts) hold = std::max(hold, partial_suffix(p, m));
      }
      emit_text(ReplyEvent::Kind::kContent, p.substr(0, p.size() - hold), final, out);
      pos_ += p.size() - hold;
      return;
    }
    emit_text(ReplyEvent::Kind::kContent, p.substr(0, at), false, out);
    if (what == kThink) {
      pos_ += at + len;
      in_reasoning_ = true;
      continue;
    }
    if (what == kDropped) {
      pos_ += at + len;
      continue;
    }
    const tool_syntax::Region r = tool_syntax::parse_region(opt_.format, buf_, pos_ + at, marker, final);
    if (r.scan == Scan::kNeedMore) {
      pos_ += at;
      return;
    }
    if (r.scan == Scan::kBad) {  // not a call: its marker is text, and so is what follows
      if (calls_open_) degrade_ = true;
      emit_text(ReplyEvent::Kind::kContent, marker, false, out);
      pos_ += at + len;
      continue;
    }
    if (!r.calls.empty()) add_calls(pos_ + at, r.calls, out);
    pending_ws_.clear();
    any_output_ = true;
    pos_ = r.end;
  }
}

ParsedReply parse_reply(const ReplyParserOptions& options, std::string_view text) {
  ReplyParser p(options);
  std::vector<ReplyEvent> events;
  p.feed(text, &events);
  p.finish(&events);
  ParsedReply r;
  for (ReplyEvent& e : events) {
    switch (e.kind) {
      case ReplyEvent::Kind::kContent: r.content += e.text; break;
      case ReplyEvent::Kind::kReasoning: r.reasoning_content += e.text; break;
      case ReplyEvent::Kind::kToolCall: r.tool_calls.push_back(std::move(e.call)); break;
    }
  }
  return r;
}

}  // namespace hinge
