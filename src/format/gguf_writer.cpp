// GGUF metadata values and the GGUF v3 writer.
//
// Output layout (what ggml's gguf reader expects, docs/gguf.md):
//   header | kv in insertion order | tensor infos | zero padding to alignment |
//   tensor 0 data, zero-padded to alignment | tensor 1 data, padded | ...
// Tensor offsets are the running padded sizes, so offset[i] == sum of padded sizes before i
// (ggml rejects any other layout).
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>

#include "format/gguf.h"
#include "format/gguf_internal.h"

namespace hinge::gguf {

// ---------------------------------------------------------------------------------------------
// Value

Value Value::u8(uint8_t v) {
  Value x;
  x.type = ValueType::UINT8;
  x.u = v;
  return x;
}
Value Value::i8(int8_t v) {
  Value x;
  x.type = ValueType::INT8;
  x.i = v;
  return x;
}
Value Value::u16(uint16_t v) {
  Value x;
  x.type = ValueType::UINT16;
  x.u = v;
  return x;
}
Value Value::i16(int16_t v) {
  Value x;
  x.type = ValueType::INT16;
  x.i = v;
  return x;
}
Value Value::u32(uint32_t v) {
  Value x;
  x.type = ValueType::UINT32;
  x.u = v;
  return x;
}
Value Value::i32(int32_t v) {
  Value x;
  x.type = ValueType::INT32;
  x.i = v;
  return x;
}
Value Value::u64(uint64_t v) {
  Value x;
  x.type = ValueType::UINT64;
  x.u = v;
  return x;
}
Value Value::i64(int64_t v) {
  Value x;
  x.type = ValueType::INT64;
  x.i = v;
  return x;
}
Value Value::f32(float v) {
  Value x;
  x.type = ValueType::FLOAT32;
  x.f = v;
  return x;
}
Value Value::f64(double v) {
  Value x;
  x.type = ValueType::FLOAT64;
  x.f = v;
  return x;
}
Value Value::boolean(bool v) {
  Value x;
  x.type = ValueType::BOOL;
  x.u = v ? 1 : 0;
  return x;
}
Value Value::str(std::string v) {
  Value x;
  x.type = ValueType::STRING;
  x.s = std::move(v);
  return x;
}
Value Value::make_array(ValueType elem_type, std::vector<Value> elems) {
  Value x;
  x.type = ValueType::ARRAY;
  x.array_type = elem_type;
  x.array = std::move(elems);
  return x;
}
Value Value::str_array(const std::vector<std::string>& v) {
  std::vector<Value> e;
  e.reserve(v.size());
  for (const auto& s : v) e.push_back(str(s));
  return make_array(ValueType::STRING, std::move(e));
}
Value Value::f32_array(const std::vector<float>& v) {
  std::vector<Value> e;
  e.reserve(v.size());
  for (float f : v) e.push_back(f32(f));
  return make_array(ValueType::FLOAT32, std::move(e));
}
Value Value::i32_array(const std::vector<int32_t>& v) {
  std::vector<Value> e;
  e.reserve(v.size());
  for (int32_t k : v) e.push_back(i32(k));
  return make_array(ValueType::INT32, std::move(e));
}

namespace {
bool is_unsigned(ValueType t) {
  return t == ValueType::UINT8 || t == ValueType::UINT16 || t == ValueType::UINT32 ||
         t == ValueType::UINT64;
}
bool is_signed(ValueType t) {
  return t == ValueType::INT8 || t == ValueType::INT16 || t == ValueType::INT32 ||
         t == ValueType::INT64;
}
bool is_float(ValueType t) {
  return t == ValueType::FLOAT32 || t == ValueType::FLOAT64;
}
}  // namespace

std::optional<int64_t> Value::as_int() const {
  if (is_signed(type)) return i;
  if (is_unsigned(type) && u <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
    return static_cast<int64_t>(u);
  return std::nullopt;
}

std::optional<uint64_t> Value::as_uint() const {
  if (is_unsigned(type)) return u;
  if (is_signed(type) && i >= 0) return static_cast<uint64_t>(i);
  return std::nullopt;
}

std::optional<double> Value::as_float() const {
  if (is_float(type)) return f;
  if (is_signed(type)) return static_cast<double>(i);
  if (is_unsigned(type)) return static_cast<double>(u);
  return std::nullopt;
}

// ---------------------------------------------------------------------------------------------
// Writer

namespace {

constexpr size_t kGgmlMaxName = 64;  // ggml's GGML_MAX_NAME, including the terminating NUL
constexpr int kMaxArrayDepth = 8;    // the reader's limit

template <typename T>
void put(std::string& out, T v) {
  char b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));
  out.append(b, sizeof(T));
}

void put_string(std::string& out, const std::string& s) {
  put<uint64_t>(out, s.size());
  out += s;
}

// Checks that the value is encodable: known types, array elements all of the declared type,
// integer payloads within the declared width.
Status check_value(const std::string& key, const Value& v, int depth) {
  if (static_cast<uint32_t>(v.type) > static_cast<uint32_t>(ValueType::FLOAT64))
    return Status::Errorf("gguf writer: key '{}' has an invalid value type", key);
  switch (v.type) {
    case ValueType::UINT8:
      if (v.u > 0xff)
        return Status::Errorf("gguf writer: key '{}': u8 value {} out of range", key, v.u);
      break;
    case ValueType::UINT16:
      if (v.u > 0xffff)
        return Status::Errorf("gguf writer: key '{}': u16 value {} out of range", key, v.u);
      break;
    case ValueType::UINT32:
      if (v.u > 0xffffffffu)
        return Status::Errorf("gguf writer: key '{}': u32 value {} out of range", key, v.u);
      break;
    case ValueType::INT8:
      if (v.i < -128 || v.i > 127)
        return Status::Errorf("gguf writer: key '{}': i8 value {} out of range", key, v.i);
      break;
    case ValueType::INT16:
      if (v.i < -32768 || v.i > 32767)
        return Status::Errorf("gguf writer: key '{}': i16 value {} out of range", key, v.i);
      break;
    case ValueType::INT32:
      if (v.i < std::numeric_limits<int32_t>::min() || v.i > std::numeric_limits<int32_t>::max())
        return Status::Errorf("gguf writer: key '{}': i32 value {} out of range", key, v.i);
      break;
    case ValueType::BOOL:
      if (v.u > 1)
        return Status::Errorf("gguf writer: key '{}': bool value {} is not 0/1", key, v.u);
      break;
    case ValueType::ARRAY:
      if (depth >= kMaxArrayDepth)
        return Status::Errorf("gguf writer: key '{}' nests arrays deeper than {}", key,
                              kMaxArrayDepth);
      for (const Value& e : v.array) {
        if (e.type != v.array_type) {
          return Status::Errorf("gguf writer: key '{}': array of {} holds a {} element", key,
                                value_type_name(v.array_type), value_type_name(e.type));
        }
        HINGE_RETURN_IF_ERROR(check_value(key, e, depth + 1));
      }
      break;
    default:
      break;
  }
  return Status::Ok();
}

// Encodes the payload of `v` (without its type tag).
void put_value(std::string& out, const Value& v) {
  switch (v.type) {
    case ValueType::UINT8:
      put<uint8_t>(out, static_cast<uint8_t>(v.u));
      break;
    case ValueType::INT8:
      put<int8_t>(out, static_cast<int8_t>(v.i));
      break;
    case ValueType::UINT16:
      put<uint16_t>(out, static_cast<uint16_t>(v.u));
      break;
    case ValueType::INT16:
      put<int16_t>(out, static_cast<int16_t>(v.i));
      break;
    case ValueType::UINT32:
      put<uint32_t>(out, static_cast<uint32_t>(v.u));
      break;
    case ValueType::INT32:
      put<int32_t>(out, static_cast<int32_t>(v.i));
      break;
    case ValueType::FLOAT32:
      put<float>(out, static_cast<float>(v.f));
      break;
    case ValueType::BOOL:
      put<uint8_t>(out, static_cast<uint8_t>(v.u));
      break;
    case ValueType::STRING:
      put_string(out, v.s);
      break;
    case ValueType::UINT64:
      put<uint64_t>(out, v.u);
      break;
    case ValueType::INT64:
      put<int64_t>(out, v.i);
      break;
    case ValueType::FLOAT64:
      put<double>(out, v.f);
      break;
    case ValueType::ARRAY:
      put<uint32_t>(out, static_cast<uint32_t>(v.array_type));
      put<uint64_t>(out, v.array.size());
      for (const Value& e : v.array) put_value(out, e);
      break;
  }
}

uint64_t pad_to(uint64_t n, uint64_t align) {
  return (n + align - 1) / align * align;
}

}  // namespace

void GgufWriter::set(const std::string& key, Value value) {
  for (auto& kv : kv_) {
    if (kv.first == key) {
      kv.second = std::move(value);
      return;
    }
  }
  kv_.emplace_back(key, std::move(value));
}

Status GgufWriter::add_tensor(const std::string& name, GgmlType type, std::vector<uint64_t> ne,
                              const void* data, size_t num_bytes) {
  if (name.empty()) return Status::Error("gguf writer: empty tensor name");
  if (name.size() >= kGgmlMaxName) {
    return Status::Errorf("gguf writer: tensor name '{}' is {} bytes; ggml allows at most {}", name,
                          name.size(), kGgmlMaxName - 1);
  }
  for (const auto& t : tensors_)
    if (t.name == name) return Status::Errorf("gguf writer: duplicate tensor '{}'", name);
  auto tr = ggml_type_traits(type);
  if (!tr) return Status::Errorf("gguf writer: tensor '{}' has an unknown type", name);
  if (ne.empty() || ne.size() > 4)
    return Status::Errorf("gguf writer: tensor '{}' has {} dimensions (1 to 4)", name, ne.size());
  uint64_t elems = 1;
  for (uint64_t d : ne) {
    if (d == 0 || !internal::checked_mul(elems, d, &elems) ||
        elems > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
      return Status::Errorf("gguf writer: tensor '{}' has a zero or overflowing shape", name);
  }
  if (ne[0] % tr->block_elems != 0) {
    return Status::Errorf(
        "gguf writer: tensor '{}' row length {} is not a multiple of the {} "
        "block size {}",
        name, ne[0], tr->name, tr->block_elems);
  }
  uint64_t expect = elems / tr->block_elems * tr->block_bytes;
  if (expect != num_bytes) {
    return Status::Errorf("gguf writer: tensor '{}' needs {} bytes, got {}", name, expect,
                          num_bytes);
  }
  if (num_bytes > 0 && data == nullptr)
    return Status::Errorf("gguf writer: tensor '{}' has no data", name);
  PendingTensor t{name, type, std::move(ne), {}};
  const auto* p = static_cast<const uint8_t*>(data);
  t.data.assign(p, p + num_bytes);
  tensors_.push_back(std::move(t));
  return Status::Ok();
}

Status GgufWriter::write(const std::string& path) const {
  uint64_t alignment = 32;
  for (const auto& [key, v] : kv_) {
    if (key.empty()) return Status::Errorf("{}: gguf writer: empty metadata key", path);
    HINGE_RETURN_IF_ERROR(check_value(key, v, 0).with_context(path));
    if (key == "general.alignment") {
      // ggml reads it with gguf_get_val_u32, so it must be a u32.
      if (v.type != ValueType::UINT32 || v.u == 0 || (v.u & (v.u - 1)) != 0) {
        return Status::Errorf("{}: gguf writer: general.alignment must be a u32 power of two",
                              path);
      }
      alignment = v.u;
    }
  }

  std::string head;
  head += "GGUF";
  put<uint32_t>(head, 3);
  put<uint64_t>(head, tensors_.size());
  put<uint64_t>(head, kv_.size());
  for (const auto& [key, v] : kv_) {
    put_string(head, key);
    put<uint32_t>(head, static_cast<uint32_t>(v.type));
    put_value(head, v);
  }
  uint64_t offset = 0;
  for (const auto& t : tensors_) {
    put_string(head, t.name);
    put<uint32_t>(head, static_cast<uint32_t>(t.ne.size()));
    for (uint64_t d : t.ne) put<uint64_t>(head, d);
    put<uint32_t>(head, static_cast<uint32_t>(t.type));
    put<uint64_t>(head, offset);
    offset += pad_to(t.data.size(), alignment);
  }
  if (!tensors_.empty()) head.resize(pad_to(head.size(), alignment), '\0');

  const std::string tmp = path + ".tmp";
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) return Status::Errorf("{}: cannot create: {}", tmp, std::strerror(errno));
  bool ok = std::fwrite(head.data(), 1, head.size(), f) == head.size();
  static const char kZeros[64] = {};
  for (const auto& t : tensors_) {
    if (!ok) break;
    ok = std::fwrite(t.data.data(), 1, t.data.size(), f) == t.data.size();
    uint64_t pad = pad_to(t.data.size(), alignment) - t.data.size();
    while (ok && pad > 0) {
      size_t n = pad < sizeof kZeros ? static_cast<size_t>(pad) : sizeof kZeros;
      ok = std::fwrite(kZeros, 1, n, f) == n;
      pad -= n;
    }
  }
  int write_errno = ok ? 0 : errno;
  if (std::fclose(f) != 0 && ok) {
    ok = false;
    write_errno = errno;
  }
  if (!ok) {
    std::remove(tmp.c_str());
    return Status::Errorf("{}: write failed: {}", tmp, std::strerror(write_errno));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    int e = errno;
    std::remove(tmp.c_str());
    return Status::Errorf("{}: cannot rename {} into place: {}", path, tmp, std::strerror(e));
  }
  return Status::Ok();
}

}  // namespace hinge::gguf
