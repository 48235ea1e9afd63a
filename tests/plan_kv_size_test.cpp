// `hinge kv-size` (plan/kv_size.h): the KV formula on the presets, pinned to figures computed by
// hand here: Llama-2-70B at 32k in f16 is 10,737,418,240 bytes per request (MHA 8x, fp8 half,
// 8 requests past 80 GB); DeepSeek-V3's MLA caches (512 + 64) values per layer and token;
// Gemma 3 27B's 52 local layers hold 1024 tokens. And the command's table and JSON.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "plan/kv_size.h"
#include "test_util.h"

namespace hinge::plan {
namespace {

TEST(PlanKvSize, Llama2_70bAt32kIsTenGigabytesPerRequest) {
  const KvShape* s = find_kv_preset("llama-2-70b");
  ASSERT_NE(s, nullptr);
  // 2 (K, V) x 80 layers x 8 KV heads x 128 x 2 bytes x 32768 tokens.
  const double f16 = *kv_element_bytes("f16");
  EXPECT_EQ(kv_bytes_per_request(*s, 32768, f16), 2.0 * 80 * 8 * 128 * 2 * 32768);
  EXPECT_EQ(kv_bytes_per_request(*s, 32768, f16), 10737418240.0);
  EXPECT_EQ(kv_bytes_per_token(*s, 32768, f16), 327680.0);
  const std::vector<KvVariant> v = kv_variants(*s);
  ASSERT_EQ(v.size(), 3u);  // MHA, GQA (the model's), MQA
  EXPECT_EQ(v[0].label, "MHA (64 KV heads)");
  EXPECT_EQ(kv_bytes_per_request(v[0].shape, 32768, f16), 8 * 10737418240.0);
  EXPECT_TRUE(v[1].is_model);
  EXPECT_EQ(kv_bytes_per_request(v[2].shape, 32768, f16), 10737418240.0 / 8);
  EXPECT_EQ(kv_bytes_per_request(*s, 32768, *kv_element_bytes("fp8")), 10737418240.0 / 2);
  EXPECT_EQ(kv_bytes_per_request(*s, 32768, *kv_element_bytes("int4")), 10737418240.0 / 4);
  // Eight of them are 85.9 GB: seven fit in 80 GB of KV.
  EXPECT_GT(8 * kv_bytes_per_request(*s, 32768, f16), 80e9);
  EXPECT_EQ(requests_that_fit(*s, 32768, f16, 80e9), 7);
}

TEST(PlanKvSize, DeepSeekV3CachesTheLatentAndGemma3ItsWindows) {
  const KvShape* d = find_kv_preset("deepseek-v3");
  ASSERT_NE(d, nullptr);
  // MLA: 61 layers x (kv_lora_rank 512 + qk_rope_head_dim 64) x 2 bytes per token.
  EXPECT_EQ(kv_bytes_per_token(*d, 32768, 2.0), 61.0 * 576 * 2);
  EXPECT_EQ(kv_bytes_per_request(*d, 32768, 2.0), 2302672896.0);
  const std::vector<KvVariant> v = kv_variants(*d);
  ASSERT_EQ(v.back().label, "MLA (latent 512 + RoPE 64)");
  EXPECT_TRUE(v.back().is_model);
  // Uncompressed: 128 heads of 192-dim keys and 128-dim values per layer and token.
  EXPECT_EQ(kv_bytes_per_token(v[0].shape, 32768, 2.0), 61.0 * 128 * (192 + 128) * 2);

  const KvShape* g = find_kv_preset("gemma3-27b");
  ASSERT_NE(g, nullptr);
  // 10 global layers hold every token, 52 local ones their 1024: 2 x 16 x 128 x 2 bytes each.
  EXPECT_EQ(kv_bytes_per_request(*g, 32768, 2.0), 8192.0 * (10 * 32768 + 52 * 1024));
  EXPECT_EQ(kv_bytes_per_request(*g, 512, 2.0), 8192.0 * 62 * 512);  // shorter than the window

  EXPECT_FALSE(kv_element_bytes("f8"));
  EXPECT_EQ(find_kv_preset("llama-9"), nullptr);
  EXPECT_EQ(kv_presets().size(), 13u);
}

TEST(PlanKvSizeCli, TableJsonAndErrors) {
  using testing::hinge_binary;
  using testing::run_command;
  auto r = run_command(hinge_binary() +
                       " kv-size --preset llama-2-70b --context 32768 --dtype f16 --batch 8");
  ASSERT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("per request: 10,737,418,240 bytes"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("10.74 GB (10.00 GiB)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("MHA (64 KV heads)                  2.50 MiB       85.90 GB"),
            std::string::npos) << r.out;
  EXPECT_NE(r.out.find("a batch of 8 needs 85.90 GB of KV: more than 24 GB, 40 GB, 80 GB"),
            std::string::npos) << r.out;
  auto j = run_command(hinge_binary() + " kv-size --preset deepseek-v3 -c 32768 --json");
  ASSERT_EQ(j.exit_code, 0);
  const auto o = nlohmann::json::parse(j.out);
  EXPECT_EQ(o["per_request_bytes"].get<double>(), 2302672896.0);
  EXPECT_EQ(o["variants"].back()["label"], "MLA (latent 512 + RoPE 64)");
  // The shape by flags equals the preset.
  auto f = run_command(hinge_binary() + " kv-size --layers 80 --heads 64 --kv-heads 8 "
                                        "--head-dim 128 -c 32768 --json");
  ASSERT_EQ(f.exit_code, 0);
  EXPECT_EQ(nlohmann::json::parse(f.out)["per_request_bytes"].get<double>(), 10737418240.0);
  // A model file: stories260K's 5 layers x 4 KV heads x 8 x 2 (K, V) x 2 bytes = 640 per token.
  auto m = run_command(hinge_binary() + " kv-size -m " +
                       testing::shared_path("models/stories260K.gguf") + " -c 2048 --json");
  ASSERT_EQ(m.exit_code, 0);
  EXPECT_EQ(nlohmann::json::parse(m.out)["per_token_bytes"].get<double>(), 640.0);
  for (const char* bad : {" kv-size", " kv-size --preset llama-9", " kv-size --preset llama-2-7b "
                          "--dtype f8", " kv-size --preset llama-2-7b -m x.gguf",
                          " kv-size --layers 4"}) {
    auto e = run_command(hinge_binary() + bad + " 2>&1");
    EXPECT_NE(e.exit_code, 0) << bad;
    EXPECT_NE(e.out.find("hinge: "), std::string::npos) << bad << ": " << e.out;
  }
}

}  // namespace
}  // namespace hinge::plan
