#include <gtest/gtest.h>

#include <atomic>
#include <vector>

#include "common/ggml_type.h"
#include "common/half.h"
#include "common/status.h"
#include "common/thread_pool.h"

namespace hinge {
namespace {

TEST(Status, OkAndError) {
  Status ok;
  EXPECT_TRUE(ok.ok());
  Status e = Status::Errorf("bad {}", 42).with_context("file.gguf");
  EXPECT_FALSE(e.ok());
  EXPECT_EQ(e.message(), "file.gguf: bad 42");
  StatusOr<int> v = 5;
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(*v, 5);
  StatusOr<int> err = Status::Error("nope");
  EXPECT_FALSE(err.ok());
  EXPECT_EQ(err.status().message(), "nope");
}

TEST(GgmlType, TraitsAndNames) {
  auto q4k = ggml_type_traits(GgmlType::Q4_K);
  ASSERT_TRUE(q4k);
  EXPECT_EQ(q4k->block_elems, 256u);
  EXPECT_EQ(q4k->block_bytes, 144u);
  EXPECT_EQ(ggml_type_traits(GgmlType::Q6_K)->block_bytes, 210u);
  EXPECT_EQ(ggml_type_traits(GgmlType::Q8_0)->block_bytes, 34u);
  EXPECT_FALSE(ggml_type_traits(4u));  // removed type id
  EXPECT_EQ(ggml_type_from_name("Q4_K"), GgmlType::Q4_K);
  EXPECT_EQ(ggml_type_from_name("bf16"), GgmlType::BF16);
  EXPECT_FALSE(ggml_type_from_name("q9_9"));
}

TEST(Half, RoundTrip) {
  for (float f : {0.0f, 1.0f, -2.5f, 65504.0f, 1e-5f, 3.14159f}) {
    EXPECT_NEAR(f16_to_f32(f32_to_f16(f)), f, std::abs(f) * 1e-3f + 1e-7f);
    EXPECT_NEAR(bf16_to_f32(f32_to_bf16(f)), f, std::abs(f) * 1e-2f);
  }
  EXPECT_EQ(f32_to_f16(1.0f), 0x3C00);
  EXPECT_EQ(f16_to_f32(0xC000), -2.0f);
}

TEST(ThreadPool, ParallelForCoversRangeOnce) {
  for (int threads : {1, 2, 3}) {
    ThreadPool pool(threads);
    for (int64_t n : {0, 1, 7, 64, 1000}) {
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      for (int rep = 0; rep < 3; ++rep) {
        pool.parallel_for(n, 4, [&](int64_t b, int64_t e) {
          for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)]++;
        });
      }
      for (auto& h : hits) EXPECT_EQ(h.load(), 3);
    }
  }
}

}  // namespace
}  // namespace hinge
