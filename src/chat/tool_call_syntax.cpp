#include "chat/tool_call_syntax.h"

#include <algorithm>
#include <cctype>

#include <nlohmann/json.hpp>

namespace hinge::tool_syntax {
namespace {

using OJson = nlohmann::ordered_json;
constexpr int kMaxDepth = 64;

bool is_space(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

size_t skip_ws(std::string_view s, size_t i) {
  while (i < s.size() && is_space(s[i])) ++i;
  return i;
}

// Whether s[i..] starts with lit: kDone (and *end), kNeedMore (s ends inside a prefix of it),
// kBad (it differs).
Scan match(std::string_view s, size_t i, std::string_view lit, bool final, size_t* end) {
  const size_t n = std::min(lit.size(), s.size() - std::min(i, s.size()));
  if (s.substr(i, n) != lit.substr(0, n)) return Scan::kBad;
  if (n < lit.size()) return final ? Scan::kBad : Scan::kNeedMore;
  *end = i + lit.size();
  return Scan::kDone;
}

std::optional<OJson> parse_json(std::string_view s) {
  OJson j = OJson::parse(s.begin(), s.end(), nullptr, false);
  if (j.is_discarded()) return std::nullopt;
  return j;
}

// The delimiter after a short field (a name, a recipient) at buf[from]: found within `limit`
// bytes -> kDone and *at; not there while the window is complete -> kBad; else it may still come.
// The same answer however the text arrives (a stream and a whole reply agree).
Scan delimited(std::string_view buf, size_t from, std::string_view delim, size_t limit, bool final, size_t* at) {
  const size_t window = std::min(buf.size(), from + limit + delim.size());
  const size_t pos = buf.substr(0, window).find(delim, from);
  if (pos != std::string_view::npos && pos - from <= limit) {
    *at = pos;
    return Scan::kDone;
  }
  if (window == from + limit + delim.size() || final) return Scan::kBad;
  return Scan::kNeedMore;
}

// A function name as a model writes it: 1 to 64 of letters, digits, '_', '-' and '.'.
bool valid_name(std::string_view n) {
  if (n.empty() || n.size() > 64) return false;
  for (char c : n)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.')) return false;
  return true;
}

// A function name at buf[i] ended by `delim` (within 64 bytes): kDone with the name and *after
// past the delimiter; kBad when the name is not one.
Scan name_then(std::string_view buf, size_t i, std::string_view delim, bool final, std::string* name,
               size_t* after) {
  size_t at = 0;
  const Scan d = delimited(buf, i, delim, 64, final, &at);
  if (d != Scan::kDone) return d;
  *name = std::string(buf.substr(i, at - i));
  *after = at + delim.size();
  return valid_name(*name) ? Scan::kDone : Scan::kBad;
}

std::string compact(const OJson& j) { return j.dump(-1, ' ', false, OJson::error_handler_t::replace); }

// A JSON object at buf[i] (after whitespace): kDone with *end past it and *args its compact text,
// kNeedMore, or kBad (not an object, or invalid JSON).
Scan object_at(std::string_view buf, size_t i, bool final, size_t* end, std::string* args) {
  i = skip_ws(buf, i);
  if (i == buf.size()) return final ? Scan::kBad : Scan::kNeedMore;
  const Scan s = scan_json(buf, i, final, end);
  if (s != Scan::kDone) return s;
  auto a = parse_json(buf.substr(i, *end - i));
  if (!a || !a->is_object()) return Scan::kBad;
  *args = compact(*a);
  return Scan::kDone;
}

// A call from {name_key: "...", args_key: {...} | "{...}"}; false when it is not one.
bool call_from_object(const OJson& o, const char* name_key, std::initializer_list<const char*> args_keys,
                      RawCall* out) {
  if (!o.is_object()) return false;
  auto n = o.find(name_key);
  if (n == o.end() || !n->is_string() || !valid_name(n->get<std::string>())) return false;
  out->name = n->get<std::string>();
  out->arguments = "{}";
  for (const char* k : args_keys) {
    auto a = o.find(k);
    if (a == o.end() || a->is_null()) continue;
    if (a->is_object()) {
      out->arguments = compact(*a);
    } else if (a->is_string()) {  // JSON in a string, as some models write it
      auto inner = parse_json(a->get<std::string>());
      if (!inner || !inner->is_object()) return false;
      out->arguments = compact(*inner);
    } else {
      return false;
    }
    break;
  }
  if (auto id = o.find("id"); id != o.end() && id->is_string()) out->id = id->get<std::string>();
  return true;
}

// A JSON object or array of call objects at buf[i].
Scan json_calls(std::string_view buf, size_t i, bool final, const char* name_key,
                std::initializer_list<const char*> args_keys, size_t* end, std::vector<RawCall>* calls) {
  const Scan s = scan_json(buf, i, final, end);
  if (s != Scan::kDone) return s;
  auto j = parse_json(buf.substr(i, *end - i));
  if (!j) return Scan::kBad;
  const OJson list = j->is_array() ? *j : OJson::array({*j});
  if (list.empty()) return Scan::kBad;
  for (const OJson& o : list) {
    RawCall c;
    if (!call_from_object(o, name_key, args_keys, &c)) return Scan::kBad;
    calls->push_back(std::move(c));
  }
  return Scan::kDone;
}

// After a call: its closing literal, after optional whitespace (missing: not a call).
Scan required_close(std::string_view buf, size_t i, std::string_view close, bool final, size_t* end) {
  const size_t k = skip_ws(buf, i);
  if (k == buf.size()) return final ? Scan::kBad : Scan::kNeedMore;
  return match(buf, k, close, final, end);
}

// name.call(key="value", n=3) -> {"key": "value", "n": 3} (Llama 3.1's built-in tools).
bool python_call(std::string_view s, RawCall* out) {
  const size_t dot = s.find(".call(");
  if (dot == std::string_view::npos || dot == 0) return false;
  for (size_t k = 0; k < dot; ++k)
    if (!(std::isalnum(static_cast<unsigned char>(s[k])) || s[k] == '_')) return false;
  size_t i = dot + 6;
  OJson args = OJson::object();
  while (true) {
    i = skip_ws(s, i);
    if (i < s.size() && s[i] == ')') break;
    size_t k = i;
    while (k < s.size() && (std::isalnum(static_cast<unsigned char>(s[k])) || s[k] == '_')) ++k;
    if (k == i) return false;
    const std::string key(s.substr(i, k - i));
    k = skip_ws(s, k);
    if (k >= s.size() || s[k] != '=') return false;
    k = skip_ws(s, k + 1);
    if (k >= s.size()) return false;
    size_t v_end = k;
    if (s[k] == '"' || s[k] == '\'') {
      const char q = s[k];
      std::string v;
      for (v_end = k + 1; v_end < s.size() && s[v_end] != q; ++v_end) {
        if (s[v_end] == '\\' && v_end + 1 < s.size()) ++v_end;
        v += s[v_end];
      }
      if (v_end >= s.size()) return false;
      args[key] = v;
      ++v_end;
    } else {
      while (v_end < s.size() && s[v_end] != ',' && s[v_end] != ')') ++v_end;
      auto v = parse_json(s.substr(k, v_end - k));
      if (!v) return false;
      args[key] = *v;
    }
    i = skip_ws(s, v_end);
    if (i < s.size() && s[i] == ',') ++i;
    else if (i >= s.size() || s[i] != ')') return false;
  }
  if (skip_ws(s, i + 1) != s.size()) return false;
  out->name = std::string(s.substr(0, dot));
  out->arguments = args.dump();
  return true;
}

Region llama3(std::string_view buf, size_t i, std::string_view marker, bool final) {
  Region r;
  if (marker == "<|python_tag|>") i += marker.size();
  i = skip_ws(buf, i);
  if (i == buf.size()) {
    r.scan = final ? Scan::kBad : Scan::kNeedMore;
    return r;
  }
  if (buf[i] != '{') {  // a built-in: name.call(...), or code for code_interpreter
    if (marker != "<|python_tag|>") return r;
    if (!final) {
      r.scan = Scan::kNeedMore;
      return r;
    }
    std::string_view rest = buf.substr(i);
    while (!rest.empty() && is_space(rest.back())) rest.remove_suffix(1);
    RawCall c;
    if (!python_call(rest, &c)) {
      c.name = "code_interpreter";
      c.arguments = compact(OJson({{"code", std::string(rest)}}));
    }
    r.calls.push_back(std::move(c));
    r.scan = Scan::kDone;
    r.end = buf.size();
    return r;
  }
  // One or more objects, ";" between them.
  while (true) {
    size_t e = 0;
    const Scan s = json_calls(buf, i, final, "name", {"parameters", "arguments"}, &e, &r.calls);
    if (s != Scan::kDone) {
      r.scan = s;
      r.calls.clear();
      return r;
    }
    const size_t k = skip_ws(buf, e);
    if (k == buf.size() && !final) {
      r.scan = Scan::kNeedMore;
      r.calls.clear();
      return r;
    }
    if (k < buf.size() && buf[k] == ';') {
      i = skip_ws(buf, k + 1);
      if (i == buf.size()) {
        if (!final) {
          r.scan = Scan::kNeedMore;
          r.calls.clear();
          return r;
        }
        r.scan = Scan::kDone;
        r.end = i;
        return r;
      }
      continue;
    }
    if (k == buf.size()) {  // (final) the reply ends with the calls
      r.scan = Scan::kDone;
      r.end = k;
      return r;
    }
    // The reply is the calls: anything else after them and it is text.
    r.calls.clear();
    r.scan = Scan::kBad;
    return r;
  }
}

Region mistral(std::string_view buf, size_t i, bool final) {
  Region r;
  i = skip_ws(buf, i);
  if (i == buf.size()) {
    r.scan = final ? Scan::kBad : Scan::kNeedMore;
    return r;
  }
  if (buf[i] == '[' || buf[i] == '{') {
    r.scan = json_calls(buf, i, final, "name", {"arguments", "parameters"}, &r.end, &r.calls);
    return r;
  }
  // name[ARGS]{...}
  RawCall c;
  size_t args = 0;
  r.scan = name_then(buf, i, "[ARGS]", final, &c.name, &args);
  if (r.scan != Scan::kDone) return r;
  r.scan = object_at(buf, args, final, &r.end, &c.arguments);
  if (r.scan == Scan::kDone) r.calls.push_back(std::move(c));
  return r;
}

// <function=NAME>{...}</function>, and <|python_tag|>code (the python tool, to the end).
Region functionary31(std::string_view buf, size_t i, std::string_view marker, bool final) {
  Region r;
  if (marker == "<|python_tag|>") {
    if (!final) {
      r.scan = Scan::kNeedMore;
      return r;
    }
    RawCall c;
    c.name = "python";
    c.arguments = compact(OJson({{"code", std::string(buf.substr(i + marker.size()))}}));
    r.calls.push_back(std::move(c));
    r.scan = Scan::kDone;
    r.end = buf.size();
    return r;
  }
  i += marker.size();
  RawCall c;
  size_t gt = 0, e = 0;
  r.scan = name_then(buf, i, ">", final, &c.name, &gt);
  if (r.scan != Scan::kDone) return r;
  r.scan = object_at(buf, gt, final, &e, &c.arguments);
  if (r.scan != Scan::kDone) return r;
  r.calls.push_back(std::move(c));
  r.scan = required_close(buf, e, "</function>", final, &r.end);
  return r;
}

// RECIPIENT\n then {...} (a call), code (python) or text (all). ">>>" or the reply's start.
Region functionary32(std::string_view buf, size_t i, std::string_view marker, bool final) {
  Region r;
  i += marker.size();
  size_t nl = 0;
  r.scan = delimited(buf, i, "\n", 64, final, &nl);
  if (r.scan != Scan::kDone) return r;
  const std::string_view name = buf.substr(i, nl - i);
  if (name == "all") {  // text follows, to the next ">>>"
    r.end = nl + 1;
    return r;
  }
  r.scan = Scan::kBad;
  if (!valid_name(name)) return r;
  RawCall c;
  c.name = std::string(name);
  const size_t j = skip_ws(buf, nl + 1);
  if (j == buf.size()) {
    r.scan = final ? Scan::kBad : Scan::kNeedMore;
    return r;
  }
  if (name == "python" && buf[j] != '{') {  // code to the next ">>>" or the end
    const size_t next = buf.find(">>>", j);
    if (next == std::string_view::npos && !final) {
      r.scan = Scan::kNeedMore;
      return r;
    }
    r.end = next == std::string_view::npos ? buf.size() : next;
    c.arguments = compact(OJson({{"code", std::string(buf.substr(j, r.end - j))}}));
    r.calls.push_back(std::move(c));
    r.scan = Scan::kDone;
    return r;
  }
  r.scan = object_at(buf, j, final, &r.end, &c.arguments);
  if (r.scan == Scan::kDone) r.calls.push_back(std::move(c));
  return r;
}

Region json_list_then(std::string_view buf, size_t i, const char* name_key,
                      std::initializer_list<const char*> args_keys, std::string_view close, bool final) {
  Region r;
  i = skip_ws(buf, i);
  if (i == buf.size()) {
    r.scan = final ? Scan::kBad : Scan::kNeedMore;
    return r;
  }
  size_t e = 0;
  r.scan = json_calls(buf, i, final, name_key, args_keys, &e, &r.calls);
  if (r.scan == Scan::kDone) {
    if (close.empty()) r.end = e;
    else r.scan = required_close(buf, e, close, final, &r.end);
  }
  if (r.scan != Scan::kDone) r.calls.clear();
  return r;
}

// Action: ```json [...] ```
Region command_r_plus(std::string_view buf, size_t i, bool final) {
  Region r;
  i = skip_ws(buf, i);
  size_t e = 0;
  const Scan fence = match(buf, i, "```json", final, &e);
  if (fence == Scan::kNeedMore || (fence == Scan::kBad && i == buf.size() && !final)) {
    r.scan = Scan::kNeedMore;
    return r;
  }
  if (fence == Scan::kBad) return r;
  r = json_list_then(buf, e, "tool_name", {"parameters"}, "```", final);
  // "directly-answer" is the template's way to say "no tool": not a call.
  std::erase_if(r.calls, [](const RawCall& c) { return c.name == "directly-answer" || c.name == "directly_answer"; });
  return r;
}

// <｜tool▁calls▁begin｜> (<｜tool▁call▁begin｜>TYPE<｜tool▁sep｜>NAME\n```json\n{...}\n```
// <｜tool▁call▁end｜>)+ <｜tool▁calls▁end｜>
Region deepseek(std::string_view buf, size_t i, std::string_view marker, bool final) {
  static constexpr std::string_view kCallsBegin = "<｜tool▁calls▁begin｜>",
                                    kCallBegin = "<｜tool▁call▁begin｜>", kSep = "<｜tool▁sep｜>",
                                    kCallEnd = "<｜tool▁call▁end｜>", kCallsEnd = "<｜tool▁calls▁end｜>",
                                    kCallsVariant = "<｜tool▁calls｜>";
  Region r;
  // "<｜tool▁calls｜>" (a variant some models write): its first call has no begin marker.
  bool implicit_begin = marker == kCallsVariant;
  if (marker == kCallsBegin || implicit_begin) i += marker.size();
  auto need = [&](Scan s) {
    r.calls.clear();
    r.scan = s;
    return r;
  };
  while (true) {
    i = skip_ws(buf, i);
    size_t e = 0;
    if (i == buf.size()) {
      if (!final) return need(Scan::kNeedMore);
      if (r.calls.empty()) return need(Scan::kBad);
      r.scan = Scan::kDone;
      r.end = i;
      return r;
    }
    Scan m = match(buf, i, kCallsEnd, final, &e);
    if (m == Scan::kNeedMore) return need(m);
    if (m == Scan::kDone) {
      if (r.calls.empty()) return need(Scan::kBad);
      r.scan = Scan::kDone;
      r.end = e;
      return r;
    }
    m = implicit_begin ? Scan::kDone : match(buf, i, kCallBegin, final, &e);
    if (implicit_begin) e = i;
    implicit_begin = false;
    if (m != Scan::kDone) {
      if (m == Scan::kNeedMore) return need(m);
      if (r.calls.empty()) return need(Scan::kBad);
      return need(Scan::kBad);  // text after the calls without their end marker
    }
    size_t sep = 0, nl = 0;
    if (Scan d = delimited(buf, e, kSep, 16, final, &sep); d != Scan::kDone) return need(d);
    if (Scan d = delimited(buf, sep + kSep.size(), "\n", 64, final, &nl); d != Scan::kDone) return need(d);
    RawCall c;
    c.name = std::string(buf.substr(sep + kSep.size(), nl - sep - kSep.size()));
    if (!valid_name(c.name)) return need(Scan::kBad);
    size_t j = skip_ws(buf, nl + 1);
    m = match(buf, j, "```json", final, &e);
    if (m == Scan::kNeedMore || (j == buf.size() && !final)) return need(Scan::kNeedMore);
    if (m == Scan::kDone) j = skip_ws(buf, e);
    const Scan s = object_at(buf, j, final, &e, &c.arguments);
    if (s != Scan::kDone) return need(s);
    r.calls.push_back(std::move(c));
    i = skip_ws(buf, e);
    m = match(buf, i, "```", final, &e);
    if (m == Scan::kNeedMore) return need(m);
    if (m == Scan::kDone) i = e;
    i = skip_ws(buf, i);
    if (i == buf.size()) return need(final ? Scan::kBad : Scan::kNeedMore);
    m = match(buf, i, kCallEnd, final, &e);
    if (m != Scan::kDone) return need(m);  // each call ends with its marker
    i = e;
  }
}

}  // namespace

Scan scan_json(std::string_view buf, size_t pos, bool final, size_t* end) {
  if (pos >= buf.size() || (buf[pos] != '{' && buf[pos] != '[')) return Scan::kBad;
  char stack[kMaxDepth];
  int depth = 0;
  bool in_string = false, escaped = false;
  for (size_t i = pos; i < buf.size(); ++i) {
    const char c = buf[i];
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      if (depth == kMaxDepth) return Scan::kBad;
      stack[depth++] = c == '{' ? '}' : ']';
    } else if (c == '}' || c == ']') {
      if (depth == 0 || stack[depth - 1] != c) return Scan::kBad;
      if (--depth == 0) {
        *end = i + 1;
        return Scan::kDone;
      }
    }
  }
  return final ? Scan::kBad : Scan::kNeedMore;
}

const Markers& markers(ToolFormat f) {
  static const Markers kNone{};
  static const Markers kHermes{.call_starts = {"<tool_call>"}};
  static const Markers kLlama{.call_starts = {"<|python_tag|>"}, .at_start = {"{"}};
  static const Markers kMistral{.call_starts = {"[TOOL_CALLS]"}};
  static const Markers kF31{.call_starts = {"<function=", "<|python_tag|>"}};
  static const Markers kF32{.call_starts = {">>>"}, .at_start = {""}};
  static const Markers kR7b{.call_starts = {"<|START_ACTION|>"},
                            .think_open = "<|START_THINKING|>",
                            .think_close = "<|END_THINKING|>",
                            .dropped = {"<|START_RESPONSE|>", "<|END_RESPONSE|>"}};
  static const Markers kRPlus{.call_starts = {"Action:"}};
  static const Markers kFire{.call_starts = {"functools["}};
  static const Markers kDeepSeek{.call_starts = {"<｜tool▁calls▁begin｜>", "<｜tool▁call▁begin｜>",
                                                 "<｜tool▁calls｜>"},
                                 .think_open = "<think>",
                                 .think_close = "</think>"};
  switch (f) {
    case ToolFormat::kNone: return kNone;
    case ToolFormat::kHermes: return kHermes;
    case ToolFormat::kLlama3Json: return kLlama;
    case ToolFormat::kMistral: return kMistral;
    case ToolFormat::kFunctionaryV31: return kF31;
    case ToolFormat::kFunctionaryV32: return kF32;
    case ToolFormat::kCommandR7b: return kR7b;
    case ToolFormat::kCommandRPlus: return kRPlus;
    case ToolFormat::kFirefunctionV2: return kFire;
    case ToolFormat::kDeepSeekR1: return kDeepSeek;
  }
  return kNone;
}

Region parse_region(ToolFormat f, std::string_view buf, size_t start, std::string_view marker,
                    bool final) {
  switch (f) {
    case ToolFormat::kHermes:
      return json_list_then(buf, start + marker.size(), "name", {"arguments", "parameters"}, "</tool_call>", final);
    case ToolFormat::kLlama3Json: return llama3(buf, start, marker, final);
    case ToolFormat::kMistral: return mistral(buf, start + marker.size(), final);
    case ToolFormat::kFunctionaryV31: return functionary31(buf, start, marker, final);
    case ToolFormat::kFunctionaryV32: return functionary32(buf, start, marker, final);
    case ToolFormat::kCommandR7b:
      return json_list_then(buf, start + marker.size(), "tool_name", {"parameters"}, "<|END_ACTION|>", final);
    case ToolFormat::kCommandRPlus: return command_r_plus(buf, start + marker.size(), final);
    case ToolFormat::kFirefunctionV2:  // the marker ends with the array's "["
      return json_list_then(buf, start + marker.size() - 1, "name", {"arguments", "parameters"}, "", final);
    case ToolFormat::kDeepSeekR1: return deepseek(buf, start, marker, final);
    case ToolFormat::kNone: break;
  }
  return {};
}

}  // namespace hinge::tool_syntax
