// KV calibration is an explicit step at engine start (issue 13, acceptance 4): the fp8 scales
// and the K-shift mean are fixed before any request runs, so a request's output does not
// depend on what the engine ran before it, for every KV dtype; and the calibration is part of
// the cache fingerprint (KV written under another calibration never hits).
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "engine/cache_identity.h"
#include "hinge/engine.h"
#include "model_test_util.h"

namespace hinge {
namespace {

using testing::load_or_die;
using testing::shared_path;

GenerateRequest request(uint64_t seed, int32_t prompt_len, int32_t max_new) {
  return testing::seeded_request(seed, prompt_len, max_new);
}

std::vector<int32_t> run_to_end(Engine& e, const GenerateRequest& r) {
  const RequestId id = e.add_request(r).value();
  std::vector<int32_t> out;
  std::vector<RequestDelta> deltas;
  while (e.has_unfinished()) {
    EXPECT_TRUE(e.step(&deltas).ok());
    for (const RequestDelta& d : deltas)
      if (d.id == id) out.insert(out.end(), d.token_ids.begin(), d.token_ids.end());
  }
  return out;
}

EngineConfig config(KvDtype dtype) {
  EngineConfig c = testing::small_f32_engine_config();
  c.k_dtype = c.v_dtype = dtype;
  return c;
}

TEST(EngineCalibration, OutputDoesNotDependOnWhatRanBefore) {
  auto m = load_or_die(shared_path("models/stories260K.gguf"));
  ASSERT_TRUE(m);
  const GenerateRequest probe = request(11, 40, 48);
  // Other requests first: a long one with other tokens (a first K/V that differs a lot).
  const GenerateRequest other = request(99, 60, 4);
  for (KvDtype dt : {KvDtype::kF32, KvDtype::kF16, KvDtype::kBf16, KvDtype::kFp8E4m3,
                     KvDtype::kFp8E5m2, KvDtype::kInt8, KvDtype::kInt4}) {
    auto first = std::move(Engine::create(*m, nullptr, config(dt))).value();
    const auto alone = run_to_end(*first, probe);
    auto second = std::move(Engine::create(*m, nullptr, config(dt))).value();
    run_to_end(*second, other);
    const auto after = run_to_end(*second, probe);
    ASSERT_EQ(alone.size(), 48u);
    EXPECT_EQ(after, alone) << kv::kv_dtype_name(dt);
  }
}

// Engines with the same model and KV format calibrate alike (their cache fingerprints agree);
// another KV dtype gives another fingerprint.
TEST(EngineCalibration, CalibrationIsDeterministicAndInTheFingerprint) {
  auto m = load_or_die(shared_path("models/stories260K.gguf"));
  ASSERT_TRUE(m);
  auto a = std::move(Engine::create(*m, nullptr, config(KvDtype::kFp8E4m3))).value();
  auto b = std::move(Engine::create(*m, nullptr, config(KvDtype::kFp8E4m3))).value();
  auto c = std::move(Engine::create(*m, nullptr, config(KvDtype::kInt8))).value();
  EXPECT_EQ(a->stats().kv_fingerprint, b->stats().kv_fingerprint);
  EXPECT_NE(a->stats().kv_fingerprint, c->stats().kv_fingerprint);
  EXPECT_NE(a->stats().kv_calibration, 0u);  // fp8 scales and the K-shift mean went into it
}

}  // namespace
}  // namespace hinge
