// libFuzzer target: GgufFile::from_memory on arbitrary bytes. A parse either fails with a message
// naming the input or yields tensors that lie inside the input; both are checked, and every
// tensor's first/last byte and every metadata value are touched so ASan sees any bad pointer.
#include <cstddef>
#include <cstdint>
#include <string>

#include "format/gguf.h"

namespace {

volatile uint64_t g_sink;

void touch(const hinge::gguf::Value& v) {
  g_sink = g_sink + v.u + static_cast<uint64_t>(v.i) + static_cast<uint64_t>(v.s.size());
  if (!v.s.empty())
    g_sink = g_sink + static_cast<uint8_t>(v.s.front()) + static_cast<uint8_t>(v.s.back());
  (void)v.as_int();
  (void)v.as_uint();
  (void)v.as_float();
  for (const auto& e : v.array) {
    HINGE_CHECK(e.type == v.array_type);
    touch(e);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto r = hinge::gguf::GgufFile::from_memory(data, size, "fuzz.gguf");
  if (!r.ok()) {
    HINGE_CHECK(r.status().message().rfind("fuzz.gguf: ", 0) == 0);
    HINGE_CHECK(r.status().message().find('\n') == std::string::npos);
    return 0;
  }
  const hinge::gguf::GgufFile& f = **r;
  HINGE_CHECK(f.alignment() != 0 && (f.alignment() & (f.alignment() - 1)) == 0);
  for (const auto& [key, value] : f.metadata()) {
    HINGE_CHECK(f.find(key) == &value);
    touch(value);
    (void)f.get_string_array(key);
    (void)f.get_float_array(key);
    (void)f.get_int_array(key);
  }
  for (const auto& t : f.tensors()) {
    HINGE_CHECK(f.find_tensor(t.name) == &t);
    HINGE_CHECK(t.num_bytes > 0 && t.data >= data && t.data + t.num_bytes <= data + size);
    HINGE_CHECK(!t.ne.empty() && t.ne.size() <= 4 && t.num_elements() > 0);
    g_sink = g_sink + t.data[0] + t.data[t.num_bytes - 1];
  }
  return 0;
}
