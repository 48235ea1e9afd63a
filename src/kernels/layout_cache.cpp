#include "kernels/layout_cache.h"

#include <fmt/format.h>
#include <xxhash.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "common/cache_dir.h"
#include "kernels/cpu_features.h"

namespace hinge::kernels {

namespace {

constexpr int64_t kLayoutCacheVersion = 1;

std::string candidates_key(const std::vector<WeightLayout>& candidates) {
  std::string s;
  for (WeightLayout l : candidates) s += std::string(s.empty() ? "" : ",") + weight_layout_name(l);
  return s;
}

std::optional<WeightLayout> layout_by_name(const std::string& name) {
  for (WeightLayout l : {WeightLayout::kGguf, WeightLayout::kVnniPairs, WeightLayout::kRowGroups,
                         WeightLayout::kBf16Tiles})
    if (name == weight_layout_name(l)) return l;
  return std::nullopt;
}

// The file's entries when it is this CPU's and this build's; an empty array otherwise.
nlohmann::json read_entries(const std::string& path) {
  std::ifstream in(path);
  if (!in) return nlohmann::json::array();
  const nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return nlohmann::json::array();
  const auto str = [&](const char* k) {
    return j.contains(k) && j[k].is_string() ? j[k].get<std::string>() : std::string();
  };
  if (!j.contains("version") || !j["version"].is_number_integer() ||
      j["version"].get<int64_t>() != kLayoutCacheVersion || str("cpu") != cpu_label() ||
      str("build") != build_identity() || !j.contains("choices") || !j["choices"].is_array())
    return nlohmann::json::array();
  return j["choices"];
}

}  // namespace

bool layout_cache_enabled() {
  const char* v = std::getenv("HINGE_MACHINE_PROFILE");
  if (v && std::strcmp(v, "off") == 0) return false;
  return !cache_dir().empty() && !build_identity().empty();
}

std::string layout_cache_path() {
  if (!layout_cache_enabled()) return "";
  const std::string label = cpu_label();
  return fmt::format("{}/layouts-{:016x}.json", cache_dir(),
                     XXH3_64bits(label.data(), label.size()));
}

std::optional<LayoutChoice> load_cached_layout(GgmlType type,
                                               const std::vector<WeightLayout>& candidates) {
  const std::string path = layout_cache_path();
  if (path.empty()) return std::nullopt;
  const std::string key = candidates_key(candidates);
  for (const nlohmann::json& e : read_entries(path)) {
    try {
      if (!e.is_object() || e.at("type").get<std::string>() != ggml_type_name(type) ||
          e.at("candidates").get<std::string>() != key)
        continue;
      const auto layout = layout_by_name(e.at("layout").get<std::string>());
      if (!layout || std::find(candidates.begin(), candidates.end(), *layout) == candidates.end())
        return std::nullopt;  // not a layout of this set: measured again
      LayoutChoice c;
      c.type = type;
      c.layout = *layout;
      c.reason = "calibrated on this CPU, cached";
      if (e.contains("timings") && e["timings"].is_array())
        for (const nlohmann::json& t : e["timings"]) {
          const auto l = layout_by_name(t.at("layout").get<std::string>());
          const double d = t.at("decode_us").get<double>(), p = t.at("prefill_us").get<double>();
          if (!l || !(d > 0 && d < 1e9) || !(p > 0 && p < 1e9)) return std::nullopt;
          c.timings.push_back({*l, d, p});
        }
      return c;
    } catch (const nlohmann::json::exception&) {
      return std::nullopt;  // a damaged entry is measured again, not trusted
    }
  }
  return std::nullopt;
}

Status save_cached_layout(const LayoutChoice& c, const std::vector<WeightLayout>& candidates) {
  const std::string path = layout_cache_path();
  if (path.empty()) return Status::Ok();
  const std::string key = candidates_key(candidates);
  nlohmann::ordered_json choices = nlohmann::ordered_json::array();
  for (const nlohmann::json& e : read_entries(path)) {
    if (!e.is_object()) continue;
    const bool same = e.contains("type") && e["type"] == std::string(ggml_type_name(c.type)) &&
                      e.contains("candidates") && e["candidates"] == key;
    if (!same) choices.push_back(nlohmann::ordered_json::parse(e.dump()));
  }
  nlohmann::ordered_json entry;
  entry["type"] = std::string(ggml_type_name(c.type));
  entry["candidates"] = key;
  entry["layout"] = weight_layout_name(c.layout);
  nlohmann::ordered_json timings = nlohmann::ordered_json::array();
  for (const LayoutTiming& t : c.timings)
    timings.push_back({{"layout", weight_layout_name(t.layout)},
                       {"decode_us", t.decode_us},
                       {"prefill_us", t.prefill_us}});
  entry["timings"] = timings;
  entry["measured_unix"] = std::chrono::duration_cast<std::chrono::seconds>(
                               std::chrono::system_clock::now().time_since_epoch())
                               .count();
  choices.push_back(entry);
  nlohmann::ordered_json j;
  j["version"] = kLayoutCacheVersion;
  j["cpu"] = cpu_label();
  j["build"] = build_identity();
  j["choices"] = choices;
  return write_file_atomically(path, j.dump(2) + "\n");
}

}  // namespace hinge::kernels
