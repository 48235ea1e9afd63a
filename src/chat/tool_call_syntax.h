// The per-family syntax behind chat/reply_parser.h: which markers open a tool call region, a
// reasoning block or are dropped, and how a region parses into calls. Internal to chat/.
//
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "chat/tool_format.h"

namespace hinge::tool_syntax {

enum class Scan : uint8_t {
  kNeedMore,  // the region may still complete: hold it
  kDone,      // parsed: calls (maybe none, functionary's ">>>all") and where it ends
  kBad,       // not a call: its text is content
};

struct RawCall {
  std::string name;
  std::string arguments;  // compact JSON object
  std::string id;         // the model's own (Mistral writes one), else empty
};

struct Region {
  Scan scan = Scan::kBad;
  size_t end = 0;  // with kDone: the first byte after the region
  std::vector<RawCall> calls;
};

struct Markers {
  std::vector<std::string_view> call_starts;  // anywhere in the reply
  std::vector<std::string_view> at_start;     // only before anything else ("" = always)
  std::string_view think_open, think_close;   // empty: no reasoning block
  std::vector<std::string_view> dropped;      // wrappers removed from the text
};

const Markers& markers(ToolFormat f);

// The region that starts at buf[start] with `marker` (one of the format's call_starts or
// at_start). final: the reply has ended (no kNeedMore then).
Region parse_region(ToolFormat f, std::string_view buf, size_t start, std::string_view marker,
                    bool final);

// The end of the JSON object or array at buf[pos] by its brackets, outside strings: kDone and
// *end past it, kNeedMore (the text ends inside it), kBad (not one, too deep, or unclosed when
// final). The text between is not validated here.
Scan scan_json(std::string_view buf, size_t pos, bool final, size_t* end);

}  // namespace hinge::tool_syntax
