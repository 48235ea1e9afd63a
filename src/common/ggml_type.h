// Tensor element types with GGUF's numbering and exact block layouts (ggml's ggml_type).
// Quantized types store blocks of `block_elems` values in `block_bytes` bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace hinge {

enum class GgmlType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q8_1 = 9,
  Q2_K = 10,
  Q3_K = 11,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  Q8_K = 15,
  I8 = 24,
  I16 = 25,
  I32 = 26,
  I64 = 27,
  F64 = 28,
  BF16 = 30,
};

struct GgmlTypeTraits {
  std::string_view name;  // "f32", "q4_K", ... (ggml's spelling)
  uint32_t block_elems;   // values per block (1 for plain types)
  uint32_t block_bytes;   // bytes per block
  bool supported;         // hinge can compute with it (dequantize + matmul)
};

// Traits for a known type id, or nullopt for ids hinge does not know (treat as corrupt input).
std::optional<GgmlTypeTraits> ggml_type_traits(uint32_t type_id);
inline std::optional<GgmlTypeTraits> ggml_type_traits(GgmlType t) {
  return ggml_type_traits(static_cast<uint32_t>(t));
}
std::string_view ggml_type_name(GgmlType t);
// Parses "f32", "f16", "bf16", "q8_0", "q4_0", "q4_k"/"q4_K", "q6_k" (case-insensitive).
std::optional<GgmlType> ggml_type_from_name(std::string_view name);

// Bytes needed for one row of `n` elements (n must be a multiple of block_elems).
inline size_t ggml_row_bytes(const GgmlTypeTraits& tr, uint64_t n) {
  return static_cast<size_t>(n / tr.block_elems) * tr.block_bytes;
}

// Block layouts (packed, little-endian, exactly as in ggml).
constexpr int kQK8_0 = 32;  // block_q8_0 { f16 d; int8 qs[32]; }                 34 bytes
constexpr int kQK4_0 = 32;  // block_q4_0 { f16 d; uint8 qs[16]; }                18 bytes
constexpr int kQK_K = 256;  // super-block size of the k-quants
// block_q4_K { f16 d; f16 dmin; uint8 scales[12]; uint8 qs[128]; }                144 bytes
// block_q6_K { uint8 ql[128]; uint8 qh[64]; int8 scales[16]; f16 d; }            210 bytes
// block_q8_K { float d; int8 qs[256]; int16 bsums[16]; }                         292 bytes

}  // namespace hinge
