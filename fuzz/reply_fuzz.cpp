// libFuzzer target: a model's reply is whatever the model wrote, i.e. hostile input to the
// tool-call and reasoning parsers. First byte: the format (chat/tool_format.h) and whether the
// reply starts inside reasoning; the rest is the reply. It is parsed whole and fed in pieces of
// every size from 1 to 7: the messages must be equal, every call's arguments a JSON object.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "chat/reply_parser.h"
#include "chat/tool_format.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const auto format = static_cast<hinge::ToolFormat>(data[0] % 10);
  const hinge::ReplyParserOptions o{.format = format, .parse_tools = (data[0] & 0x40) == 0,
                                    .reasoning_open = (data[0] & 0x80) != 0, .id_seed = 1};
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  const hinge::ParsedReply whole = hinge::parse_reply(o, text);
  for (const hinge::ToolCall& c : whole.tool_calls) {
    const auto j = nlohmann::json::parse(c.arguments, nullptr, false);
    if (j.is_discarded() || !j.is_object() || c.name.empty()) std::abort();
  }
  for (size_t piece = 1; piece <= 7; ++piece) {
    hinge::ReplyParser p(o);
    std::vector<hinge::ReplyEvent> events;
    for (size_t i = 0; i < text.size(); i += piece) p.feed(text.substr(i, piece), &events);
    p.finish(&events);
    std::string content, reasoning;
    size_t calls = 0;
    for (const hinge::ReplyEvent& e : events) {
      if (e.kind == hinge::ReplyEvent::Kind::kContent) content += e.text;
      else if (e.kind == hinge::ReplyEvent::Kind::kReasoning) reasoning += e.text;
      else if (calls >= whole.tool_calls.size() || e.call.arguments != whole.tool_calls[calls++].arguments)
        std::abort();
    }
    if (content != whole.content || reasoning != whole.reasoning_content || calls != whole.tool_calls.size())
      std::abort();  // a stream must give what the whole reply gives
  }
  return 0;
}
