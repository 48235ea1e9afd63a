// libFuzzer target: prompt text is client input, so every tokenizer kind must take any bytes.
// The first byte picks the tokenizer (small vocabularies of each kind: SentencePiece, byte-level
// BPE, Hugging Face BPE, Gemma 4 BPE, WordPiece) and whether special tokens are parsed; the rest
// is the text. Every id must be in range, and decoding must not crash.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace {

using hinge::Tokenizer;
using hinge::VocabSpec;

const char* const kSpace = "\xE2\x96\x81";

std::vector<std::unique_ptr<Tokenizer>> make_all() {
  std::vector<VocabSpec> specs(5);
  std::vector<std::string> base = {"<unk>", "<s>", "</s>", "a", "b", "ab", "\n", "\n\n",
                                   "<0x41>", "<0xC3>", "<0xA9>", "[SEP]"};
  base.push_back(std::string(kSpace));
  base.push_back(std::string(kSpace) + "a");
  base.push_back(std::string(kSpace) + "ab");
  const std::vector<std::string> merges = {std::string(kSpace) + " a", "a b",
                                           std::string(kSpace) + "a b", "\n \n"};
  const char* kinds[] = {"llama", "gpt2", "hf-bpe-spm", "gemma4", "bert"};
  for (size_t i = 0; i < specs.size(); ++i) {
    VocabSpec& s = specs[i];
    s.model = kinds[i];
    s.tokens = base;
    if (s.model == "gpt2") {
      s.pre = "llama-bpe";
      s.tokens.push_back("\xC4\xA0");  // byte-encoded space
      s.merges = {"a b"};
    } else if (s.model != "llama" && s.model != "bert") {
      s.merges = merges;
    }
    s.scores.assign(s.tokens.size(), 0.0f);
    s.token_types.assign(s.tokens.size(), 1);
    s.token_types[0] = 2;
    s.token_types[1] = s.token_types[2] = s.token_types[11] = 3;
    for (size_t b = 8; b <= 10; ++b) s.token_types[b] = 6;
    s.unk = 0, s.bos = 1, s.eos = 2, s.sep = 11;
    s.add_space_prefix = s.model == "llama" || s.model == "hf-bpe-spm";
  }
  std::vector<std::unique_ptr<Tokenizer>> out;
  for (VocabSpec& s : specs) {
    auto t = Tokenizer::create(std::move(s));
    if (!t.ok()) __builtin_trap();
    out.push_back(std::move(*t));
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::vector<std::unique_ptr<Tokenizer>> all = make_all();
  if (size == 0) return 0;
  const Tokenizer& tok = *all[data[0] % all.size()];
  const bool special = (data[0] / all.size()) & 1;
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  const std::vector<int32_t> ids = tok.encode(text, special, special);
  for (int32_t id : ids)
    if (id < 0 || id >= tok.n_vocab()) __builtin_trap();
  (void)tok.decode(ids);
  return 0;
}
