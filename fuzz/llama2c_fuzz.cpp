// libFuzzer target: llama2.c checkpoint and tokenizer parsers on arbitrary bytes. The first
// byte picks the parser; for the tokenizer the next two bytes give the vocabulary size.
// Parsed pointers must lie inside the input; every tensor's first/last float is touched.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "format/llama2c.h"

namespace {
volatile float g_sink;
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const bool tokenizer = data[0] & 1;
  data += 1;
  size -= 1;
  if (tokenizer) {
    if (size < 2) return 0;
    const int32_t vocab = data[0] | (data[1] << 8);
    auto v = hinge::llama2c::parse_tokenizer(data + 2, size - 2, vocab, "fuzz.bin");
    if (!v.ok()) {
      HINGE_CHECK(v.status().message().rfind("fuzz.bin: ", 0) == 0);
      return 0;
    }
    HINGE_CHECK(v->pieces.size() == static_cast<size_t>(vocab) &&
                v->scores.size() == v->pieces.size());
    for (const auto& p : v->pieces)
      HINGE_CHECK(p.size() <= static_cast<size_t>(v->max_token_length));
    return 0;
  }
  // The checkpoint parser wants 4-byte aligned memory (it hands out float pointers).
  std::vector<uint32_t> words(size / 4 + 1);
  std::memcpy(words.data(), data, size);
  const auto* base = reinterpret_cast<const uint8_t*>(words.data());
  auto r = hinge::llama2c::Checkpoint::from_memory(base, size, "fuzz.bin");
  if (!r.ok()) {
    HINGE_CHECK(r.status().message().rfind("fuzz.bin: ", 0) == 0);
    return 0;
  }
  for (const auto& t : (*r)->tensors()) {
    const auto* b = reinterpret_cast<const uint8_t*>(t.data);
    HINGE_CHECK(b >= base && b + t.num_elements() * 4 <= base + size);
    g_sink = g_sink + t.data[0] + t.data[t.num_elements() - 1];
  }
  return 0;
}
