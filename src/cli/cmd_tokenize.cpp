// `hinge tokenize`: stdin text -> token ids on one line.
#include <cstdio>
#include <iostream>
#include <iterator>
#include <string>

#include "cli/commands.h"
#include "model/loaded_model.h"

namespace hinge::cli {

int tokenize_command(const TokenizeArgs& args) {
  auto spec = load_vocab(args.model, args.tokenizer);
  if (!spec.ok()) return fail(spec.status().message());
  auto tok = Tokenizer::create(std::move(spec).value());
  if (!tok.ok()) return fail(tok.status().with_context(args.model).message());
  std::string text((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
  const auto ids = (*tok)->encode(text, !args.no_bos, args.parse_special);
  std::string line;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i) line += ' ';
    line += std::to_string(ids[i]);
  }
  line += '\n';
  std::fwrite(line.data(), 1, line.size(), stdout);
  return 0;
}

}  // namespace hinge::cli
