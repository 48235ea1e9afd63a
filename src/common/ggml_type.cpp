#include "common/ggml_type.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <string>

namespace hinge {
namespace {

struct Entry {
  uint32_t id;
  GgmlTypeTraits traits;
};

constexpr std::array<Entry, 20> kTypes = {{
    {0, {"f32", 1, 4, true}},
    {1, {"f16", 1, 2, true}},
    {2, {"q4_0", 32, 18, true}},
    {3, {"q4_1", 32, 20, false}},
    {6, {"q5_0", 32, 22, false}},
    {7, {"q5_1", 32, 24, false}},
    {8, {"q8_0", 32, 34, true}},
    {9, {"q8_1", 32, 36, false}},
    {10, {"q2_K", 256, 84, false}},
    {11, {"q3_K", 256, 110, false}},
    {12, {"q4_K", 256, 144, true}},
    {13, {"q5_K", 256, 176, true}},
    {14, {"q6_K", 256, 210, true}},
    {15, {"q8_K", 256, 292, false}},
    {24, {"i8", 1, 1, false}},
    {25, {"i16", 1, 2, false}},
    {26, {"i32", 1, 4, false}},
    {27, {"i64", 1, 8, false}},
    {28, {"f64", 1, 8, false}},
    {30, {"bf16", 1, 2, true}},
}};

}  // namespace

std::optional<GgmlTypeTraits> ggml_type_traits(uint32_t type_id) {
  for (const auto& e : kTypes)
    if (e.id == type_id) return e.traits;
  return std::nullopt;
}

std::string_view ggml_type_name(GgmlType t) {
  auto tr = ggml_type_traits(t);
  return tr ? tr->name : std::string_view("unknown");
}

std::optional<GgmlType> ggml_type_from_name(std::string_view name) {
  std::string lower(name);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  for (const auto& e : kTypes) {
    std::string n(e.traits.name);
    std::transform(n.begin(), n.end(), n.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    if (n == lower) return static_cast<GgmlType>(e.id);
  }
  return std::nullopt;
}

}  // namespace hinge
