// What running F16 / BF16 weights on the AMX-BF16 tiles (kernels/matmul_bf16_amx.cpp) does to a
// trained model's outputs: the model's f32 GGUF is the reference; its F16 and BF16 exports run
// (a) on the tiles (activations rounded to bf16, F16 weights rounded to bf16) and (b) with
// packing off, on the exact f32 FMA kernel (only the export's own rounding). Per position over
// a 200-token story: KL(reference || run), top-1 agreement and the largest logit difference.
// Where packing gives the AVX2 float row groups instead (kFloatGroups: exact operands), they
// are held against the f32 kernel on the same export.
// The figures are printed (docs/kernels.md quotes them) and bounded.
// HINGE_BF16_EVAL_MODEL=PATH runs the same measurement on another model (e.g. llama-1b).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <vector>

#include "eval/context_eval.h"
#include "kernels/kernel_choice.h"
#include "kernels/matmul_packed.h"
#include "model/gguf_export.h"
#include "model/kv_cache.h"
#include "model/loaded_model.h"
#include "model/transformer.h"
#include "test_util.h"
#include "tokenizer/tokenizer.h"

namespace hinge {
namespace {

std::vector<float> all_logits(const LoadedModel& m, const std::vector<int32_t>& tokens,
                              bool packing) {
  if (!packing) setenv("HINGE_DISABLE_PACKING", "1", 1);
  ThreadPool pool(2);
  Transformer model(m.config, m.weights, pool, 16, m.file_mappings);
  if (!packing) unsetenv("HINGE_DISABLE_PACKING");
  KvCache cache(m.config, static_cast<int64_t>(tokens.size()));
  std::vector<float> out(tokens.size() * static_cast<size_t>(m.config.n_vocab));
  EXPECT_TRUE(model.forward(tokens, cache, out.data(), /*all_logits=*/true).ok());
  return out;
}

struct Agreement {
  double mean_kl = 0, top1 = 0, max_abs_diff = 0, max_abs = 0;
};

Agreement compare(const std::vector<float>& ref, const std::vector<float>& got, size_t vocab) {
  Agreement a;
  const size_t rows = ref.size() / vocab;
  size_t same = 0;
  for (size_t r = 0; r < rows; ++r) {
    const float* p = ref.data() + r * vocab;
    const float* q = got.data() + r * vocab;
    const double mp = *std::max_element(p, p + vocab), mq = *std::max_element(q, q + vocab);
    double zp = 0, zq = 0;
    for (size_t i = 0; i < vocab; ++i) {
      zp += std::exp(p[i] - mp);
      zq += std::exp(q[i] - mq);
    }
    double kl = 0;
    for (size_t i = 0; i < vocab; ++i) {
      const double lp = p[i] - mp - std::log(zp), lq = q[i] - mq - std::log(zq);
      kl += std::exp(lp) * (lp - lq);
      a.max_abs_diff = std::max(a.max_abs_diff, std::fabs(double(p[i]) - q[i]));
      a.max_abs = std::max(a.max_abs, std::fabs(double(p[i])));
    }
    a.mean_kl += kl / static_cast<double>(rows);
    same += std::max_element(p, p + vocab) - p == std::max_element(q, q + vocab) - q;
  }
  a.top1 = static_cast<double>(same) / static_cast<double>(rows);
  return a;
}

// Measures `path`; returns the tiles' agreement for each of BF16 and F16 (empty when the tiles
// do not run here).
std::vector<Agreement> measure(const std::string& path, int64_t n_tokens) {
  auto loaded = load_model(path);
  EXPECT_TRUE(loaded.ok()) << loaded.status().message();
  if (!loaded.ok()) return {};
  const LoadedModel& ref_model = **loaded;
  auto tok = Tokenizer::create(ref_model.vocab);
  EXPECT_TRUE(tok.ok());
  std::vector<int32_t> tokens = (*tok)->encode(synthetic_story_text(4000, 3), true, false);
  tokens.resize(std::min<size_t>(tokens.size(), static_cast<size_t>(n_tokens)));
  const auto ref = all_logits(ref_model, tokens, /*packing=*/false);
  const size_t vocab = static_cast<size_t>(ref_model.config.n_vocab);
  std::vector<Agreement> out;
  for (GgmlType t : {GgmlType::BF16, GgmlType::F16}) {
    const std::string conv = testing::temp_dir() + "/bf16-numerics.gguf";
    ExportOptions opt;
    opt.matrix_type = t;
    EXPECT_TRUE(export_gguf(ref_model, conv, opt).ok());
    auto m = load_model(conv);
    EXPECT_TRUE(m.ok()) << m.status().message();
    if (!m.ok()) return {};
    const auto exact_logits = all_logits(**m, tokens, /*packing=*/false);
    const auto packed_logits = all_logits(**m, tokens, /*packing=*/true);
    const auto exact = compare(ref, exact_logits, vocab);
    const auto tiles = compare(ref, packed_logits, vocab);
    if (!kernels::packed_layout_supported(t, kernels::PackedLayout::kBf16Tiles) &&
        kernels::packed_layout_supported(t, kernels::PackedLayout::kFloatGroups)) {
      // Packing gives the AVX2 float row groups: the same exact operands as the f32 kernel, only
      // the f32 summation order differs.
      const auto groups = compare(exact_logits, packed_logits, vocab);
      std::printf("%s as %s: float row groups against the f32 kernel: KL %.3g top-1 %.4f "
                  "max|dlogit| %.3g\n",
                  std::filesystem::path(path).filename().c_str(),
                  std::string(ggml_type_name(t)).c_str(), groups.mean_kl, groups.top1,
                  groups.max_abs_diff);
      EXPECT_LT(groups.mean_kl, 1e-6);
      EXPECT_GE(groups.top1, 0.99);
      EXPECT_LT(groups.max_abs_diff, 1e-3 * groups.max_abs);
    }
    std::printf("%s as %s, %zu positions: f32 kernel KL %.3g top-1 %.4f max|dlogit| %.3g | "
                "packed KL %.3g top-1 %.4f max|dlogit| %.3g (max|logit| %.3g)\n",
                std::filesystem::path(path).filename().c_str(), std::string(ggml_type_name(t)).c_str(), tokens.size(),
                exact.mean_kl, exact.top1, exact.max_abs_diff, tiles.mean_kl, tiles.top1,
                tiles.max_abs_diff, tiles.max_abs);
    std::filesystem::remove(conv);
    if (kernels::packed_layout_supported(t, kernels::PackedLayout::kBf16Tiles)) out.push_back(tiles);
  }
  return out;
}

TEST(ModelBf16Numerics, TrainedModelsAgreeWithTheirF32Reference) {
  for (const char* rel : {"models/stories260K.gguf", "models/tinystories-656k"}) {
    SCOPED_TRACE(rel);
    for (const Agreement& a : measure(testing::shared_path(rel), 200)) {
      EXPECT_LT(a.mean_kl, 2e-3);
      EXPECT_GE(a.top1, 0.97);
      EXPECT_LT(a.max_abs_diff, 0.05 * a.max_abs);
    }
  }
}

// A model whose matrices are packed reports the copy's bytes and the time it took; one that is
// not reports no bytes.
TEST(ModelBf16Numerics, PackingIsMeasured) {
  auto loaded = load_model(testing::shared_path("models/stories260K.gguf"));
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  const std::string conv = testing::temp_dir() + "/packing-measured.gguf";
  ExportOptions opt;
  opt.matrix_type = GgmlType::F16;
  ASSERT_TRUE(export_gguf(**loaded, conv, opt).ok());
  auto m = load_model(conv);
  ASSERT_TRUE(m.ok()) << m.status().message();
  ThreadPool pool(2);
  {
    Transformer f32((**loaded).config, (**loaded).weights, pool, 16, (**loaded).file_mappings);
    // f32 matrices have no packed layout: copied as they are onto huge pages (ModelPacked
    // .UnpackedTypesAreCopiedOntoHugePagesUnchanged checks the count), as fast as a copy goes.
    EXPECT_GT(f32.packed_bytes(), 0);
  }
  Transformer f16((**m).config, (**m).weights, pool, 16, (**m).file_mappings);
  if (!kernels::packed_matmul_supported(GgmlType::F16) ||
      kernels::choose_weight_layout(GgmlType::F16).layout == kernels::WeightLayout::kGguf)
    GTEST_SKIP() << "F16 is not packed on this CPU";
  EXPECT_GT(f16.packed_bytes(), 0);
  EXPECT_GT(f16.pack_seconds(), 0.0);
  std::filesystem::remove(conv);
}

TEST(ModelBf16Numerics, OtherModelFromTheEnvironment) {
  const char* path = std::getenv("HINGE_BF16_EVAL_MODEL");
  if (!path) GTEST_SKIP() << "set HINGE_BF16_EVAL_MODEL=PATH to measure another model";
  measure(path, 64);
}

}  // namespace
}  // namespace hinge
