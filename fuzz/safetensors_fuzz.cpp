// libFuzzer target: SafetensorsFile::from_memory on arbitrary bytes. Checks that failures name
// the input and that every parsed tensor lies inside it with a consistent shape; touches each
// tensor's first/last byte so ASan sees any bad pointer.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "format/safetensors.h"

namespace {
volatile uint64_t g_sink;
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto r = hinge::SafetensorsFile::from_memory(data, size, "fuzz.safetensors");
  if (!r.ok()) {
    HINGE_CHECK(r.status().message().rfind("fuzz.safetensors: ", 0) == 0);
    HINGE_CHECK(r.status().message().find('\n') == std::string::npos);
    return 0;
  }
  const hinge::SafetensorsFile& f = **r;
  for (const auto& [k, v] : f.metadata()) g_sink = g_sink + k.size() + v.size();
  for (const auto& t : f.tensors()) {
    HINGE_CHECK(f.find(t.name) == &t);
    HINGE_CHECK(std::vector<uint64_t>(t.shape.rbegin(), t.shape.rend()) == t.ne);
    HINGE_CHECK(t.data >= data && t.data + t.num_bytes <= data + size);
    if (t.num_bytes > 0) g_sink = g_sink + t.data[0] + t.data[t.num_bytes - 1];
  }
  return 0;
}
