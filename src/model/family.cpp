#include "model/family.h"

#include <cmath>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace hinge {

const gguf::Value* HparamReader::find(std::string_view key) const {
  const std::string full = arch_ + "." + std::string(key);
  for (const auto& [k, v] : md_)
    if (k == full) return &v;
  return nullptr;
}

std::optional<int64_t> HparamReader::get_int(std::string_view key) const {
  const gguf::Value* v = find(key);
  if (!v || v->type == gguf::ValueType::ARRAY || v->type == gguf::ValueType::STRING) return std::nullopt;
  return v->as_int();
}

std::optional<double> HparamReader::get_float(std::string_view key) const {
  const gguf::Value* v = find(key);
  if (!v || v->type == gguf::ValueType::ARRAY || v->type == gguf::ValueType::STRING) return std::nullopt;
  return v->as_float();
}

std::optional<std::string> HparamReader::get_string(std::string_view key) const {
  const gguf::Value* v = find(key);
  if (!v || v->type != gguf::ValueType::STRING) return std::nullopt;
  return v->s;
}

std::optional<bool> HparamReader::get_bool(std::string_view key) const {
  const gguf::Value* v = find(key);
  if (!v || v->type != gguf::ValueType::BOOL) return std::nullopt;
  return v->as_int().value_or(0) != 0;
}

StatusOr<int64_t> HparamReader::need_int(std::string_view key) const {
  const gguf::Value* v = find(key);
  if (!v) return Status::Errorf("{}: missing metadata '{}.{}'", source_, arch_, key);
  if (v->type == gguf::ValueType::ARRAY) {
    // Per-layer arrays (llama.cpp's get_key_or_arr): hinge runs them when every layer agrees.
    if (v->array.empty()) return Status::Errorf("{}: empty array '{}.{}'", source_, arch_, key);
    auto first = v->array[0].as_int();
    for (const gguf::Value& e : v->array)
      if (!first || e.as_int() != first)
        return Status::Errorf("{}: '{}.{}' differs between layers, which hinge does not run",
                              source_, arch_, key);
    return *first;
  }
  auto i = v->as_int();
  if (!i) return Status::Errorf("{}: metadata '{}.{}' is not an integer", source_, arch_, key);
  return *i;
}

namespace {
float get_f(const HparamReader& hp, std::string_view key, float def) {
  return static_cast<float>(hp.get_float(key).value_or(def));
}
}  // namespace

Status load_common_hparams(const HparamReader& hp, ModelConfig& c) {
  c.architecture = hp.arch();
  HINGE_ASSIGN_OR_RETURN(c.dim, hp.need_int("embedding_length"));
  HINGE_ASSIGN_OR_RETURN(c.n_layers, hp.need_int("block_count"));
  HINGE_ASSIGN_OR_RETURN(c.n_heads, hp.need_int("attention.head_count"));
  HINGE_ASSIGN_OR_RETURN(c.ffn_dim, hp.need_int("feed_forward_length"));
  c.n_kv_heads = c.n_heads;
  if (hp.find("attention.head_count_kv")) {
    HINGE_ASSIGN_OR_RETURN(c.n_kv_heads, hp.need_int("attention.head_count_kv"));
  }
  c.context_length = hp.get_int("context_length").value_or(2048);
  // Bounds before anything is sized by them (ModelConfig::validate checks the rest).
  if (c.n_layers <= 0 || c.n_layers > 1024)
    return Status::Errorf("{}: block count {} is invalid", hp.source(), c.n_layers);
  if (c.n_heads <= 0 || c.n_heads > (1 << 17))
    return Status::Errorf("{}: head count {} is invalid", hp.source(), c.n_heads);
  c.head_dim = hp.get_int("attention.key_length").value_or(c.dim / c.n_heads);
  const int64_t v_len = hp.get_int("attention.value_length").value_or(c.head_dim);
  if (v_len != c.head_dim)
    return Status::Errorf("{}: value head size {} differs from the key head size {}, which hinge "
                          "does not run", hp.source(), v_len, c.head_dim);
  c.rms_eps = get_f(hp, "attention.layer_norm_rms_epsilon", 1e-5f);

  RopeConfig& r = c.rope;
  if (c.family) r.style = c.family->rope_style;
  r.n_rot = hp.get_int("rope.dimension_count").value_or(c.head_dim);
  r.theta = get_f(hp, "rope.freq_base", 10000.0f);
  const std::string scaling = hp.get_string("rope.scaling.type").value_or("linear");
  const float factor = get_f(hp, "rope.scaling.factor", get_f(hp, "rope.scale_linear", 0.0f));
  r.freq_scale = factor == 0.0f ? 1.0f : 1.0f / factor;
  if (scaling == "none") {
    r.freq_scale = 1.0f;
  } else if (scaling != "linear" && scaling != "yarn" && scaling != "longrope") {
    return Status::Errorf("{}: rope scaling type '{}' is not supported (none, linear, yarn, "
                          "longrope are)", hp.source(), scaling);
  }
  r.n_ctx_orig = hp.get_int("rope.scaling.original_context_length").value_or(c.context_length);
  r.ext_factor = scaling == "yarn" ? 1.0f : 0.0f;
  r.scaling_attn_factor = get_f(hp, "rope.scaling.attn_factor", 1.0f);
  finish_rope_attn_factor(r);
  // Local (sliding-window) layers: llama.cpp's defaults (base 10000, no scaling) unless the
  // family or the file says otherwise.
  c.rope_local = r;
  c.rope_local.theta = 10000.0f;
  c.rope_local.freq_scale = 1.0f;
  c.rope_local.n_rot = hp.get_int("rope.dimension_count_swa").value_or(r.n_rot);
  c.layer_kind.assign(static_cast<size_t>(std::max<int64_t>(c.n_layers, 0)), LayerKind::kAttention);
  return Status::Ok();
}

StatusOr<int32_t> read_sliding_window(const HparamReader& hp, int64_t default_window) {
  const int64_t w = hp.get_int("attention.sliding_window").value_or(default_window);
  if (w < 0 || w > (1 << 24))
    return Status::Errorf("{}: sliding window {} is out of range", hp.source(), w);
  return static_cast<int32_t>(w);
}

Status set_swa_pattern(const HparamReader& hp, ModelConfig& c, int64_t default_period,
                       bool dense_first) {
  const int64_t n = c.n_layers;
  c.layer_local.assign(static_cast<size_t>(n), 0);
  const gguf::Value* v = hp.find("attention.sliding_window_pattern");
  if (v && v->type == gguf::ValueType::ARRAY) {
    if (static_cast<int64_t>(v->array.size()) < n)
      return Status::Errorf("{}: sliding_window_pattern has {} entries for {} layers", hp.source(),
                            v->array.size(), n);
    for (int64_t l = 0; l < n; ++l)
      c.layer_local[static_cast<size_t>(l)] = v->array[static_cast<size_t>(l)].as_int().value_or(0) != 0;
    return Status::Ok();
  }
  int64_t period = default_period;
  if (v) {
    auto p = v->as_int();
    if (!p || *p < 0 || *p > 1 << 16)
      return Status::Errorf("{}: sliding_window_pattern is not a layer period", hp.source());
    period = *p;
  }
  for (int64_t l = 0; l < n; ++l)
    c.layer_local[static_cast<size_t>(l)] =
        period == 0 || (dense_first ? l % period != 0 : l % period < period - 1);
  return Status::Ok();
}

void finish_rope_attn_factor(RopeConfig& r) {
  // The cos/sin magnitude, as llama_context derives yarn_attn_factor.
  float attn_factor = 1.0f;
  if (r.ext_factor != 0.0f && r.freq_scale > 0.0f) {
    auto mscale = [](float scale, float m) {
      return scale <= 1.0f ? 1.0f : 0.1f * m * std::log(scale) + 1.0f;
    };
    const float f = 1.0f / r.freq_scale;
    attn_factor = r.yarn_log_mul != 0.0f ? mscale(f, 1.0f) / mscale(f, r.yarn_log_mul)
                                         : mscale(f, 1.0f);
    attn_factor *= 1.0f / (1.0f + 0.1f * std::log(f));
  }
  r.attn_factor = attn_factor * r.scaling_attn_factor;
}

int64_t ModelConfig::num_local_layers() const {
  int64_t k = 0;
  for (uint8_t f : layer_local) k += f != 0;
  return k;
}

namespace {
template <typename T>
std::optional<T> json_get(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::nullopt;
  if constexpr (std::is_integral_v<T>) {
    if (!it->is_number_integer()) return std::nullopt;
  } else {
    if (!it->is_number()) return std::nullopt;
  }
  return it->get<T>();
}
}  // namespace

Status hf_common_metadata(const nlohmann::json& j, const std::string& arch,
                          const std::string& source, Metadata& out) {
  auto need = [&](const char* hf, const char* key) -> Status {
    auto v = json_get<int64_t>(j, hf);
    if (!v || *v <= 0 || *v > (int64_t{1} << 31))
      return Status::Errorf("{}: missing or invalid integer '{}'", source, hf);
    out.emplace_back(arch + "." + key, gguf::Value::u32(static_cast<uint32_t>(*v)));
    return Status::Ok();
  };
  HINGE_RETURN_IF_ERROR(need("hidden_size", "embedding_length"));
  HINGE_RETURN_IF_ERROR(need("num_hidden_layers", "block_count"));
  HINGE_RETURN_IF_ERROR(need("num_attention_heads", "attention.head_count"));
  HINGE_RETURN_IF_ERROR(need("intermediate_size", "feed_forward_length"));
  HINGE_RETURN_IF_ERROR(need("vocab_size", "vocab_size"));
  auto bounded = [](std::optional<int64_t> v) {
    return v && *v > 0 && *v <= (int64_t{1} << 31) ? v : std::nullopt;
  };
  if (auto v = bounded(json_get<int64_t>(j, "num_key_value_heads")))
    out.emplace_back(arch + ".attention.head_count_kv", gguf::Value::u32(static_cast<uint32_t>(*v)));
  if (auto v = bounded(json_get<int64_t>(j, "head_dim"))) {
    out.emplace_back(arch + ".attention.key_length", gguf::Value::u32(static_cast<uint32_t>(*v)));
    out.emplace_back(arch + ".attention.value_length", gguf::Value::u32(static_cast<uint32_t>(*v)));
  }
  if (auto v = bounded(json_get<int64_t>(j, "max_position_embeddings")))
    out.emplace_back(arch + ".context_length", gguf::Value::u32(static_cast<uint32_t>(*v)));
  if (auto v = json_get<double>(j, "rms_norm_eps"))
    out.emplace_back(arch + ".attention.layer_norm_rms_epsilon", gguf::Value::f32(static_cast<float>(*v)));
  if (auto v = json_get<double>(j, "rope_theta"))
    out.emplace_back(arch + ".rope.freq_base", gguf::Value::f32(static_cast<float>(*v)));
  const auto use_swa = j.find("use_sliding_window");
  const bool swa_on = use_swa == j.end() || !use_swa->is_boolean() || use_swa->get<bool>();
  if (auto v = json_get<int64_t>(j, "sliding_window"); v && swa_on && *v > 0 && *v <= (1 << 24))
    out.emplace_back(arch + ".attention.sliding_window", gguf::Value::u32(static_cast<uint32_t>(*v)));
  return hf_rope_scaling(j, arch, source, out);
}

Status hf_rope_scaling(const nlohmann::json& j, const std::string& arch, const std::string& source,
                       Metadata& out) {
  auto it = j.find("rope_scaling");
  if (it == j.end() || !it->is_object()) return Status::Ok();
  const auto& rs = *it;
  auto str = [&](const char* key) {
    return rs.contains(key) && rs[key].is_string() ? rs[key].get<std::string>() : std::string();
  };
  const std::string type = !str("rope_type").empty() ? str("rope_type") : str("type");
  auto f32 = [&](const char* key, float def) {
    if (!rs.contains(key) || !rs[key].is_number()) return def;
    const double v = rs[key].get<double>();
    return std::isfinite(v) && std::fabs(v) < 1e9 ? static_cast<float>(v) : def;
  };
  if (type.empty() || type == "default") return Status::Ok();
  if (type == "linear" || type == "yarn") {
    out.emplace_back(arch + ".rope.scaling.type", gguf::Value::str(type));
    out.emplace_back(arch + ".rope.scaling.factor", gguf::Value::f32(f32("factor", 1.0f)));
    if (const float orig = f32("original_max_position_embeddings", 0); orig >= 1 && orig <= (1 << 24))
      out.emplace_back(arch + ".rope.scaling.original_context_length",
                       gguf::Value::u32(static_cast<uint32_t>(orig)));
    if (type == "yarn") {
      if (rs.contains("beta_fast"))
        out.emplace_back(arch + ".rope.scaling.yarn_beta_fast", gguf::Value::f32(f32("beta_fast", 32)));
      if (rs.contains("beta_slow"))
        out.emplace_back(arch + ".rope.scaling.yarn_beta_slow", gguf::Value::f32(f32("beta_slow", 1)));
    }
    return Status::Ok();
  }
  if (type == "llama3") {  // factors computed by the loader into rope_freqs (hinge keys)
    out.emplace_back(arch + ".rope.scaling.type", gguf::Value::str("none"));
    out.emplace_back("hinge.llama3.factor", gguf::Value::f32(f32("factor", 8.0f)));
    out.emplace_back("hinge.llama3.low_freq_factor", gguf::Value::f32(f32("low_freq_factor", 1.0f)));
    out.emplace_back("hinge.llama3.high_freq_factor", gguf::Value::f32(f32("high_freq_factor", 4.0f)));
    out.emplace_back("hinge.llama3.original_context",
                     gguf::Value::f32(f32("original_max_position_embeddings", 8192.0f)));
    return Status::Ok();
  }
  return Status::Errorf("{}: rope_scaling type '{}' is not supported (linear, yarn, llama3 are)",
                        source, type);
}

}  // namespace hinge
