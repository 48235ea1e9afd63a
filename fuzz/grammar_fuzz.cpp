// libFuzzer target: grammars, JSON schemas and regexes come from clients (guided_grammar,
// grammar, response_format, guided_regex), i.e. hostile input. First byte mod 3: 0, the rest is
// GBNF; 1, a JSON Schema, compiled to GBNF, which must then parse (a compiled schema that does
// not is a finding); 2, a regular expression compiled to GBNF. A
// grammar that parses runs over fixed texts and a small vocabulary's masks. Errors must come back
// as Status; crashes, sanitizer reports, hangs and unbounded memory are findings.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "grammar/grammar.h"
#include "grammar/json_schema.h"
#include "grammar/matcher.h"
#include "grammar/regex.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view body(reinterpret_cast<const char*>(data) + 1, size - 1);
  std::string gbnf;
  const int mode = data[0] % 3;
  if (mode == 0) {
    gbnf = std::string(body);
  } else if (mode == 2) {
    auto g = hinge::grammar::regex_to_gbnf(body);
    if (!g.ok()) return 0;
    gbnf = *g;
  } else {
    const auto schema = nlohmann::ordered_json::parse(body, nullptr, false);
    if (schema.is_discarded()) return 0;
    auto g = hinge::grammar::json_schema_to_gbnf(schema);
    if (!g.ok()) return 0;
    gbnf = *g;
  }
  auto g = hinge::grammar::Grammar::parse(gbnf);
  if (!g.ok()) {
    if (mode == 1) std::abort();  // the schema compiler wrote a grammar that does not parse
    return 0;
  }
  auto shared = std::make_shared<const hinge::grammar::Grammar>(std::move(g).value());
  static const std::vector<std::string> pieces = {"{", "}", "\"", "a", "ab", "1", ":", ",", " ", "[", "]",
                                                  "true", "null", "\xc3", "\xa9", "\xe2\x82\xac", "\\", "u00"};
  static const hinge::grammar::TokenTrie trie(pieces, {});
  hinge::grammar::Matcher m(shared);
  std::vector<uint64_t> mask(1);
  for (int step = 0; step < 24 && !m.must_end(); ++step) {
    m.fill_mask(trie, mask, step % 3 == 0 ? 8 : INT64_MAX);
    bool any = false;
    for (size_t t = 0; t < pieces.size(); ++t)
      if ((mask[0] >> t) & 1) {
        if (!m.accept(pieces[t])) std::abort();  // the mask allowed what the matcher refuses
        any = true;
        break;
      }
    if (!any) break;
  }
  (void)m.can_end();
  (void)m.min_remaining();
  return 0;
}
