// GGUF reader: header, metadata, tensor infos, data section; every field validated.
//
// File layout (little-endian, v2/v3):
//   | "GGUF" | u32 version | u64 n_tensors | u64 n_kv | kv[n_kv] | tensor_info[n_tensors] |
//   | zero padding to `alignment` | data section (tensor data at aligned offsets) |
// Bounds are checked before every read; counts are bounded by the bytes that remain, so a
// hostile header cannot make us reserve more memory than a small multiple of the file size.
#include "format/gguf.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <numeric>

#include "format/error_text.h"
#include "format/gguf_internal.h"
#include "format/mapped_file.h"

namespace hinge::gguf {

std::string_view value_type_name(ValueType t) {
  switch (t) {
    case ValueType::UINT8:
      return "u8";
    case ValueType::INT8:
      return "i8";
    case ValueType::UINT16:
      return "u16";
    case ValueType::INT16:
      return "i16";
    case ValueType::UINT32:
      return "u32";
    case ValueType::INT32:
      return "i32";
    case ValueType::FLOAT32:
      return "f32";
    case ValueType::BOOL:
      return "bool";
    case ValueType::STRING:
      return "string";
    case ValueType::ARRAY:
      return "array";
    case ValueType::UINT64:
      return "u64";
    case ValueType::INT64:
      return "i64";
    case ValueType::FLOAT64:
      return "f64";
  }
  return "unknown";
}

namespace internal {

std::optional<uint64_t> scalar_bytes(ValueType t) {
  switch (t) {
    case ValueType::UINT8:
    case ValueType::INT8:
    case ValueType::BOOL:
      return 1;
    case ValueType::UINT16:
    case ValueType::INT16:
      return 2;
    case ValueType::UINT32:
    case ValueType::INT32:
    case ValueType::FLOAT32:
      return 4;
    case ValueType::UINT64:
    case ValueType::INT64:
    case ValueType::FLOAT64:
      return 8;
    case ValueType::STRING:
    case ValueType::ARRAY:
      return std::nullopt;
  }
  return std::nullopt;
}

bool checked_mul(uint64_t a, uint64_t b, uint64_t* out) {
  return !__builtin_mul_overflow(a, b, out);
}

}  // namespace internal

uint64_t TensorInfo::num_elements() const {
  uint64_t n = 1;
  for (uint64_t d : ne) n *= d;  // validated against overflow when parsed / added
  return n;
}

namespace {

using internal::checked_mul;
using internal::scalar_bytes;

// Smallest encodings, used to bound counts by the bytes left in the file.
constexpr uint64_t kMinKvBytes = 8 + 4 + 1;  // key length, type, 1-byte value
constexpr uint64_t kMinTensorInfoBytes =
    8 + 4 + 8 + 4 + 8;                     // name len, n_dims, ne[0], type, offset
constexpr uint64_t kMaxNameBytes = 65535;  // keys and tensor names
constexpr int kMaxArrayDepth = 8;          // nested arrays (bounds recursion)
constexpr uint32_t kMaxAlignment = 1u << 30;

// Sequential bounds-checked reader over the file bytes.
class Reader {
 public:
  Reader(const uint8_t* data, uint64_t size, const std::string& path)
      : data_(data), size_(size), path_(path) {}

  uint64_t pos() const { return pos_; }
  uint64_t remaining() const { return size_ - pos_; }

  Status truncated(std::string_view what, uint64_t need) const {
    return Status::Errorf(
        "{}: truncated file: reading {} needs {} bytes at offset {} but the file "
        "size is {}",
        path_, what, need, pos_, size_);
  }

  template <typename T>
  Status read(T* out, std::string_view what) {
    if (remaining() < sizeof(T)) return truncated(what, sizeof(T));
    std::memcpy(out, data_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return Status::Ok();
  }

  Status read_string(std::string* out, std::string_view what, uint64_t max_len) {
    uint64_t len = 0;
    HINGE_RETURN_IF_ERROR(read(&len, what));
    if (len > remaining()) {
      return Status::Errorf("{}: {} has length {} at offset {}, past the end of the file (size {})",
                            path_, what, len, pos_ - 8, size_);
    }
    if (len > max_len) {
      return Status::Errorf("{}: {} has length {} at offset {}, above the limit of {}", path_, what,
                            len, pos_ - 8, max_len);
    }
    out->assign(reinterpret_cast<const char*>(data_ + pos_), len);
    pos_ += len;
    return Status::Ok();
  }

 private:
  const uint8_t* data_;
  uint64_t size_;
  uint64_t pos_ = 0;
  const std::string& path_;
};

Status read_value(Reader& r, const std::string& path, const std::string& key, ValueType type,
                  Value* out, int depth);

Status read_value_type(Reader& r, const std::string& path, const std::string& key, ValueType* out) {
  uint32_t raw = 0;
  HINGE_RETURN_IF_ERROR(r.read(&raw, "metadata value type"));
  if (raw > static_cast<uint32_t>(ValueType::FLOAT64)) {
    return Status::Errorf("{}: metadata key '{}' has unknown value type {} at offset {}", path, key,
                          raw, r.pos() - 4);
  }
  *out = static_cast<ValueType>(raw);
  return Status::Ok();
}

Status read_scalar(Reader& r, const std::string& path, const std::string& key, ValueType type,
                   Value* out) {
  out->type = type;
  switch (type) {
    case ValueType::UINT8: {
      uint8_t v;
      HINGE_RETURN_IF_ERROR(r.read(&v, "u8 value"));
      out->u = v;
      return Status::Ok();
    }
    case ValueType::INT8: {
      int8_t v;
      HINGE_RETURN_IF_ERROR(r.read(&v, "i8 value"));
      out->i = v;
      return Status::Ok();
    }
    case ValueType::UINT16: {
      uint16_t v;
      HINGE_RETURN_IF_ERROR(r.read(&v, "u16 value"));
      out->u = v;
      return Status::Ok();
    }
    case ValueType::INT16: {
      int16_t v;
      HINGE_RETURN_IF_ERROR(r.read(&v, "i16 value"));
      out->i = v;
      return Status::Ok();
    }
    case ValueType::UINT32: {
      uint32_t v;
      HINGE_RETURN_IF_ERROR(r.read(&v, "u32 value"));
      out->u = v;
      return Status::Ok();
    }
    case ValueType::INT32: {
      int32_t v;
      HINGE_RETURN_IF_ERROR(r.read(&v, "i32 value"));
      out->i = v;
      return Status::Ok();
    }
    case ValueType::FLOAT32: {
      float v;
      HINGE_RETURN_IF_ERROR(r.read(&v, "f32 value"));
      out->f = v;
      return Status::Ok();
    }
    case ValueType::BOOL: {
      uint8_t v;
      HINGE_RETURN_IF_ERROR(r.read(&v, "bool value"));
      if (v > 1) {
        return Status::Errorf(
            "{}: metadata key '{}' has bool value {} at offset {} (must be 0 or "
            "1)",
            path, key, v, r.pos() - 1);
      }
      out->u = v;
      return Status::Ok();
    }
    case ValueType::UINT64: {
      uint64_t v;
      HINGE_RETURN_IF_ERROR(r.read(&v, "u64 value"));
      out->u = v;
      return Status::Ok();
    }
    case ValueType::INT64: {
      int64_t v;
      HINGE_RETURN_IF_ERROR(r.read(&v, "i64 value"));
      out->i = v;
      return Status::Ok();
    }
    case ValueType::FLOAT64: {
      double v;
      HINGE_RETURN_IF_ERROR(r.read(&v, "f64 value"));
      out->f = v;
      return Status::Ok();
    }
    case ValueType::STRING:
      return r.read_string(&out->s, "string value of metadata key '" + key + "'",
                           std::numeric_limits<uint64_t>::max());
    case ValueType::ARRAY:
      break;
  }
  return Status::Errorf("{}: internal: read_scalar on array", path);
}

Status read_value(Reader& r, const std::string& path, const std::string& key, ValueType type,
                  Value* out, int depth) {
  if (type != ValueType::ARRAY) return read_scalar(r, path, key, type, out);
  if (depth >= kMaxArrayDepth) {
    return Status::Errorf("{}: metadata key '{}' nests arrays deeper than {} levels", path, key,
                          kMaxArrayDepth);
  }
  out->type = ValueType::ARRAY;
  HINGE_RETURN_IF_ERROR(read_value_type(r, path, key, &out->array_type));
  uint64_t count = 0;
  HINGE_RETURN_IF_ERROR(r.read(&count, "array length"));
  // Every element takes at least this many bytes in the file: a string its u64 length, an
  // array its type and length.
  uint64_t min_elem =
      scalar_bytes(out->array_type).value_or(out->array_type == ValueType::STRING ? 8 : 12);
  if (count > r.remaining() / min_elem) {
    return Status::Errorf(
        "{}: metadata key '{}' declares an array of {} {} elements at offset {}, "
        "more than the {} bytes left in the file can hold",
        path, key, count, value_type_name(out->array_type), r.pos() - 8, r.remaining());
  }
  out->array.resize(count);
  for (uint64_t k = 0; k < count; ++k)
    HINGE_RETURN_IF_ERROR(read_value(r, path, key, out->array_type, &out->array[k], depth + 1));
  return Status::Ok();
}

}  // namespace

StatusOr<std::unique_ptr<GgufFile>> GgufFile::open(const std::string& path) {
  HINGE_ASSIGN_OR_RETURN(MappedFile m, MappedFile::open(path, "GGUF file"));
  std::unique_ptr<GgufFile> f(new GgufFile());
  f->path_ = path;
  f->size_ = m.size();
  f->base_ = m.release();
  f->owns_mapping_ = true;  // the destructor unmaps, also on parse failure below
  HINGE_RETURN_IF_ERROR(format_internal::one_line(f->parse()));
  return f;
}

StatusOr<std::unique_ptr<GgufFile>> GgufFile::from_memory(const uint8_t* data, size_t size,
                                                          std::string name) {
  std::unique_ptr<GgufFile> f(new GgufFile());
  f->path_ = std::move(name);
  f->base_ = data;
  f->size_ = size;
  if (size == 0) return Status::Errorf("{}: empty file (0 bytes), not a GGUF file", f->path_);
  HINGE_RETURN_IF_ERROR(format_internal::one_line(f->parse()));
  return f;
}

GgufFile::~GgufFile() {
  if (owns_mapping_ && base_ != nullptr)
    ::munmap(const_cast<uint8_t*>(base_), static_cast<size_t>(size_));
}

Status GgufFile::parse() {
  Reader r(base_, size_, path_);
  if (size_ < 4) return Status::Errorf("{}: too small to be a GGUF file ({} bytes)", path_, size_);
  if (std::memcmp(base_, "GGUF", 4) != 0) {
    std::string shown;
    for (int k = 0; k < 4; ++k) {
      uint8_t c = base_[k];
      shown += (c >= 0x20 && c < 0x7f) ? std::string(1, static_cast<char>(c))
                                       : fmt::format("\\x{:02x}", c);
    }
    return Status::Errorf("{}: not a GGUF file (magic is \"{}\", expected \"GGUF\")", path_, shown);
  }
  uint32_t magic;
  HINGE_RETURN_IF_ERROR(r.read(&magic, "magic"));
  HINGE_RETURN_IF_ERROR(r.read(&version_, "version"));
  if (version_ == 1) {
    return Status::Errorf(
        "{}: unsupported GGUF version 1 (obsolete; re-convert the model with a "
        "current converter)",
        path_);
  }
  if (version_ != 2 && version_ != 3) {
    if ((version_ & 0xffff) == 0 && version_ != 0) {
      return Status::Errorf(
          "{}: unsupported GGUF version {} (a big-endian file? only "
          "little-endian GGUF is supported)",
          path_, version_);
    }
    return Status::Errorf("{}: unsupported GGUF version {} (supported: 2, 3)", path_, version_);
  }
  uint64_t n_tensors = 0, n_kv = 0;
  HINGE_RETURN_IF_ERROR(r.read(&n_tensors, "tensor count"));
  HINGE_RETURN_IF_ERROR(r.read(&n_kv, "metadata count"));
  if (n_kv > r.remaining() / kMinKvBytes) {
    return Status::Errorf(
        "{}: header declares {} metadata entries, more than the {} bytes left in "
        "the file can hold",
        path_, n_kv, r.remaining());
  }
  if (n_tensors > r.remaining() / kMinTensorInfoBytes) {
    return Status::Errorf(
        "{}: header declares {} tensors, more than the {} bytes left in the file "
        "can hold",
        path_, n_tensors, r.remaining());
  }

  kv_.reserve(n_kv);
  for (uint64_t k = 0; k < n_kv; ++k) {
    std::string key;
    HINGE_RETURN_IF_ERROR(
        r.read_string(&key, fmt::format("key of metadata entry {}", k), kMaxNameBytes));
    if (key.empty())
      return Status::Errorf("{}: metadata entry {} has an empty key (offset {})", path_, k,
                            r.pos());
    if (kv_index_.count(key)) return Status::Errorf("{}: duplicate metadata key '{}'", path_, key);
    ValueType type;
    HINGE_RETURN_IF_ERROR(read_value_type(r, path_, key, &type));
    Value v;
    HINGE_RETURN_IF_ERROR(read_value(r, path_, key, type, &v, 0));
    kv_index_.emplace(key, kv_.size());
    kv_.emplace_back(std::move(key), std::move(v));
  }

  if (const Value* a = find("general.alignment")) {
    auto al = a->as_uint();
    if (a->type == ValueType::ARRAY || a->type == ValueType::STRING || !al || *al == 0 ||
        (*al & (*al - 1)) != 0 || *al > kMaxAlignment) {
      return Status::Errorf(
          "{}: general.alignment must be a nonzero power of two up to {} (got "
          "{} {})",
          path_, kMaxAlignment, value_type_name(a->type),
          al ? fmt::format("{}", *al) : std::string("value"));
    }
    alignment_ = static_cast<uint32_t>(*al);
  }

  tensors_.reserve(n_tensors);
  for (uint64_t k = 0; k < n_tensors; ++k) {
    TensorInfo t;
    HINGE_RETURN_IF_ERROR(
        r.read_string(&t.name, fmt::format("name of tensor {}", k), kMaxNameBytes));
    if (t.name.empty()) return Status::Errorf("{}: tensor {} has an empty name", path_, k);
    if (tensor_index_.count(t.name))
      return Status::Errorf("{}: duplicate tensor name '{}'", path_, t.name);
    uint32_t n_dims = 0;
    HINGE_RETURN_IF_ERROR(r.read(&n_dims, "tensor dimension count"));
    if (n_dims < 1 || n_dims > 4) {
      return Status::Errorf("{}: tensor '{}' has {} dimensions (must be 1 to 4)", path_, t.name,
                            n_dims);
    }
    t.ne.resize(n_dims);
    uint64_t elems = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      HINGE_RETURN_IF_ERROR(r.read(&t.ne[d], "tensor dimension"));
      if (t.ne[d] == 0 || t.ne[d] > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        return Status::Errorf("{}: tensor '{}' has invalid size {} in dimension {}", path_, t.name,
                              t.ne[d], d);
      }
      if (!checked_mul(elems, t.ne[d], &elems) ||
          elems > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        return Status::Errorf("{}: tensor '{}' element count overflows", path_, t.name);
      }
    }
    uint32_t type_id = 0;
    HINGE_RETURN_IF_ERROR(r.read(&type_id, "tensor type"));
    auto tr = ggml_type_traits(type_id);
    if (!tr) {
      return Status::Errorf("{}: tensor '{}' has unknown type id {}", path_, t.name, type_id);
    }
    t.type = static_cast<GgmlType>(type_id);
    if (t.ne[0] % tr->block_elems != 0) {
      return Status::Errorf(
          "{}: tensor '{}' of type {} has row length {}, not a multiple of the "
          "block size {}",
          path_, t.name, tr->name, t.ne[0], tr->block_elems);
    }
    uint64_t bytes = (t.ne[0] / tr->block_elems);
    bool ok = checked_mul(bytes, tr->block_bytes, &bytes);
    for (uint32_t d = 1; d < n_dims && ok; ++d) ok = checked_mul(bytes, t.ne[d], &bytes);
    if (!ok) return Status::Errorf("{}: tensor '{}' byte size overflows", path_, t.name);
    t.num_bytes = bytes;
    HINGE_RETURN_IF_ERROR(r.read(&t.offset, "tensor data offset"));
    if (t.offset % alignment_ != 0) {
      return Status::Errorf("{}: tensor '{}' data offset {} is not a multiple of the alignment {}",
                            path_, t.name, t.offset, alignment_);
    }
    tensor_index_.emplace(t.name, tensors_.size());
    tensors_.push_back(std::move(t));
  }

  // The data section starts at the next multiple of the alignment. A file without tensors may
  // end before it (vocab-only files do).
  const uint64_t pos = r.pos();
  const uint64_t data_start = (pos + alignment_ - 1) / alignment_ * alignment_;
  data_offset_ = data_start;
  if (tensors_.empty()) return Status::Ok();
  if (data_start > size_) {
    return Status::Errorf(
        "{}: truncated file: tensor data section would start at offset {} but "
        "the file size is {}",
        path_, data_start, size_);
  }
  const uint64_t avail = size_ - data_start;
  for (TensorInfo& t : tensors_) {
    if (t.offset > avail || t.num_bytes > avail - t.offset) {
      return Status::Errorf(
          "{}: tensor '{}' data [offset {}, {} bytes] extends past end of file "
          "(data section starts at {}, file size {})",
          path_, t.name, t.offset, t.num_bytes, data_start, size_);
    }
    t.data = base_ + data_start + t.offset;
  }
  std::vector<size_t> order(tensors_.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return tensors_[a].offset < tensors_[b].offset; });
  for (size_t k = 1; k < order.size(); ++k) {
    const TensorInfo& prev = tensors_[order[k - 1]];
    const TensorInfo& cur = tensors_[order[k]];
    if (cur.offset < prev.offset + prev.num_bytes) {
      return Status::Errorf(
          "{}: tensor '{}' data [offset {}, {} bytes] overlaps tensor '{}' "
          "[offset {}, {} bytes]",
          path_, cur.name, cur.offset, cur.num_bytes, prev.name, prev.offset, prev.num_bytes);
    }
  }
  return Status::Ok();
}

const Value* GgufFile::find(std::string_view key) const {
  auto it = kv_index_.find(key);
  return it == kv_index_.end() ? nullptr : &kv_[it->second].second;
}

std::optional<int64_t> GgufFile::get_int(std::string_view key) const {
  const Value* v = find(key);
  return v ? v->as_int() : std::nullopt;
}

std::optional<uint64_t> GgufFile::get_uint(std::string_view key) const {
  const Value* v = find(key);
  return v ? v->as_uint() : std::nullopt;
}

std::optional<double> GgufFile::get_float(std::string_view key) const {
  const Value* v = find(key);
  return v ? v->as_float() : std::nullopt;
}

std::optional<bool> GgufFile::get_bool(std::string_view key) const {
  const Value* v = find(key);
  if (!v || v->type != ValueType::BOOL) return std::nullopt;
  return v->u != 0;
}

std::optional<std::string> GgufFile::get_string(std::string_view key) const {
  const Value* v = find(key);
  if (!v || v->type != ValueType::STRING) return std::nullopt;
  return v->s;
}

std::optional<std::vector<std::string>> GgufFile::get_string_array(std::string_view key) const {
  const Value* v = find(key);
  if (!v || v->type != ValueType::ARRAY || v->array_type != ValueType::STRING) return std::nullopt;
  std::vector<std::string> out;
  out.reserve(v->array.size());
  for (const Value& e : v->array) out.push_back(e.s);
  return out;
}

std::optional<std::vector<float>> GgufFile::get_float_array(std::string_view key) const {
  const Value* v = find(key);
  if (!v || v->type != ValueType::ARRAY ||
      (v->array_type != ValueType::FLOAT32 && v->array_type != ValueType::FLOAT64)) {
    return std::nullopt;
  }
  std::vector<float> out;
  out.reserve(v->array.size());
  for (const Value& e : v->array) out.push_back(static_cast<float>(e.f));
  return out;
}

std::optional<std::vector<int64_t>> GgufFile::get_int_array(std::string_view key) const {
  const Value* v = find(key);
  if (!v || v->type != ValueType::ARRAY) return std::nullopt;
  std::vector<int64_t> out;
  out.reserve(v->array.size());
  for (const Value& e : v->array) {
    if (e.type == ValueType::BOOL) return std::nullopt;
    auto x = e.as_int();
    if (!x) return std::nullopt;
    out.push_back(*x);
  }
  return out;
}

const TensorInfo* GgufFile::find_tensor(std::string_view name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

}  // namespace hinge::gguf
