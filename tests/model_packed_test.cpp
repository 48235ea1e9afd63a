// Packed weights at model load (kernels/matmul_packed.h) on a real GGUF file: the forward pass
// with packed matrices matches the GGUF-layout kernels, and dropping the file pages of packed
// matrices (LoadedModel::file_mappings) changes nothing: the bytes read back from the file.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>

#include "kernels/cpu_features.h"
#include "kernels/kernel_choice.h"
#include "kernels/matmul_packed.h"
#include "model/kv_cache.h"
#include "model/transformer.h"
#include "model/loaded_model.h"
#include "model/synth.h"

namespace hinge {
namespace {

std::vector<float> logits_of(const LoadedModel& m, ThreadPool& pool,
                             std::span<const std::span<const uint8_t>> mappings) {
  Transformer model(m.config, m.weights, pool, 16, mappings);
  const std::vector<int32_t> tokens = {1, 17, 300, 42, 511, 7, 99, 250, 3, 128, 64, 5, 77};
  KvCache cache(m.config, static_cast<int64_t>(tokens.size()));
  std::vector<float> out(tokens.size() * static_cast<size_t>(m.config.n_vocab));
  EXPECT_TRUE(model.forward(tokens, cache, out.data(), /*all_logits=*/true).ok());
  return out;
}

// Writes the "tiny" synth model of `type` to `path` and loads it from there (file-mapped).
auto write_and_load(GgmlType type, const std::filesystem::path& path, ThreadPool& pool) {
  EXPECT_TRUE(write_synth_model(*find_synth_preset("tiny"), type, 5, path.string(), pool).ok());
  return load_model(path.string());
}

// Each packed layout that runs here: AMX tiles (Q8_0, Q4_0, Q4_K), then with AMX switched off
// VNNI pairs (Q8_0, Q4_0).
void check_packed_forward(GgmlType type);

TEST(ModelPacked, PackedForwardMatchesGgufLayoutAndDroppedPagesReadBack) {
  if (!kernels::packed_matmul_supported(GgmlType::Q8_0)) GTEST_SKIP() << "no AVX-512 VNNI here";
  for (bool amx : {true, false}) {
    SCOPED_TRACE(amx ? "default layout" : "AMX off");
    kernels::set_amx_allowed_for_test(amx);
    for (GgmlType type : {GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q4_K}) {
      if (!kernels::packed_matmul_supported(type)) continue;
      check_packed_forward(type);
    }
    kernels::set_amx_allowed_for_test(true);
  }
}

void check_packed_forward(GgmlType type) {
  {
    SCOPED_TRACE(ggml_type_name(type));
    const auto path = std::filesystem::path(::testing::TempDir()) /
                      (std::string("hinge_packed_") + std::string(ggml_type_name(type)) + ".gguf");
    ThreadPool pool(2);
    auto loaded = write_and_load(type, path, pool);
    ASSERT_TRUE(loaded.ok()) << loaded.status().message();
    const LoadedModel& m = **loaded;
    ASSERT_FALSE(m.file_mappings.empty());

    // GGUF-layout kernels (packing off), then packed with the file pages dropped.
    ASSERT_EQ(setenv("HINGE_DISABLE_PACKING", "1", 1), 0);
    const auto plain = logits_of(m, pool, {});
    ASSERT_EQ(unsetenv("HINGE_DISABLE_PACKING"), 0);
    const auto packed = logits_of(m, pool, m.file_mappings);
    const auto packed_again = logits_of(m, pool, m.file_mappings);  // pages dropped before
    ASSERT_EQ(plain.size(), packed.size());
    double max_abs = 0.0, max_diff = 0.0;
    for (size_t i = 0; i < plain.size(); ++i) {
      max_abs = std::max(max_abs, std::fabs(double(plain[i])));
      max_diff = std::max(max_diff, std::fabs(double(plain[i]) - packed[i]));
    }
    // Q8_0 / Q4_0: both layouts compute the exact block integers and scale them alike, so the
    // logits agree to rounding. Q4_K applies its sub-block scales in f32 on AMX (in integers in
    // the GGUF kernel): a 1e-6 difference can flip the rounding of an activation quant of the
    // next matmul (one Q8_K step), which moves the logits by about 1% on this random model, so
    // there the bound is 2% and every row's top token must agree.
    const bool q4k = type == GgmlType::Q4_K;
    EXPECT_LE(max_diff, (q4k ? 2e-2 : 1e-4) * max_abs) << "packed vs GGUF layout";
    const size_t vocab = static_cast<size_t>(m.config.n_vocab);
    for (size_t r = 0; r < plain.size() / vocab; ++r) {
      const auto top = [&](const std::vector<float>& v) {
        return std::max_element(v.begin() + r * vocab, v.begin() + (r + 1) * vocab) - v.begin();
      };
      EXPECT_EQ(top(plain), top(packed)) << "row " << r;
    }
    EXPECT_EQ(packed, packed_again);

    // The dropped pages read back the file's bytes.
    const kernels::MatrixView& wq = m.weights.layers[0].wq;
    const size_t n = static_cast<size_t>(wq.rows) * wq.row_bytes;
    const auto* base = m.file_mappings[0].data();
    const auto offset = static_cast<const uint8_t*>(wq.data) - base;
    std::ifstream f(path, std::ios::binary);
    f.seekg(offset);
    std::vector<char> want(n);
    f.read(want.data(), static_cast<std::streamsize>(n));
    ASSERT_TRUE(f.good());
    EXPECT_EQ(0, std::memcmp(want.data(), wq.data, n));
    std::filesystem::remove(path);
  }
}

// Matrices held in the GGUF layout (Q5_K, its output matrix Q6_K, with HINGE_WEIGHT_LAYOUT=gguf:
// their row groups would run other kernels) are copied as they are onto huge pages and their
// file pages dropped. The same kernels read the same bytes, so the logits are
// bit-identical to reading the file mapping; the copies count as packed bytes.
TEST(ModelPacked, UnpackedTypesAreCopiedOntoHugePagesUnchanged) {
  const GgmlType type = GgmlType::Q5_K;
  ASSERT_EQ(setenv("HINGE_WEIGHT_LAYOUT", "gguf", 1), 0);
  kernels::forget_weight_layout_choices();
  struct Restore {
    ~Restore() {
      unsetenv("HINGE_WEIGHT_LAYOUT");
      kernels::forget_weight_layout_choices();
    }
  } restore;
  const auto path = std::filesystem::path(::testing::TempDir()) / "hinge_copied_q5_k.gguf";
  ThreadPool pool(2);
  auto loaded = write_and_load(type, path, pool);
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  const LoadedModel& m = **loaded;
  ASSERT_FALSE(m.file_mappings.empty());
  ASSERT_EQ(m.weights.layers[0].wq.type, type);

  ASSERT_EQ(setenv("HINGE_DISABLE_PACKING", "1", 1), 0);
  const auto mapped = logits_of(m, pool, {});
  ASSERT_EQ(unsetenv("HINGE_DISABLE_PACKING"), 0);
  const auto copied = logits_of(m, pool, m.file_mappings);
  const auto copied_again = logits_of(m, pool, m.file_mappings);  // file pages dropped before
  EXPECT_EQ(mapped, copied);
  EXPECT_EQ(copied, copied_again);

  int64_t layer_bytes = 0;
  for (const auto& l : m.weights.layers)
    for (const kernels::MatrixView* w : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down})
      layer_bytes += w->rows * static_cast<int64_t>(w->row_bytes);
  Transformer model(m.config, m.weights, pool, 16, m.file_mappings);
  const bool tied = m.weights.output.data == m.weights.token_embd.data;
  const int64_t output_bytes =
      tied ? 0 : m.weights.output.rows * static_cast<int64_t>(m.weights.output.row_bytes);
  EXPECT_EQ(model.packed_bytes(), layer_bytes + output_bytes);
  EXPECT_GT(model.dropped_file_bytes(), 0);
  // The transformer's views point at its copies, not at the file.
  const auto* file = m.file_mappings[0].data();
  const auto* q = static_cast<const uint8_t*>(model.weights().layers[0].wq.data);
  EXPECT_TRUE(q < file || q >= file + m.file_mappings[0].size());
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace hinge
