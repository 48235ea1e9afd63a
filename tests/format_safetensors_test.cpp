// safetensors reader and Hugging Face model folders: the real tinystories-656k folder, a
// synthetic two-shard folder, and corrupt headers / files that must fail cleanly.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "format/safetensors.h"
#include "test_util.h"

namespace hinge {
namespace {

using hinge::testing::read_file;
using hinge::testing::shared_path;
using hinge::testing::temp_dir;

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// A safetensors file: header JSON (padded with spaces to 8 bytes, as the reference writer
// does), then `data`.
std::string make_st(const std::string& header, const std::string& data) {
  std::string h = header;
  while (h.size() % 8) h += ' ';
  uint64_t n = h.size();
  std::string out(8, '\0');
  std::memcpy(out.data(), &n, 8);
  return out + h + data;
}

StatusOr<std::unique_ptr<SafetensorsFile>> parse(const std::string& bytes,
                                                 const std::string& name = "bad.safetensors") {
  return SafetensorsFile::from_memory(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(),
                                      name);
}

void expect_error(const std::string& bytes, const std::string& needle) {
  auto r = parse(bytes);
  ASSERT_FALSE(r.ok()) << "expected an error containing: " << needle;
  EXPECT_EQ(r.status().message().rfind("bad.safetensors: ", 0), 0u) << r.status().message();
  EXPECT_NE(r.status().message().find(needle), std::string::npos) << r.status().message();
}

std::string floats(const std::vector<float>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * 4);
}

const char* const kModelDir = "models/tinystories-656k";

TEST(FormatSafetensors, ReadsTinyStoriesFile) {
  const std::string path = shared_path(std::string(kModelDir) + "/model.safetensors");
  auto r = SafetensorsFile::open(path);
  ASSERT_TRUE(r.ok()) << r.status().message();
  const SafetensorsFile& f = **r;
  EXPECT_EQ(f.file_size(), 2626168u);
  EXPECT_EQ(f.data_offset(), 8u + 2160u);
  EXPECT_EQ(f.metadata().at("format"), "pt");
  ASSERT_EQ(f.tensors().size(), 20u);                       // lm_head, 2 x 9 per layer, norm
  EXPECT_EQ(f.find("model.embed_tokens.weight"), nullptr);  // tied: stored as lm_head only
  const SafetensorsTensor* lm = f.find("lm_head.weight");
  ASSERT_NE(lm, nullptr);
  EXPECT_EQ(lm->dtype, "F32");
  EXPECT_EQ(lm->type, GgmlType::F32);
  EXPECT_EQ(lm->shape, (std::vector<uint64_t>{2048, 128}));
  EXPECT_EQ(lm->ne, (std::vector<uint64_t>{128, 2048}));
  EXPECT_EQ(lm->offset, 0u);
  EXPECT_EQ(lm->num_bytes, 1048576u);
  EXPECT_EQ(lm->num_elements(), 2048u * 128);
  EXPECT_EQ(&f.tensors()[0], lm);  // sorted by offset
  const SafetensorsTensor* down = f.find("model.layers.0.mlp.down_proj.weight");
  ASSERT_NE(down, nullptr);
  EXPECT_EQ(down->shape, (std::vector<uint64_t>{128, 384}));
  EXPECT_EQ(down->ne, (std::vector<uint64_t>{384, 128}));
  EXPECT_EQ(down->offset, 1049088u);
  const SafetensorsTensor* k = f.find("model.layers.1.self_attn.k_proj.weight");
  ASSERT_NE(k, nullptr);
  EXPECT_EQ(k->shape, (std::vector<uint64_t>{64, 128}));
  const SafetensorsTensor* norm = f.find("model.norm.weight");
  ASSERT_NE(norm, nullptr);
  EXPECT_EQ(norm->shape, (std::vector<uint64_t>{128}));
  EXPECT_EQ(norm->data + norm->num_bytes, lm->data + (f.file_size() - f.data_offset()));
  const std::string raw = read_file(path);
  EXPECT_EQ(std::memcmp(down->data, raw.data() + 2168 + 1049088, down->num_bytes), 0);
}

TEST(FormatSafetensors, OpensTinyStoriesFolder) {
  const std::string dir = shared_path(kModelDir);
  auto r = HfModelDir::open(dir);
  ASSERT_TRUE(r.ok()) << r.status().message();
  const HfModelDir& m = **r;
  EXPECT_EQ(m.config().at("hidden_size").get<int>(), 128);
  EXPECT_EQ(m.config().at("num_hidden_layers").get<int>(), 2);
  EXPECT_EQ(m.config().at("model_type").get<std::string>(), "llama");
  EXPECT_EQ(m.shards().size(), 1u);
  EXPECT_EQ(m.num_tensors(), 20u);
  const SafetensorsTensor* lm = m.find_tensor("lm_head.weight");
  ASSERT_NE(lm, nullptr);
  EXPECT_EQ(lm->shape, (std::vector<uint64_t>{2048, 128}));
  // The tied embedding resolves through __metadata__ to the stored lm_head.
  EXPECT_EQ(m.find_tensor("model.embed_tokens.weight"), lm);
  EXPECT_EQ(m.find_tensor("format"), nullptr);
  EXPECT_EQ(m.find_tensor("model.layers.2.mlp.up_proj.weight"), nullptr);
  auto names = m.tensor_names();
  ASSERT_EQ(names.size(), 20u);
  EXPECT_EQ(names.front(), "lm_head.weight");
  EXPECT_EQ(names.back(), "model.norm.weight");
  EXPECT_EQ(m.tokenizer_json_path(), dir + "/tokenizer.json");
  EXPECT_EQ(m.tokenizer_config_path(), dir + "/tokenizer_config.json");
  EXPECT_EQ(m.find_file("generation_config.json"), dir + "/generation_config.json");
  EXPECT_EQ(m.find_file("nope.json"), std::nullopt);
  EXPECT_EQ(m.find_file("../tinystories-656k/config.json"), std::nullopt);
}

// Two shards + index, written by the test.
std::string make_sharded_dir() {
  const std::string dir = temp_dir();
  write_bytes(dir + "/config.json", R"({"hidden_size": 4, "architectures": ["LlamaForCausalLM"]})");
  std::string f16(8, '\0');
  const uint16_t h[4] = {0x3c00, 0x4000, 0xc000, 0x0000};  // 1, 2, -2, 0
  std::memcpy(f16.data(), h, 8);
  write_bytes(dir + "/model-00001-of-00002.safetensors",
              make_st(R"({"a":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]},)"
                      R"("b":{"dtype":"F16","shape":[4],"data_offsets":[24,32]}})",
                      floats({1, 2, 3, 4, 5, 6}) + f16));
  std::string bf16(8, '\0');
  const uint16_t b[4] = {0x3f80, 0x4040, 0xbf80, 0x7f80};  // 1, 3, -1, inf
  std::memcpy(bf16.data(), b, 8);
  write_bytes(dir + "/model-00002-of-00002.safetensors",
              make_st(R"({"__metadata__":{"format":"pt"},)"
                      R"("c":{"dtype":"BF16","shape":[2,2],"data_offsets":[0,8]}})",
                      bf16));
  write_bytes(dir + "/model.safetensors.index.json",
              R"({"metadata":{"total_size":40},"weight_map":{)"
              R"("a":"model-00001-of-00002.safetensors","b":"model-00001-of-00002.safetensors",)"
              R"("c":"model-00002-of-00002.safetensors"}})");
  return dir;
}

TEST(FormatSafetensors, OpensShardedFolder) {
  const std::string dir = make_sharded_dir();
  auto r = HfModelDir::open(dir);
  ASSERT_TRUE(r.ok()) << r.status().message();
  const HfModelDir& m = **r;
  EXPECT_EQ(m.config().at("hidden_size").get<int>(), 4);
  EXPECT_EQ(m.shards().size(), 2u);
  EXPECT_EQ(m.tensor_names(), (std::vector<std::string>{"a", "b", "c"}));
  const SafetensorsTensor* a = m.find_tensor("a");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->shape, (std::vector<uint64_t>{2, 3}));
  EXPECT_EQ(a->ne, (std::vector<uint64_t>{3, 2}));
  float av[6];
  std::memcpy(av, a->data, 24);
  EXPECT_EQ(av[0], 1.0f);
  EXPECT_EQ(av[5], 6.0f);
  const SafetensorsTensor* b = m.find_tensor("b");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->type, GgmlType::F16);
  EXPECT_EQ(b->offset, 24u);
  uint16_t bv;
  std::memcpy(&bv, b->data + 2, 2);
  EXPECT_EQ(bv, 0x4000);
  const SafetensorsTensor* c = m.find_tensor("c");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->type, GgmlType::BF16);
  EXPECT_EQ(c->dtype, "BF16");
  std::memcpy(&bv, c->data + 6, 2);
  EXPECT_EQ(bv, 0x7f80);
  EXPECT_FALSE(m.tokenizer_json_path());
  EXPECT_FALSE(m.tokenizer_config_path());
}

TEST(FormatSafetensors, RejectsBadFolders) {
  auto expect_dir_error = [](const std::string& dir, const std::string& needle) {
    auto r = HfModelDir::open(dir);
    ASSERT_FALSE(r.ok()) << needle;
    EXPECT_NE(r.status().message().find(needle), std::string::npos) << r.status().message();
  };
  const std::string shard1 = "model-00001-of-00002.safetensors";
  const std::string shard2 = "model-00002-of-00002.safetensors";
  {
    std::string d = make_sharded_dir();  // index puts "c" in the wrong shard
    write_bytes(d + "/model.safetensors.index.json",
                R"({"weight_map":{"a":")" + shard1 + R"(","c":")" + shard1 + R"("}})");
    expect_dir_error(d, "places tensor 'c' in " + shard1);
  }
  {
    std::string d = make_sharded_dir();  // index names a tensor no shard holds
    write_bytes(d + "/model.safetensors.index.json",
                R"({"weight_map":{"a":")" + shard1 + R"(","zz":")" + shard2 + R"("}})");
    expect_dir_error(d, "tensor 'zz'");
  }
  {
    std::string d = make_sharded_dir();  // the same tensor in both shards
    write_bytes(d + "/" + shard2,
                make_st(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", floats({1})));
    expect_dir_error(d, "tensor 'a' appears in both");
  }
  {
    std::string d = make_sharded_dir();
    write_bytes(d + "/model.safetensors.index.json", R"({"weight_map":{"a":"../x.safetensors"}})");
    expect_dir_error(d, "invalid shard file");
  }
  {
    std::string d = make_sharded_dir();
    write_bytes(d + "/model.safetensors.index.json",
                R"({"weight_map":{"a":"missing.safetensors"}})");
    expect_dir_error(d, "missing.safetensors: cannot open");
  }
  {
    std::string d = make_sharded_dir();
    write_bytes(d + "/model.safetensors.index.json", R"({"metadata":{}})");
    expect_dir_error(d, "weight_map");
  }
  {
    std::string d = make_sharded_dir();
    write_bytes(d + "/model.safetensors.index.json", R"({"weight_map":)");
    expect_dir_error(d, "model.safetensors.index.json: invalid JSON");
  }
  {
    std::string d = make_sharded_dir();
    write_bytes(d + "/config.json", "{not json");
    expect_dir_error(d, "config.json: invalid JSON");
  }
  {
    std::string d = make_sharded_dir();
    ::remove((d + "/config.json").c_str());
    expect_dir_error(d, "missing config.json");
  }
  {
    std::string d = temp_dir();
    write_bytes(d + "/config.json", "{}");
    expect_dir_error(d, "no model.safetensors");
    write_bytes(d + "/model.safetensors", std::string("GGUF\3\0\0\0\0\0\0\0\0\0\0\0", 16));
    expect_dir_error(d, "model.safetensors: safetensors header length");
  }
  expect_dir_error(shared_path("models/stories260K.gguf"), "not a directory");
}

TEST(FormatSafetensors, RejectsCraftedHeaders) {
  const std::string d8 = floats({1, 2});
  auto one = [&](const std::string& entry) { return make_st("{\"t\":" + entry + "}", d8); };
  EXPECT_TRUE(parse(one(R"({"dtype":"F32","shape":[2],"data_offsets":[0,8]})")).ok());
  EXPECT_TRUE(parse(make_st("{}", "")).ok());  // no tensors is valid
  expect_error("1234567", "too small");
  expect_error(std::string("\xff\xff\0\0\0\0\0\0{}", 10), "exceeds the file size");
  expect_error(make_st("[1,2]", ""), "does not start with a JSON object");
  expect_error(make_st("{\"t\": 1", ""), "invalid safetensors header JSON");
  expect_error(make_st(R"({"t":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                       R"("t":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                       d8),
               "duplicate entry 't'");
  expect_error(make_st(R"({"__metadata__":[1]})", ""), "__metadata__");
  expect_error(one("[]"), "not a JSON object");
  expect_error(one(R"({"shape":[2],"data_offsets":[0,8]})"), "dtype");
  expect_error(one(R"({"dtype":"F32","data_offsets":[0,8]})"), "shape");
  expect_error(one(R"({"dtype":"F32","shape":[2]})"), "data_offsets");
  expect_error(one(R"({"dtype":"F32","shape":[2],"data_offsets":[0]})"), "data_offsets");
  expect_error(one(R"({"dtype":"Q9","shape":[2],"data_offsets":[0,8]})"), "unknown dtype 'Q9'");
  expect_error(one(R"({"dtype":"I64","shape":[1],"data_offsets":[0,8]})"),
               "tensor 't': unsupported dtype 'I64' (supported: F32, F16, BF16)");
  expect_error(one(R"({"dtype":"F32","shape":[-2],"data_offsets":[0,8]})"), "non-negative");
  expect_error(one(R"({"dtype":"F32","shape":[2.0],"data_offsets":[0,8]})"), "non-negative");
  expect_error(one(R"({"dtype":"F32","shape":[1,1,1,1,1,1,1,1,1],"data_offsets":[0,4]})"),
               "9 dimensions");
  expect_error(one(R"({"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]})"),
               "overflows");
  expect_error(one(R"({"dtype":"F32","shape":[2],"data_offsets":[8,0]})"), "end before begin");
  expect_error(one(R"({"dtype":"F32","shape":[2],"data_offsets":[-1,8]})"), "non-negative");
  expect_error(one(R"({"dtype":"F32","shape":[4],"data_offsets":[0,16]})"),
               "extends past end of file");
  expect_error(one(R"({"dtype":"F32","shape":[3],"data_offsets":[0,8]})"), "needs 12");
  expect_error(make_st(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                       R"("b":{"dtype":"F16","shape":[2],"data_offsets":[4,8]}})",
                       d8),
               "tensor 'b' data [4, 8) overlaps tensor 'a' [0, 8)");
  // Scalars and empty tensors are legal safetensors.
  auto ok = parse(make_st(R"({"s":{"dtype":"F32","shape":[],"data_offsets":[0,4]},)"
                          R"("e":{"dtype":"F32","shape":[0,5],"data_offsets":[4,4]},)"
                          R"("f":{"dtype":"BF16","shape":[2],"data_offsets":[4,8]}})",
                          d8));
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  EXPECT_EQ((*ok)->find("s")->num_elements(), 1u);
  EXPECT_EQ((*ok)->find("e")->num_bytes, 0u);
  EXPECT_EQ((*ok)->find("e")->ne, (std::vector<uint64_t>{5, 0}));
}

TEST(FormatSafetensors, WrongFormatsFailCleanly) {
  const std::string dir = temp_dir();
  auto expect_open_error = [](const std::string& path, const std::string& needle) {
    auto r = SafetensorsFile::open(path);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().message().rfind(path + ": ", 0), 0u) << r.status().message();
    EXPECT_NE(r.status().message().find(needle), std::string::npos) << r.status().message();
  };
  expect_open_error(dir, "is a directory");
  write_bytes(dir + "/empty.safetensors", "");
  expect_open_error(dir + "/empty.safetensors", "empty file");
  expect_open_error(dir + "/missing.safetensors", "cannot open");
  expect_open_error(shared_path("models/stories260K.gguf"), "exceeds the file size");
  expect_open_error(shared_path(std::string(kModelDir) + "/config.json"), "exceeds the file size");
  expect_open_error(shared_path("models/stories260K.bin"), "header");
}

TEST(FormatSafetensors, TruncationAndBitFlipsFailCleanly) {
  const std::string orig = read_file(shared_path(std::string(kModelDir) + "/model.safetensors"));
  ASSERT_EQ(orig.size(), 2626168u);
  std::mt19937_64 rng(99);
  std::vector<size_t> cuts;
  for (size_t n = 0; n < 2168 + 16; n += 5) cuts.push_back(n);
  for (int k = 0; k < 100; ++k) cuts.push_back(2168 + rng() % (orig.size() - 2168));
  for (size_t n : cuts) {
    auto r = parse(orig.substr(0, n), "cut.safetensors");
    ASSERT_FALSE(r.ok()) << "cut at " << n;
    ASSERT_EQ(r.status().message().rfind("cut.safetensors: ", 0), 0u) << r.status().message();
  }
  int failed = 0;
  for (int k = 0; k < 300; ++k) {
    std::string b = orig;
    size_t at = rng() % 2168;
    b[at] = static_cast<char>(b[at] ^ (1 << (rng() % 8)));
    auto r = parse(b, "flip.safetensors");
    if (!r.ok()) {
      ++failed;
      ASSERT_EQ(r.status().message().rfind("flip.safetensors: ", 0), 0u);
      continue;
    }
    for (const auto& t : (*r)->tensors()) {
      ASSERT_GE(t.data, reinterpret_cast<const uint8_t*>(b.data()));
      ASSERT_LE(t.data + t.num_bytes, reinterpret_cast<const uint8_t*>(b.data()) + b.size());
    }
  }
  EXPECT_GT(failed, 100);
}

}  // namespace
}  // namespace hinge
