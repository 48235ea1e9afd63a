// `hinge kv-size`: the KV cache a model needs per token, per request and per batch
// (plan/kv_size.h), for a preset, a model file or a shape given by flags, with the attention
// variants (MHA / GQA / MQA / MLA) and KV dtypes side by side, and how many requests fit in
// common accelerator memory sizes (KV only, before the weights).
#include <cmath>
#include <cstdio>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "common/units.h"
#include "model/loaded_model.h"
#include "plan/kv_size.h"

namespace hinge::cli {
namespace {

using plan::KvShape;

// 10,737,418,240
std::string grouped(double bytes) {
  std::string digits = fmt::format("{:.0f}", std::round(bytes));
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

// "10.74 GB (10.00 GiB)"
std::string gb(double bytes) { return fmt::format("{:.2f} GB ({:.2f} GiB)", bytes / 1e9, bytes / 1073741824.0); }

std::string per_token(double bytes) {
  return bytes >= 1048576 ? fmt::format("{:.2f} MiB", bytes / 1048576.0)
                          : fmt::format("{:.1f} KiB", bytes / 1024.0);
}

StatusOr<KvShape> shape_from(const KvSizeArgs& a) {
  const int given = (!a.preset.empty()) + (!a.model.empty()) + (a.layers > 0);
  if (given != 1)
    return Status::Error(given == 0 ? "give a model: --preset NAME (--list shows them), -m FILE, "
                                      "or --layers, --heads, --kv-heads and --head-dim"
                                    : "give one model: --preset, -m or the shape flags");
  if (!a.preset.empty()) {
    const KvShape* p = plan::find_kv_preset(a.preset);
    if (p == nullptr) return Status::Errorf("unknown preset '{}'; --list shows them", a.preset);
    return *p;
  }
  if (!a.model.empty()) {
    LoadOptions o;
    o.tokenizer_path = a.tokenizer;
    o.require_vocab = false;  // the shape is all it needs
    HINGE_ASSIGN_OR_RETURN(auto m, load_model(a.model, o));
    KvShape s = plan::kv_shape_of(m->config, a.model);
    s.params_billion = static_cast<double>(m->num_parameters()) / 1e9;
    return s;
  }
  if (a.heads <= 0 || a.head_dim <= 0)
    return Status::Error("--layers needs --heads and --head-dim (and --kv-heads; default: --heads)");
  KvShape s;
  s.name = "custom";
  s.layers = static_cast<int32_t>(a.layers);
  s.heads = static_cast<int32_t>(a.heads);
  s.kv_heads = static_cast<int32_t>(a.kv_heads > 0 ? a.kv_heads : a.heads);
  s.head_dim = static_cast<int32_t>(a.head_dim);
  s.window = static_cast<int32_t>(a.window);
  s.local_layers = static_cast<int32_t>(a.local_layers);
  s.source = "flags";
  if (s.kv_heads > s.heads) return Status::Error("--kv-heads cannot exceed --heads");
  if (s.window > 0 && (s.local_layers <= 0 || s.local_layers > s.layers))
    return Status::Error("--window needs --local-layers in [1, --layers]");
  return s;
}

}  // namespace

int kv_size_command(const KvSizeArgs& a) {
  if (a.list) {
    for (const KvShape& p : plan::kv_presets())
      std::printf("%-16s %3d layers, %3d heads, %3d KV heads of %3d%s%s  (%s)\n", p.name.c_str(),
                  p.layers, p.heads, p.kv_heads, p.head_dim,
                  p.window > 0 ? fmt::format(", {} local layers of window {}", p.local_layers,
                                             p.window).c_str() : "",
                  p.mla_rank > 0 ? fmt::format(", MLA latent {} + RoPE {}", p.mla_rank,
                                               p.mla_rope_dim).c_str() : "",
                  p.source.c_str());
    return 0;
  }
  auto made = shape_from(a);
  if (!made.ok()) return fail(made.status().message());
  KvShape s = *made;
  if (a.mla_rank > 0) {
    s.mla_rank = static_cast<int32_t>(a.mla_rank);
    s.mla_rope_dim = static_cast<int32_t>(a.mla_rope_dim);
  }
  if (s.layers <= 0 || s.heads <= 0 || s.kv_heads <= 0 || s.head_dim <= 0)
    return fail("the shape needs positive layers, heads, KV heads and head dim");
  const int64_t context = a.context > 0 ? a.context : (s.max_context > 0 ? s.max_context : 4096);
  if (a.batch < 1) return fail("--batch must be >= 1");
  const auto bytes = plan::kv_element_bytes(a.dtype);
  if (!bytes)
    return fail(fmt::format("--dtype: unknown KV dtype '{}'; expected f32, f16, bf16, fp8, int8 "
                            "or int4", a.dtype));
  const double batch = static_cast<double>(a.batch);
  const double req = plan::kv_bytes_per_request(s, context, *bytes);
  const std::vector<plan::KvVariant> variants = plan::kv_variants(s);
  const char* dtypes[] = {"f32", "f16", "fp8", "int8", "int4"};
  const double memories_gb[] = {24, 40, 80, 141, 192};

  if (a.json) {
    nlohmann::ordered_json j;
    j["model"] = s.name;
    j["source"] = s.source;
    j["shape"] = {{"layers", s.layers}, {"heads", s.heads}, {"kv_heads", s.kv_heads},
                  {"head_dim", s.head_dim}, {"window", s.window},
                  {"local_layers", s.local_layers}, {"mla_rank", s.mla_rank},
                  {"mla_rope_dim", s.mla_rope_dim}};
    j["context"] = context;
    j["batch"] = a.batch;
    j["dtype"] = a.dtype;
    j["per_token_bytes"] = plan::kv_bytes_per_token(s, context, *bytes);
    j["per_request_bytes"] = req;
    j["per_batch_bytes"] = req * batch;
    j["variants"] = nlohmann::ordered_json::array();
    for (const plan::KvVariant& v : variants) {
      const double r = plan::kv_bytes_per_request(v.shape, context, *bytes);
      j["variants"].push_back({{"label", v.label}, {"model", v.is_model},
                               {"per_token_bytes", r / static_cast<double>(context)},
                               {"per_request_bytes", r}, {"per_batch_bytes", r * batch}});
    }
    j["dtypes"] = nlohmann::ordered_json::array();
    for (const char* d : dtypes) {
      const double r = plan::kv_bytes_per_request(s, context, *plan::kv_element_bytes(d));
      j["dtypes"].push_back({{"dtype", d}, {"per_request_bytes", r}, {"per_batch_bytes", r * batch}});
    }
    j["fits"] = nlohmann::ordered_json::array();
    for (double m : memories_gb)
      j["fits"].push_back({{"memory_gb", m},
                           {"requests", plan::requests_that_fit(s, context, *bytes, m * 1e9)}});
    std::puts(j.dump().c_str());
    return 0;
  }

  std::printf("%s (%s): %d layers, %d heads, %d KV heads of %d%s%s; context %lld, batch %lld, "
              "KV %s\n\n",
              s.name.c_str(), s.source.c_str(), s.layers, s.heads, s.kv_heads, s.head_dim,
              s.window > 0 ? fmt::format(", {} local layers of window {}", s.local_layers,
                                         s.window).c_str() : "",
              s.mla_rank > 0 ? fmt::format(", MLA latent {} + RoPE {}", s.mla_rank,
                                           s.mla_rope_dim).c_str() : "",
              static_cast<long long>(context), static_cast<long long>(a.batch), a.dtype.c_str());
  std::printf("%-30s %12s %26s %26s\n", "attention", "per token", "per request",
              fmt::format("per batch of {}", a.batch).c_str());
  for (const plan::KvVariant& v : variants) {
    const double r = plan::kv_bytes_per_request(v.shape, context, *bytes);
    std::printf("%-30s %12s %26s %26s\n", (v.label + (v.is_model ? " *" : "")).c_str(),
                per_token(r / static_cast<double>(context)).c_str(), gb(r).c_str(),
                gb(r * batch).c_str());
  }
  std::printf("\n%-30s %12s %26s %26s\n", "KV dtype (the model's attention)", "per token",
              "per request", fmt::format("per batch of {}", a.batch).c_str());
  for (const char* d : dtypes) {
    const double r = plan::kv_bytes_per_request(s, context, *plan::kv_element_bytes(d));
    std::printf("%-30s %12s %26s %26s\n",
                (std::string(d) + (plan::kv_element_bytes(d) == bytes ? " *" : "")).c_str(),
                per_token(r / static_cast<double>(context)).c_str(), gb(r).c_str(),
                gb(r * batch).c_str());
  }
  std::printf("\nper request: %s bytes; per batch of %lld: %s bytes\n", grouped(req).c_str(),
              static_cast<long long>(a.batch), grouped(req * batch).c_str());
  std::printf("requests of %lld tokens that fit, KV alone (before the weights):",
              static_cast<long long>(context));
  std::string exceeded;
  for (double m : memories_gb) {
    const int64_t n = plan::requests_that_fit(s, context, *bytes, m * 1e9);
    std::printf(" %.0f GB: %lld%s", m, static_cast<long long>(n), m == memories_gb[4] ? "\n" : " |");
    if (req * batch > m * 1e9)
      exceeded += fmt::format("{}{:.0f} GB", exceeded.empty() ? "" : ", ", m);
  }
  if (!exceeded.empty())
    std::printf("a batch of %lld needs %.2f GB of KV: more than %s\n",
                static_cast<long long>(a.batch), req * batch / 1e9, exceeded.c_str());
  return 0;
}

}  // namespace hinge::cli
