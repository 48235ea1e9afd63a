// The hinge command: help, errors on bad input, tokenize, info, synth, convert's type fallback,
// run's --ctx-size clamp, --max-num-seqs and --echo.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "model/gguf_export.h"
#include "model_test_util.h"

namespace hinge {
namespace {

using testing::hinge_binary;
using testing::run_command;
using testing::shared_path;

TEST(Cli, HelpListsSubcommands) {
  auto r = run_command(hinge_binary() + " --help");
  EXPECT_EQ(r.exit_code, 0);
  for (const char* cmd : {"run", "tokenize", "info", "convert", "synth"})
    EXPECT_NE(r.out.find(cmd), std::string::npos) << cmd;
  auto rr = run_command(hinge_binary() + " run --help");
  for (const char* opt : {"--temp", "--top-k", "--top-p", "--min-p", "--seed", "--threads", "--json"})
    EXPECT_NE(rr.out.find(opt), std::string::npos) << opt;
}

// Corrupt and wrong-format inputs: non-zero exit and exactly one line on stderr naming the file.
TEST(Cli, CorruptInputsGiveOneLineErrors) {
  const std::string dir = testing::temp_dir();
  const std::string model = testing::read_file(shared_path("models/stories260K.gguf"));
  auto write = [&](const std::string& name, const std::string& bytes) {
    std::ofstream(dir + "/" + name, std::ios::binary) << bytes;
    return dir + "/" + name;
  };
  std::string flipped = model;
  flipped[9] ^= 0x40;  // tensor count high bits: absurd count
  std::string bad_type = model;
  std::vector<std::string> files = {
      write("truncated.gguf", model.substr(0, model.size() / 3)),
      write("header-only.gguf", model.substr(0, 20)),
      write("flipped.gguf", flipped),
      write("random.bin", std::string(4096, '\x5a')),
      write("json.gguf", "{\"not\": \"a model\"}"),
      write("empty.gguf", ""),
      dir + "/does-not-exist.gguf",
  };
  for (const auto& f : files) {
    auto r = run_command(hinge_binary() + " run -m " + f + " -n 4 2>&1 >/dev/null");
    EXPECT_NE(r.exit_code, 0) << f;
    ASSERT_FALSE(r.out.empty()) << f;
    EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << r.out;
    EXPECT_EQ(r.out.rfind("hinge: ", 0), 0u) << r.out;
    EXPECT_NE(r.out.find(f.substr(f.rfind('/') + 1)), std::string::npos) << r.out;
  }
}

// An architecture hinge does not run (the recurrent-state families among them) is one line
// that names it and lists what hinge runs; a hostile name cannot break the line.
TEST(Cli, UnsupportedArchitectureIsOneLineNamingIt) {
  const std::string dir = testing::temp_dir();
  const std::string model = testing::read_file(shared_path("models/stories260K.gguf"));
  const std::string key = "general.architecture";
  const size_t at = model.find(key);
  ASSERT_NE(at, std::string::npos);
  const size_t value = at + key.size() + 4 + 8;  // type u32, length u64, then the bytes
  ASSERT_EQ(model.substr(value, 5), "llama");
  for (const std::string arch : {"jamba", "mamba", "rwkv7", "ab\ncd"}) {
    std::string bytes = model;
    bytes.replace(value, 5, arch);
    const std::string path = dir + "/arch.gguf";
    std::ofstream(path, std::ios::binary) << bytes;
    auto r = run_command(hinge_binary() + " info " + path + " 2>&1 >/dev/null");
    EXPECT_NE(r.exit_code, 0);
    EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << r.out;
    const std::string shown = arch == "ab\ncd" ? "ab\\x0acd" : arch;
    EXPECT_NE(r.out.find("architecture '" + shown + "' is not supported"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("qwen2, qwen3, gemma2, gemma3"), std::string::npos) << r.out;
  }
}

TEST(Cli, TokenizeMatchesTokenizerAndAddsBos) {
  auto r = run_command("printf 'Once upon a time' | " + hinge_binary() + " tokenize -m " +
                       shared_path("models/stories260K.gguf"));
  ASSERT_EQ(r.exit_code, 0);
  const auto ids = testing::parse_ids(r.out);
  ASSERT_FALSE(ids.empty());
  EXPECT_EQ(ids[0], 1);
  auto nb = run_command("printf 'Once upon a time' | " + hinge_binary() + " tokenize --no-bos -m " +
                        shared_path("models/stories260K.gguf"));
  EXPECT_EQ(testing::parse_ids(nb.out), std::vector<int32_t>(ids.begin() + 1, ids.end()));
  // Vocab-only GGUF files work too.
  auto v = run_command("printf 'Hello world' | " + hinge_binary() + " tokenize --no-bos -m " +
                       shared_path("vocab/ggml-vocab-llama-spm.gguf"));
  EXPECT_EQ(v.exit_code, 0);
  EXPECT_EQ(testing::parse_ids(v.out), (std::vector<int32_t>{15043, 3186}));
}

TEST(Cli, InfoShowsShapesAndKvBytes) {
  auto r = run_command(hinge_binary() + " info " + shared_path("models/stories260K.gguf"));
  ASSERT_EQ(r.exit_code, 0);
  // 2 x 5 layers x 4 kv heads x 8 dims x 4 bytes = 1280 bytes per token in f32.
  EXPECT_NE(r.out.find("1280 bytes f32"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("blk.4.ffn_down.weight"), std::string::npos);
  EXPECT_NE(r.out.find("8 query, 4 kv"), std::string::npos);
}

TEST(Cli, SynthWritesLoadableModel) {
  const std::string out = testing::temp_dir() + "/tiny-q8.gguf";
  auto r = run_command(hinge_binary() + " synth --preset tiny --type q8_0 -o " + out + " 2>/dev/null");
  ASSERT_EQ(r.exit_code, 0);
  auto m = testing::load_or_die(out);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->config.dim, 256);
  EXPECT_EQ(m->weights.layers[0].wq.type, GgmlType::Q8_0);
  auto run = run_command(hinge_binary() + " run -m " + out + " -n 8 --temp 0 --json 2>/dev/null");
  EXPECT_EQ(run.exit_code, 0);
  EXPECT_NE(run.out.find("\"generated_tokens\""), std::string::npos);
  // A Q5_K_M-style file: Q5_K matrices, the output matrix in Q6_K.
  const std::string q5 = testing::temp_dir() + "/tiny-q5k.gguf";
  ASSERT_EQ(run_command(hinge_binary() + " synth --preset tiny --type q5_k -o " + q5 + " 2>/dev/null")
                .exit_code,
            0);
  auto m5 = testing::load_or_die(q5);
  ASSERT_TRUE(m5);
  EXPECT_EQ(m5->weights.layers[0].wq.type, GgmlType::Q5_K);
  EXPECT_EQ(m5->weights.output.type, GgmlType::Q6_K);
  auto run5 = run_command(hinge_binary() + " run -m " + q5 + " -n 8 --temp 0 --json 2>/dev/null");
  EXPECT_EQ(run5.exit_code, 0);
  EXPECT_NE(run5.out.find("\"generated_tokens\":8"), std::string::npos) << run5.out;
  // Q6_K throughout: 8 tokens in its row groups (where they run) and in the GGUF layout.
  const std::string q6 = testing::temp_dir() + "/tiny-q6k.gguf";
  ASSERT_EQ(run_command(hinge_binary() + " synth --preset tiny --type q6_k -o " + q6 + " 2>/dev/null")
                .exit_code,
            0);
  auto m6 = testing::load_or_die(q6);
  ASSERT_TRUE(m6);
  EXPECT_EQ(m6->weights.layers[0].wq.type, GgmlType::Q6_K);
  EXPECT_EQ(m6->weights.output.type, GgmlType::Q6_K);
  const std::string run6 = " run -m " + q6 + " -n 8 --temp 0 --json 2>/dev/null";
  for (const char* layout : {"row-groups", "gguf"}) {
    auto r6 =
        run_command(std::string("HINGE_WEIGHT_LAYOUT=") + layout + " " + hinge_binary() + run6);
    EXPECT_EQ(r6.exit_code, 0) << layout;
    EXPECT_NE(r6.out.find("\"generated_tokens\":8"), std::string::npos) << layout << r6.out;
  }
  auto bad = run_command(hinge_binary() + " synth --preset nope --type q8_0 -o " + out + " 2>&1");
  EXPECT_NE(bad.exit_code, 0);
}

// Counts the lines of `text` that contain `needle`.
int count_lines_with(const std::string& text, const std::string& needle) {
  int n = 0;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) n += line.find(needle) != std::string::npos;
  return n;
}

// stories260K has dim 64 and FFN 172: no row is a multiple of Q4_K's 256. Each matrix falls back
// on its own (as llama.cpp's quantizer does), with one warning line each and a count at the end:
// rows of 64 -> q4_0 (q8_0 for the output matrix, asked as q6_K), rows of 172 -> f16.
TEST(Cli, ConvertQ4KFallsBackPerTensor) {
  const std::string out = testing::temp_dir() + "/stories-q4k.gguf";
  auto r = run_command(hinge_binary() + " convert -m " + shared_path("models/stories260K.gguf") +
                       " --type q4_k -o " + out + " 2>&1 >/dev/null");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(count_lines_with(r.out, "hinge: warning: blk.0.attn_q.weight [64, 64]: rows of 64 "
                                    "values are not a multiple of q4_K's block of 256; using q4_0"),
            1)
      << r.out;
  EXPECT_EQ(count_lines_with(r.out, "hinge: warning: blk.4.ffn_down.weight [172, 64]: rows of "
                                    "172 values are not a multiple of q4_K's block of 256; using "
                                    "f16"),
            1)
      << r.out;
  EXPECT_EQ(count_lines_with(r.out, "hinge: warning: output.weight [64, 512]: rows of 64 "
                                    "values are not a multiple of q6_K's block of 256; using q8_0"),
            1)
      << r.out;
  // 5 layers x 7 matrices + the embedding + the output matrix; the norms are vectors and stay
  // f32 without a warning.
  EXPECT_EQ(count_lines_with(r.out, "hinge: warning: "), 37) << r.out;
  EXPECT_EQ(count_lines_with(r.out, "norm"), 0) << r.out;
  EXPECT_EQ(count_lines_with(r.out, "hinge: 37 tensors fell back to another type"), 1) << r.out;

  auto m = testing::load_or_die(out);
  ASSERT_TRUE(m);
  for (const LayerWeights& l : m->weights.layers) {
    EXPECT_EQ(l.wq.type, GgmlType::Q4_0);
    EXPECT_EQ(l.w_gate.type, GgmlType::Q4_0);
    EXPECT_EQ(l.w_down.type, GgmlType::F16);
  }
  EXPECT_EQ(m->weights.token_embd.type, GgmlType::Q4_0);
  EXPECT_EQ(m->weights.output.type, GgmlType::Q8_0);
  auto info = run_command(hinge_binary() + " info " + out);
  EXPECT_NE(info.out.find("q4_0"), std::string::npos) << info.out;
  auto run = run_command(hinge_binary() + " run -m " + out + " -n 8 --temp 0 --json 2>/dev/null");
  EXPECT_EQ(run.exit_code, 0);
  EXPECT_NE(run.out.find("\"generated_tokens\":8"), std::string::npos) << run.out;

  // Types whose blocks fit keep quiet: f16 has no blocks.
  auto f16 = run_command(hinge_binary() + " convert -m " + shared_path("models/stories260K.gguf") +
                         " --type f16 -o " + out + " 2>&1 >/dev/null");
  EXPECT_EQ(f16.exit_code, 0);
  EXPECT_EQ(count_lines_with(f16.out, "warning"), 0) << f16.out;
  EXPECT_EQ(count_lines_with(f16.out, "fell back"), 0) << f16.out;
  EXPECT_EQ(fallback_matrix_type(GgmlType::Q4_K, 512), GgmlType::Q4_K);
  EXPECT_EQ(fallback_matrix_type(GgmlType::Q6_K, 96), GgmlType::Q8_0);
  EXPECT_EQ(fallback_matrix_type(GgmlType::Q8_0, 100), GgmlType::F16);
}

// -c above the model's 2048 tokens: one warning with what was asked, the model's and what is
// used; errors about the context then say the model's limit instead of "raise --ctx-size".
TEST(Cli, RunCtxSizeAboveModelWarnsAndErrorsSayTheLimit) {
  const std::string model = shared_path("models/stories260K.gguf");
  auto r = run_command(hinge_binary() + " run -m " + model +
                       " -p Once -n 4 --temp 0 -c 100000 2>&1 >/dev/null");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(count_lines_with(r.out, "warning"), 1) << r.out;
  EXPECT_EQ(count_lines_with(r.out, "hinge: warning: --ctx-size 100000 is above the model's "
                                    "context of 2048 tokens; using 2048"),
            1)
      << r.out;
  auto quiet = run_command(hinge_binary() + " run -m " + model +
                           " -p Once -n 4 --temp 0 -c 2048 2>&1 >/dev/null");
  EXPECT_EQ(count_lines_with(quiet.out, "warning"), 0) << quiet.out;

  auto full = run_command(hinge_binary() + " run -m " + model +
                          " --random-prompt 2048 -n 4 -c 100000 2>&1 >/dev/null");
  EXPECT_NE(full.exit_code, 0);
  EXPECT_EQ(count_lines_with(full.out, "hinge: prompt is 2048 tokens but the context holds 2048; "
                                       "the model's context is 2048 tokens; --ctx-size cannot "
                                       "exceed it"),
            1)
      << full.out;
  EXPECT_EQ(full.out.find("raise --ctx-size"), std::string::npos) << full.out;
  auto small = run_command(hinge_binary() + " run -m " + model +
                           " --random-prompt 20 -n 4 -c 16 2>&1 >/dev/null");
  EXPECT_NE(small.exit_code, 0);
  EXPECT_EQ(count_lines_with(small.out, "hinge: prompt is 20 tokens but the context holds 16; "
                                        "raise --ctx-size (at most 2048, the model's context)"),
            1)
      << small.out;
  auto bench = run_command(hinge_binary() + " bench -m " + model +
                           " --requests 1 --prompt-tokens 4000 --gen-tokens 4 -c 100000 2>&1");
  EXPECT_NE(bench.exit_code, 0);
  EXPECT_EQ(count_lines_with(bench.out, "hinge: warning: --ctx-size 100000"), 1) << bench.out;
  EXPECT_EQ(count_lines_with(bench.out, "the model's context is 2048 tokens; --ctx-size cannot "
                                        "exceed it"),
            1)
      << bench.out;
}

// `run` holds one sequence: --max-num-seqs is accepted with any value and ignored, and its help
// says so; engines that use it (bench) still check it.
TEST(Cli, RunIgnoresMaxNumSeqs) {
  const std::string model = shared_path("models/stories260K.gguf");
  for (const char* v : {"0", "-3", "1", "1000"}) {
    auto r = run_command(hinge_binary() + " run -m " + model + " -p Once -n 4 --temp 0 --json " +
                         "--max-num-seqs " + v + " 2>/dev/null");
    EXPECT_EQ(r.exit_code, 0) << v;
    EXPECT_NE(r.out.find("\"generated_tokens\":4"), std::string::npos) << v << r.out;
  }
  auto help = run_command(hinge_binary() + " run --help");
  EXPECT_NE(help.out.find("Ignored by run"), std::string::npos) << help.out;
  auto bench = run_command(hinge_binary() + " bench -m " + model + " --max-num-seqs 0 2>&1");
  EXPECT_NE(bench.exit_code, 0);
  EXPECT_NE(bench.out.find("--max-num-seqs"), std::string::npos) << bench.out;
}

// --echo prints the prompt, then exactly what run prints without it (greedy, same model).
TEST(Cli, RunEchoPrintsPromptFirst) {
  const std::string cmd = hinge_binary() + " run -m " + shared_path("models/stories260K.gguf") +
                          " -p 'Once upon a time' -n 24 --temp 0";
  auto plain = run_command(cmd + " 2>/dev/null");
  auto echo = run_command(cmd + " --echo 2>/dev/null");
  ASSERT_EQ(plain.exit_code, 0);
  ASSERT_EQ(echo.exit_code, 0);
  EXPECT_EQ(echo.out.rfind("Once upon a time", 0), 0u) << echo.out;
  EXPECT_EQ(echo.out, "Once upon a time" + plain.out);
  EXPECT_EQ(plain.out.rfind("Once upon a time", 0), std::string::npos) << plain.out;
  auto json = run_command(cmd + " --echo --json 2>/dev/null");
  ASSERT_EQ(json.exit_code, 0);
  EXPECT_NE(json.out.find("\"text\":\"Once upon a time"), std::string::npos) << json.out;
  auto help = run_command(hinge_binary() + " run --help");
  EXPECT_NE(help.out.find("--echo"), std::string::npos);
}

}  // namespace
}  // namespace hinge

namespace hinge::testing {
namespace {

TEST(Cli, RunShiftsPastTheContextAndSaysSo) {
  const std::string model = shared_path("models/stories260K.gguf");
  for (const char* kv : {"f16", "int8", "fp8_e4m3"}) {
    auto r = run_command(hinge_binary() + " run -m " + model +
                         " -c 128 --context-policy shift -n 5000 --json --seed 7 --kv-dtype " +
                         kv + " -p 'Once upon a time' 2>/dev/null");
    ASSERT_EQ(r.exit_code, 0) << kv;
    const auto j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["generated_tokens"], 5000) << kv;
    EXPECT_EQ(j["finish_reason"], "length");
    EXPECT_EQ(j["truncated"], true);
    EXPECT_GT(j["context_shifts"].get<int64_t>(), 250);
  }
  auto e = run_command(hinge_binary() + " run -m " + model +
                       " -c 128 --context-policy roll -n 5 2>&1 >/dev/null");
  EXPECT_NE(e.exit_code, 0);
  EXPECT_NE(e.out.find("--context-policy: unknown policy 'roll'; expected error or shift"),
            std::string::npos)
      << e.out;
}

}  // namespace
}  // namespace hinge::testing
