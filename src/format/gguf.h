// GGUF v2/v3 reader (over mmap or caller-owned memory) and writer.
// Spec: https://github.com/ggml-org/ggml/blob/master/docs/gguf.md
// Every offset, count and shape read from a file is validated against the file size and sane
// limits; a corrupt file yields a Status naming the file and the problem, never a crash.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/ggml_type.h"
#include "common/status.h"

namespace hinge::gguf {

enum class ValueType : uint32_t {
  UINT8 = 0,
  INT8 = 1,
  UINT16 = 2,
  INT16 = 3,
  UINT32 = 4,
  INT32 = 5,
  FLOAT32 = 6,
  BOOL = 7,
  STRING = 8,
  ARRAY = 9,
  UINT64 = 10,
  INT64 = 11,
  FLOAT64 = 12,
};
std::string_view value_type_name(ValueType t);

// One metadata value. Scalars live in the matching field; arrays hold their elements in `array`
// (elements may themselves be arrays: nested arrays are legal GGUF).
struct Value {
  ValueType type = ValueType::UINT32;
  uint64_t u = 0;                            // UINT8/16/32/64, BOOL (0/1)
  int64_t i = 0;                             // INT8/16/32/64
  double f = 0;                              // FLOAT32/64
  std::string s;                             // STRING
  ValueType array_type = ValueType::UINT32;  // ARRAY: element type
  std::vector<Value> array;                  // ARRAY: elements

  static Value u8(uint8_t v);
  static Value u32(uint32_t v);
  static Value i32(int32_t v);
  static Value u64(uint64_t v);
  static Value f32(float v);
  static Value boolean(bool v);
  static Value str(std::string v);
  static Value str_array(const std::vector<std::string>& v);
  static Value f32_array(const std::vector<float>& v);
  static Value i32_array(const std::vector<int32_t>& v);
  // The remaining scalar types and generic (possibly nested) arrays; every element of `elems`
  // must have type `elem_type` (GgufWriter::write checks).
  static Value i8(int8_t v);
  static Value u16(uint16_t v);
  static Value i16(int16_t v);
  static Value i64(int64_t v);
  static Value f64(double v);
  static Value make_array(ValueType elem_type, std::vector<Value> elems);

  // Numeric views with range checks: nullopt when the type does not convert (string, array,
  // negative value as unsigned, out of range).
  std::optional<int64_t> as_int() const;
  std::optional<uint64_t> as_uint() const;
  std::optional<double> as_float() const;
};

struct TensorInfo {
  std::string name;
  std::vector<uint64_t> ne;  // ne[0] is the innermost (contiguous) dimension, as in ggml
  GgmlType type = GgmlType::F32;
  uint64_t offset = 0;            // relative to the start of the data section
  uint64_t num_bytes = 0;         // validated: offset + num_bytes <= data section size
  const uint8_t* data = nullptr;  // points into the mapping
  uint64_t num_elements() const;
};

class GgufFile {
 public:
  // Maps the file read-only. The returned object owns the mapping.
  static StatusOr<std::unique_ptr<GgufFile>> open(const std::string& path);
  // Parses caller-owned memory (kept alive by the caller for the object's lifetime).
  static StatusOr<std::unique_ptr<GgufFile>> from_memory(const uint8_t* data, size_t size,
                                                         std::string name);
  ~GgufFile();
  GgufFile(const GgufFile&) = delete;
  GgufFile& operator=(const GgufFile&) = delete;

  const std::string& path() const { return path_; }
  uint32_t version() const { return version_; }
  // The whole file when this object mapped it (open), empty for from_memory: read-only private
  // pages that can be dropped (madvise) and are read back from the file on the next access.
  std::span<const uint8_t> file_mapping() const {
    return owns_mapping_ ? std::span<const uint8_t>(base_, size_) : std::span<const uint8_t>();
  }
  uint64_t file_size() const { return size_; }
  uint32_t alignment() const { return alignment_; }
  // File offset of the data section (tensor offsets are relative to it); aligned.
  uint64_t data_offset() const { return data_offset_; }

  // Metadata in file order.
  const std::vector<std::pair<std::string, Value>>& metadata() const { return kv_; }
  const Value* find(std::string_view key) const;
  std::optional<int64_t> get_int(std::string_view key) const;
  std::optional<uint64_t> get_uint(std::string_view key) const;
  std::optional<double> get_float(std::string_view key) const;
  std::optional<bool> get_bool(std::string_view key) const;
  std::optional<std::string> get_string(std::string_view key) const;
  // Array getters return nullopt when the key is missing or the element type is wrong.
  std::optional<std::vector<std::string>> get_string_array(std::string_view key) const;
  std::optional<std::vector<float>> get_float_array(std::string_view key) const;
  std::optional<std::vector<int64_t>> get_int_array(std::string_view key) const;

  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const TensorInfo* find_tensor(std::string_view name) const;

 private:
  GgufFile() = default;
  Status parse();

  std::string path_;
  const uint8_t* base_ = nullptr;
  uint64_t size_ = 0;
  bool owns_mapping_ = false;
  uint32_t version_ = 0;
  uint32_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  std::vector<std::pair<std::string, Value>> kv_;
  std::map<std::string, size_t, std::less<>> kv_index_;
  std::vector<TensorInfo> tensors_;
  std::map<std::string, size_t, std::less<>> tensor_index_;
};

// Builds a GGUF v3 file. Keys and tensors are written in insertion order; tensor data is aligned
// to general.alignment (32 unless set).
class GgufWriter {
 public:
  void set(const std::string& key, Value value);  // replaces an existing key
  // `data` must hold exactly ggml_row_bytes(type, ne[0]) * prod(ne[1..]) bytes; it is copied.
  Status add_tensor(const std::string& name, GgmlType type, std::vector<uint64_t> ne,
                    const void* data, size_t num_bytes);
  Status write(const std::string& path) const;  // writes to path.tmp then renames

 private:
  struct PendingTensor {
    std::string name;
    GgmlType type;
    std::vector<uint64_t> ne;
    std::vector<uint8_t> data;
  };
  std::vector<std::pair<std::string, Value>> kv_;
  std::vector<PendingTensor> tensors_;
};

}  // namespace hinge::gguf
