// Packed weights at model load (kernels/matmul_packed.h) on a real GGUF file: the forward pass
// with packed matrices matches the GGUF-layout kernels, and dropping the file pages of packed
// matrices (LoadedModel::file_mappings) changes nothing: the bytes read back from the file.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>

#include "kernels/matmul_packed.h"
#include "model/kv_cache.h"
#include "model/llama_model.h"
#include "model/loaded_model.h"
#include "model/synth.h"

namespace hinge {
namespace {

std::vector<float> logits_of(const LoadedModel& m, ThreadPool& pool,
                             std::span<const std::span<const uint8_t>> mappings) {
  LlamaModel model(m.config, m.weights, pool, 16, mappings);
  const std::vector<int32_t> tokens = {1, 17, 300, 42, 511, 7, 99, 250, 3, 128, 64, 5, 77};
  KvCache cache(m.config, static_cast<int64_t>(tokens.size()));
  std::vector<float> out(tokens.size() * static_cast<size_t>(m.config.n_vocab));
  EXPECT_TRUE(model.forward(tokens, cache, out.data(), /*all_logits=*/true).ok());
  return out;
}

TEST(ModelPacked, PackedForwardMatchesGgufLayoutAndDroppedPagesReadBack) {
  for (GgmlType type : {GgmlType::Q8_0, GgmlType::Q4_0}) {
    SCOPED_TRACE(ggml_type_name(type));
    if (!kernels::packed_matmul_supported(type)) GTEST_SKIP() << "no AVX-512 VNNI here";
    const auto path = std::filesystem::path(::testing::TempDir()) /
                      (std::string("hinge_packed_") + std::string(ggml_type_name(type)) + ".gguf");
    ThreadPool pool(2);
    ASSERT_TRUE(write_synth_model(*find_synth_preset("tiny"), type, 5, path.string(), pool).ok());
    auto loaded = load_model(path.string());
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
    EXPECT_LE(max_diff, 1e-4 * max_abs) << "packed vs GGUF layout";
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

}  // namespace
}  // namespace hinge
