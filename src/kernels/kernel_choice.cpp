#include "kernels/kernel_choice.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <random>

#include "common/cache_dir.h"
#include "common/half.h"
#include "common/thread_pool.h"
#include "kernels/cpu_features.h"
#include "kernels/layout_cache.h"
#include "kernels/matmul.h"
#include "kernels/matmul_packed.h"
#include "kernels/quant_block.h"
#include "kernels/quant_ref.h"

namespace hinge::kernels {

namespace {

constexpr int64_t kRows = 1024, kCols = 4096, kPrefillTokens = 64;
constexpr int kRuns = 11;  // decode; 64 tokens: 3

std::mutex g_mu;
// Key: type and the candidate set (bits), so a test that switches a path off chooses again.
std::map<std::pair<GgmlType, unsigned>, LayoutChoice> g_choices;

bool quantized_type_packs(GgmlType t) {
  return t == GgmlType::Q8_0 || t == GgmlType::Q4_0 || t == GgmlType::Q4_K ||
         t == GgmlType::Q5_K || t == GgmlType::Q6_K;
}
bool float_type(GgmlType t) { return t == GgmlType::F16 || t == GgmlType::BF16; }

// The packed form of `layout` for `type` (row-groups: int8 tiles or, for F16 / BF16, float
// groups).
PackedLayout packed_form(GgmlType type, WeightLayout layout) {
  switch (layout) {
    case WeightLayout::kRowGroups:
      return float_type(type) ? PackedLayout::kFloatGroups : PackedLayout::kAmxTiles;
    case WeightLayout::kVnniPairs: return PackedLayout::kVnniPairs;
    default: return PackedLayout::kBf16Tiles;
  }
}

// The random test matrix in GGUF form.
std::vector<uint8_t> make_matrix(GgmlType type, MatrixView* view) {
  const auto traits = ggml_type_traits(type);
  const size_t row_bytes = ggml_row_bytes(*traits, static_cast<uint64_t>(kCols));
  std::vector<uint8_t> bytes(row_bytes * kRows + 64);
  std::mt19937 rng(36);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> row(kCols);
  for (int64_t r = 0; r < kRows; ++r) {
    for (float& v : row) v = dist(rng);
    uint8_t* dst = bytes.data() + static_cast<size_t>(r) * row_bytes;
    if (float_type(type)) {
      auto* h = reinterpret_cast<uint16_t*>(dst);
      for (int64_t c = 0; c < kCols; ++c)
        h[c] = type == GgmlType::F16 ? f32_to_f16(row[static_cast<size_t>(c)])
                                     : f32_to_bf16(row[static_cast<size_t>(c)]);
    } else if (type == GgmlType::Q8_0)
      quantize_row_q8_0_ref(row.data(), reinterpret_cast<BlockQ8_0*>(dst), kCols);
    else if (type == GgmlType::Q4_0)
      quantize_row_q4_0_ref(row.data(), reinterpret_cast<BlockQ4_0*>(dst), kCols);
    else if (type == GgmlType::Q4_K)
      quantize_row_q4_k_ref(row.data(), reinterpret_cast<BlockQ4_K*>(dst), kCols);
    else if (type == GgmlType::Q5_K)
      quantize_row_q5_k_ref(row.data(), reinterpret_cast<BlockQ5_K*>(dst), kCols);
    else
      quantize_row_q6_k_ref(row.data(), reinterpret_cast<BlockQ6_K*>(dst), kCols);
  }
  view->type = type;
  view->data = bytes.data();
  view->rows = kRows;
  view->cols = kCols;
  view->row_bytes = row_bytes;
  return bytes;
}

std::vector<LayoutTiming> calibrate(GgmlType type, const std::vector<WeightLayout>& layouts) {
  ThreadPool pool(1);  // the calling thread: a per-core comparison
  MatrixView gguf;
  const std::vector<uint8_t> storage = make_matrix(type, &gguf);
  std::vector<MatrixView> views;
  std::vector<std::unique_ptr<PackedMatrix>> packs;
  for (WeightLayout l : layouts) {
    MatrixView v = gguf;
    if (l != WeightLayout::kGguf) {
      packs.push_back(pack_matrix(gguf, pool, packed_form(type, l)));
      v.packed = packs.back().get();
    }
    views.push_back(v);
  }
  std::vector<float> x(static_cast<size_t>(kCols * kPrefillTokens));
  std::mt19937 rng(7);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  for (float& v : x) v = dist(rng);
  std::vector<float> y(static_cast<size_t>(kRows * kPrefillTokens));
  MatmulScratch scratch;
  std::vector<LayoutTiming> out;
  for (WeightLayout l : layouts) out.push_back({l, 1e30, 1e30});
  auto time_one = [&](const MatrixView& v, int64_t tokens) {
    const auto t0 = std::chrono::steady_clock::now();
    matmul(v, x.data(), tokens, y.data(), pool, scratch);
    return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
  };
  for (const MatrixView& v : views) time_one(v, 1);  // warm: caches, scratch, pages
  for (int run = 0; run < kRuns; ++run)
    for (size_t i = 0; i < views.size(); ++i) {
      out[i].decode_us = std::min(out[i].decode_us, time_one(views[i], 1));
      if (run < 3) out[i].prefill_us = std::min(out[i].prefill_us, time_one(views[i], kPrefillTokens));
    }
  return out;
}

std::optional<WeightLayout> forced_layout() {
  const char* v = std::getenv("HINGE_WEIGHT_LAYOUT");
  if (!v || !*v) return std::nullopt;
  for (WeightLayout l : {WeightLayout::kRowGroups, WeightLayout::kVnniPairs, WeightLayout::kGguf,
                         WeightLayout::kBf16Tiles})
    if (std::strcmp(v, weight_layout_name(l)) == 0) return l;
  static std::once_flag warned;
  std::call_once(warned, [] {
    std::fprintf(stderr,
                 "hinge: HINGE_WEIGHT_LAYOUT is not one of row-groups, vnni-pairs, gguf, "
                 "bf16-tiles; ignored\n");
  });
  return std::nullopt;
}

// Calibrates `type` among `cands` and picks the fastest (rule 5).
LayoutChoice calibrate_choice(GgmlType type, const std::vector<WeightLayout>& cands,
                              const std::string& not_here) {
  LayoutChoice c;
  c.type = type;
  c.timings = calibrate(type, cands);
  // Score: the decode time over the fastest decode plus the 64-token time over the fastest
  // 64-token product; the lowest wins. A layout has to be good at both: in-cache decode times
  // are often within noise of each other while prefill times differ by 2x.
  double min_decode = 1e30, min_prefill = 1e30;
  for (const LayoutTiming& t : c.timings) {
    min_decode = std::min(min_decode, t.decode_us);
    min_prefill = std::min(min_prefill, t.prefill_us);
  }
  const LayoutTiming* pick = nullptr;
  double best_score = 1e30;
  for (const LayoutTiming& t : c.timings) {
    const double score = t.decode_us / min_decode + t.prefill_us / min_prefill;
    if (score < best_score) {
      best_score = score;
      pick = &t;
    }
  }
  c.layout = pick->layout;
  c.reason = not_here + "calibrated on this CPU";
  return c;
}

// The rules of kernel_choice.h in order; `fresh` skips the cache's entry (measures again).
LayoutChoice choose(GgmlType type, const std::vector<WeightLayout>& cands, bool fresh) {
  LayoutChoice c;
  c.type = type;
  std::string not_here;
  if (const auto f = forced_layout()) {
    if (std::find(cands.begin(), cands.end(), *f) != cands.end()) {
      c.layout = *f;
      c.reason = "forced by HINGE_WEIGHT_LAYOUT";
      return c;
    }
    not_here = fmt::format("HINGE_WEIGHT_LAYOUT={} does not run {} here; ", weight_layout_name(*f),
                           ggml_type_name(c.type));
  }
  if (cands.front() == WeightLayout::kBf16Tiles) {
    c.layout = WeightLayout::kBf16Tiles;
    c.reason = not_here + (cpu_has_amx_bf16() ? "AMX-BF16 tiles" : "AVX-512 BF16 (vdpbf16ps)");
    return c;
  }
  if (cands.size() == 1) {
    c.layout = cands.front();
    c.reason = not_here + "the only layout that runs here";
    return c;
  }
  if (cpu_has_amx_int8() && cands.front() == WeightLayout::kRowGroups &&
      !rowgroups_avx2_only(type)) {
    c.layout = WeightLayout::kRowGroups;
    c.reason = not_here + "AMX-INT8 tiles for prefill";
    return c;
  }
  // Only one process on the machine calibrates at a time; the others then read its choice.
  const std::string cache = layout_cache_path();
  FileLock lock(cache.empty() ? std::string() : cache + ".lock");
  if (auto cached = fresh ? std::nullopt : load_cached_layout(type, cands)) {
    cached->reason = not_here + cached->reason;
    return *cached;
  }
  c = calibrate_choice(type, cands, not_here);
  if (Status st = save_cached_layout(c, cands); !st.ok()) {
    static std::once_flag warned;
    std::call_once(warned, [&] {
      std::fprintf(stderr, "hinge: the weight-layout choice is not cached (%s); each process "
                   "calibrates again\n", st.message().c_str());
    });
  }
  return c;
}

}  // namespace

const char* weight_layout_name(WeightLayout layout) {
  switch (layout) {
    case WeightLayout::kRowGroups: return "row-groups";
    case WeightLayout::kVnniPairs: return "vnni-pairs";
    case WeightLayout::kGguf: return "gguf";
    case WeightLayout::kBf16Tiles: return "bf16-tiles";
  }
  return "gguf";
}

std::vector<WeightLayout> candidate_layouts(GgmlType type) {
  std::vector<WeightLayout> out;
  if ((type == GgmlType::F16 || type == GgmlType::BF16) &&
      packed_layout_supported(type, PackedLayout::kBf16Tiles))
    out.push_back(WeightLayout::kBf16Tiles);
  if (float_type(type) && packed_layout_supported(type, PackedLayout::kFloatGroups))
    out.push_back(WeightLayout::kRowGroups);
  if (quantized_type_packs(type)) {
    if (packed_layout_supported(type, PackedLayout::kAmxTiles)) out.push_back(WeightLayout::kRowGroups);
    if (packed_layout_supported(type, PackedLayout::kVnniPairs)) out.push_back(WeightLayout::kVnniPairs);
  }
  out.push_back(WeightLayout::kGguf);
  return out;
}

namespace {

std::pair<GgmlType, unsigned> choice_key(GgmlType type, const std::vector<WeightLayout>& cands) {
  unsigned bits = 0;
  for (WeightLayout l : cands) bits |= 1u << static_cast<unsigned>(l);
  if (cpu_has_amx_int8()) bits |= 1u << 8;
  if (cpu_has_amx_bf16()) bits |= 1u << 9;
  return {type, bits};
}

}  // namespace

LayoutChoice choose_weight_layout(GgmlType type) {
  const std::vector<WeightLayout> cands = candidate_layouts(type);
  const auto key = choice_key(type, cands);
  std::lock_guard<std::mutex> lock(g_mu);
  auto it = g_choices.find(key);
  if (it == g_choices.end()) it = g_choices.emplace(key, choose(type, cands, false)).first;
  return it->second;
}

std::vector<LayoutChoice> recalibrate_weight_layouts() {
  std::vector<LayoutChoice> out;
  std::lock_guard<std::mutex> lock(g_mu);
  for (GgmlType type : {GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q4_K, GgmlType::Q5_K,
                        GgmlType::Q6_K, GgmlType::F16, GgmlType::BF16}) {
    const std::vector<WeightLayout> cands = candidate_layouts(type);
    LayoutChoice c = choose(type, cands, /*fresh=*/true);
    g_choices[choice_key(type, cands)] = c;
    out.push_back(std::move(c));
  }
  return out;
}

void forget_weight_layout_choices() {
  std::lock_guard<std::mutex> lock(g_mu);
  g_choices.clear();
}

std::vector<std::string> layout_choice_summary() {
  std::lock_guard<std::mutex> lock(g_mu);
  std::vector<std::string> out;
  for (const auto& [key, c] : g_choices) {
    if (c.layout == WeightLayout::kGguf && c.timings.empty() && c.reason.rfind("the only", 0) == 0)
      continue;  // nothing was chosen: no packed layout runs for the type
    std::string line = fmt::format("{}: {} ({}", ggml_type_name(c.type), weight_layout_name(c.layout),
                                   c.reason);
    if (!c.timings.empty()) {
      line += ":";
      for (const LayoutTiming& t : c.timings)
        line += fmt::format(" {} {:.0f}/{:.0f} us", weight_layout_name(t.layout), t.decode_us,
                            t.prefill_us);
      line += fmt::format(" per 1 and {} tokens of a {}x{} product", kPrefillTokens, kRows, kCols);
    }
    out.push_back(line + ")");
  }
  return out;
}

}  // namespace hinge::kernels
