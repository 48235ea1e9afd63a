// Acceptance 1: stories260K greedy from BOS reproduces llama2.c's reference ids and text, from
// the GGUF file, from the llama2.c checkpoint, and from the GGUF `hinge convert` makes of it.
#include <gtest/gtest.h>

#include "model/gguf_export.h"
#include "model_test_util.h"
#include "tokenizer/tokenizer.h"

namespace hinge {
namespace {

using testing::load_or_die;
using testing::read_csv_ids;
using testing::shared_path;

std::vector<int32_t> golden_ids() {
  return read_csv_ids(shared_path("models/reference/stories260K_greedy_t0_n256.token_ids.csv"));
}

void expect_golden(const LoadedModel& m, int threads) {
  const auto want = golden_ids();
  ASSERT_EQ(want.size(), 256u);
  const auto got = testing::greedy(m, {1}, 256, threads);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i)
    ASSERT_EQ(got[i], want[i]) << "first mismatch at generated token " << i;
}

TEST(ModelGolden, Stories260kGgufMatchesLlama2c) {
  auto m = load_or_die(shared_path("models/stories260K.gguf"));
  ASSERT_TRUE(m);
  expect_golden(*m, 1);
  expect_golden(*m, 2);
}

TEST(ModelGolden, Stories260kLlama2cCheckpointMatches) {
  auto m = load_or_die(shared_path("models/stories260K.bin"), shared_path("models/tok512.bin"));
  ASSERT_TRUE(m);
  expect_golden(*m, 2);
}

TEST(ModelGolden, ConvertedGgufMatches) {
  auto src = load_or_die(shared_path("models/stories260K.bin"), shared_path("models/tok512.bin"));
  ASSERT_TRUE(src);
  const std::string out = testing::temp_dir() + "/stories260K-converted.gguf";
  ASSERT_TRUE(export_gguf(*src, out).ok());
  auto m = load_or_die(out);
  ASSERT_TRUE(m);
  expect_golden(*m, 2);
}

// The CLI streams exactly llama2.c's text (stdout only; stats go to stderr).
TEST(ModelGolden, CliRunPrintsReferenceText) {
  const std::string want =
      testing::read_file(shared_path("models/reference/stories260K_greedy_t0_n256.stdout.txt"));
  for (const std::string& args :
       {"-m " + shared_path("models/stories260K.gguf"),
        "-m " + shared_path("models/stories260K.bin") + " --tokenizer " +
            shared_path("models/tok512.bin")}) {
    auto r = testing::run_command(testing::hinge_binary() + " run " + args +
                                  " -n 256 --temp 0 -t 2 2>/dev/null");
    EXPECT_EQ(r.exit_code, 0);
    EXPECT_EQ(r.out, want) << args;
  }
}

TEST(ModelGolden, CliJsonHasIdsAndStats) {
  auto r = testing::run_command(testing::hinge_binary() + " run -m " +
                                shared_path("models/stories260K.gguf") +
                                " -n 200 --temp 0 -t 1 --json 2>/dev/null");
  ASSERT_EQ(r.exit_code, 0);
  const auto want =
      read_csv_ids(shared_path("models/reference/stories260K_greedy_t0_n200.token_ids.csv"));
  // Parse the token_ids array out of the JSON without depending on key order.
  const auto at = r.out.find("\"token_ids\":[");
  ASSERT_NE(at, std::string::npos) << r.out;
  const auto end = r.out.find(']', at);
  EXPECT_EQ(testing::parse_ids(r.out.substr(at + 13, end - at - 13)), want);
  for (const char* key : {"\"text\"", "\"prompt_tokens\":1", "\"generated_tokens\":200",
                          "\"prefill_tokens_per_s\"", "\"decode_tokens_per_s\"",
                          "\"achieved_gb_per_s\"", "\"finish_reason\":\"length\""})
    EXPECT_NE(r.out.find(key), std::string::npos) << key << " missing in " << r.out;
}

}  // namespace
}  // namespace hinge
