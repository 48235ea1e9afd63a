// The table of model families: a new family is one file in this folder plus one line here.
#include <array>

#include <fmt/format.h>

#include "model/family.h"

namespace hinge {

extern const Family kLlamaFamily, kQwen2Family, kQwen3Family, kGemma2Family, kGemma3Family,
    kPhi3Family, kGraniteFamily, kOlmo2Family, kMistral3Family;

namespace {
const std::array<const Family*, 9> kFamilies = {
    &kLlamaFamily, &kQwen2Family,   &kQwen3Family, &kGemma2Family,   &kGemma3Family,
    &kPhi3Family,  &kGraniteFamily, &kOlmo2Family, &kMistral3Family,
};
}  // namespace

std::span<const Family* const> all_families() { return kFamilies; }

const Family* find_family_by_arch(std::string_view arch) {
  for (const Family* f : kFamilies)
    for (std::string_view a : f->gguf_archs)
      if (a == arch) return f;
  return nullptr;
}

const Family* find_family_by_hf_type(std::string_view model_type) {
  for (const Family* f : kFamilies)
    if (f->hf_metadata)
      for (std::string_view t : f->hf_model_types)
        if (t == model_type) return f;
  return nullptr;
}

std::string supported_architectures() {
  std::string out;
  for (const Family* f : kFamilies) {
    if (!out.empty()) out += ", ";
    out += f->name;
  }
  return out;
}

}  // namespace hinge
