// GGUF reader/writer: real files, writer round-trips, and a corruption suite (truncation, bit
// flips, random bytes, crafted headers, wrong formats) that must fail cleanly, never crash.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "format/gguf.h"
#include "test_util.h"

namespace hinge::gguf {
namespace {

using hinge::testing::read_file;
using hinge::testing::shared_path;
using hinge::testing::temp_dir;

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

StatusOr<std::unique_ptr<GgufFile>> parse(const std::string& bytes,
                                          const std::string& name = "mem.gguf") {
  return GgufFile::from_memory(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), name);
}

// Expects a clean failure whose message names the file and contains `needle`.
void expect_error(const std::string& bytes, const std::string& needle) {
  auto r = parse(bytes, "bad.gguf");
  ASSERT_FALSE(r.ok()) << "expected an error containing: " << needle;
  EXPECT_EQ(r.status().message().rfind("bad.gguf: ", 0), 0u) << r.status().message();
  EXPECT_NE(r.status().message().find(needle), std::string::npos) << r.status().message();
}

// Little-endian byte builder for hand-crafted headers.
struct Bytes {
  std::string b;
  template <typename T>
  Bytes& put(T v) {
    char tmp[sizeof(T)];
    std::memcpy(tmp, &v, sizeof(T));
    b.append(tmp, sizeof(T));
    return *this;
  }
  Bytes& str(const std::string& s) {
    put<uint64_t>(s.size());
    b += s;
    return *this;
  }
  Bytes& header(uint64_t n_tensors, uint64_t n_kv, uint32_t version = 3) {
    b += "GGUF";
    return put<uint32_t>(version).put<uint64_t>(n_tensors).put<uint64_t>(n_kv);
  }
  Bytes& kv_u32(const std::string& key, uint32_t v) {
    return str(key).put<uint32_t>(4).put<uint32_t>(v);
  }
  Bytes& tensor(const std::string& name, std::vector<uint64_t> ne, uint32_t type, uint64_t off) {
    str(name).put<uint32_t>(static_cast<uint32_t>(ne.size()));
    for (uint64_t d : ne) put<uint64_t>(d);
    return put<uint32_t>(type).put<uint64_t>(off);
  }
  Bytes& pad(size_t align) {
    b.resize((b.size() + align - 1) / align * align, '\0');
    return *this;
  }
  Bytes& zeros(size_t n) {
    b.append(n, '\0');
    return *this;
  }
};

// --- real files ------------------------------------------------------------------------------

TEST(FormatGguf, ReadsStories260K) {
  auto r = GgufFile::open(shared_path("models/stories260K.gguf"));
  ASSERT_TRUE(r.ok()) << r.status().message();
  const GgufFile& f = **r;
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.file_size(), 1185376u);
  EXPECT_EQ(f.alignment(), 32u);
  EXPECT_EQ(f.data_offset(), 14176u);  // header ends at 14152, padded to 32
  EXPECT_EQ(f.metadata().size(), 19u);
  EXPECT_EQ(f.metadata()[0].first, "tokenizer.ggml.tokens");
  EXPECT_EQ(f.get_string("general.architecture"), "llama");
  EXPECT_EQ(f.get_string("tokenizer.ggml.model"), "llama");
  EXPECT_EQ(f.get_int("llama.embedding_length"), 64);
  EXPECT_EQ(f.get_int("llama.block_count"), 5);
  EXPECT_EQ(f.get_int("llama.feed_forward_length"), 172);
  EXPECT_EQ(f.get_int("llama.attention.head_count"), 8);
  EXPECT_EQ(f.get_int("llama.attention.head_count_kv"), 4);
  EXPECT_EQ(f.get_uint("llama.context_length"), 2048u);
  EXPECT_EQ(f.get_uint("tokenizer.ggml.seperator_token_id"), 4294967295u);
  EXPECT_FLOAT_EQ(*f.get_float("llama.attention.layer_norm_rms_epsilon"), 1e-5f);
  EXPECT_FALSE(f.get_string("llama.block_count"));  // wrong type
  EXPECT_FALSE(f.get_int("general.architecture"));
  EXPECT_FALSE(f.get_int("no.such.key"));
  EXPECT_FALSE(f.get_bool("llama.block_count"));

  auto tokens = f.get_string_array("tokenizer.ggml.tokens");
  ASSERT_TRUE(tokens);
  ASSERT_EQ(tokens->size(), 512u);
  EXPECT_EQ((*tokens)[0], "<unk>");
  EXPECT_EQ((*tokens)[1], "<s>");
  EXPECT_EQ((*tokens)[2], "</s>");
  EXPECT_EQ((*tokens)[511], "\xe2\x80\x8a");
  auto scores = f.get_float_array("tokenizer.ggml.scores");
  ASSERT_TRUE(scores);
  ASSERT_EQ(scores->size(), 512u);
  EXPECT_EQ((*scores)[0], 0.0f);
  EXPECT_EQ((*scores)[511], -252.0f);
  auto types = f.get_int_array("tokenizer.ggml.token_type");
  ASSERT_TRUE(types);
  ASSERT_EQ(types->size(), 512u);
  EXPECT_EQ((*types)[0], 2);
  EXPECT_EQ((*types)[1], 3);
  EXPECT_EQ((*types)[511], 1);
  EXPECT_FALSE(f.get_float_array("tokenizer.ggml.tokens"));

  ASSERT_EQ(f.tensors().size(), 48u);
  const TensorInfo* emb = f.find_tensor("token_embd.weight");
  ASSERT_NE(emb, nullptr);
  EXPECT_EQ(emb->ne, (std::vector<uint64_t>{64, 512}));
  EXPECT_EQ(emb->type, GgmlType::F32);
  EXPECT_EQ(emb->offset, 0u);
  EXPECT_EQ(emb->num_bytes, 64u * 512 * 4);
  EXPECT_EQ(emb->num_elements(), 64u * 512);
  const TensorInfo* down = f.find_tensor("blk.4.ffn_down.weight");
  ASSERT_NE(down, nullptr);
  EXPECT_EQ(down->ne, (std::vector<uint64_t>{172, 64}));
  EXPECT_EQ(down->offset, 1082880u);
  const TensorInfo* last = f.find_tensor("blk.4.ffn_norm.weight");
  ASSERT_NE(last, nullptr);
  EXPECT_EQ(last->data + last->num_bytes, emb->data + (f.file_size() - f.data_offset()));
  EXPECT_EQ(f.find_tensor("blk.5.ffn_norm.weight"), nullptr);
  // The data pointer addresses the file bytes: compare against a plain read.
  std::string raw = read_file(shared_path("models/stories260K.gguf"));
  EXPECT_EQ(std::memcmp(down->data, raw.data() + 14176 + 1082880, down->num_bytes), 0);
}

TEST(FormatGguf, ReadsVocabOnlyFiles) {
  struct Expect {
    const char* file;
    const char* model;
    size_t num_tokens;
  };
  const Expect cases[] = {{"ggml-vocab-llama-spm.gguf", "llama", 32000},
                          {"ggml-vocab-gpt-2.gguf", "gpt2", 50257},
                          {"ggml-vocab-falcon.gguf", "gpt2", 65024},
                          {"ggml-vocab-deepseek-coder.gguf", "gpt2", 32256}};
  for (const auto& c : cases) {
    auto r = GgufFile::open(shared_path(std::string("vocab/") + c.file));
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_EQ((*r)->version(), 3u);
    EXPECT_TRUE((*r)->tensors().empty());
    EXPECT_EQ((*r)->get_string("tokenizer.ggml.model"), c.model) << c.file;
    auto tokens = (*r)->get_string_array("tokenizer.ggml.tokens");
    ASSERT_TRUE(tokens);
    EXPECT_EQ(tokens->size(), c.num_tokens) << c.file;
  }
  auto gpt2 = GgufFile::open(shared_path("vocab/ggml-vocab-gpt-2.gguf"));
  ASSERT_TRUE(gpt2.ok());
  EXPECT_EQ((*gpt2)->get_string_array("tokenizer.ggml.tokens")->back(), "<|endoftext|>");
}

// --- writer ----------------------------------------------------------------------------------

// Writing back everything read from a ggml-written file reproduces it byte for byte: the
// writer's layout (order, padding, offsets) is exactly ggml's.
TEST(FormatGguf, WriterReproducesStories260KByteForByte) {
  const std::string src = shared_path("models/stories260K.gguf");
  auto r = GgufFile::open(src);
  ASSERT_TRUE(r.ok()) << r.status().message();
  GgufWriter w;
  for (const auto& [k, v] : (*r)->metadata()) w.set(k, v);
  for (const auto& t : (*r)->tensors())
    ASSERT_TRUE(w.add_tensor(t.name, t.type, t.ne, t.data, t.num_bytes).ok());
  const std::string out = temp_dir() + "/copy.gguf";
  ASSERT_TRUE(w.write(out).ok());
  EXPECT_TRUE(read_file(out) == read_file(src));
  struct stat st {};
  EXPECT_NE(::stat((out + ".tmp").c_str(), &st), 0);  // temp file renamed away
}

TEST(FormatGguf, WriterRoundTripsEveryValueTypeAndTensorType) {
  GgufWriter w;
  w.set("general.architecture", Value::str("test"));
  w.set("t.u8", Value::u8(200));
  w.set("t.i8", Value::i8(-100));
  w.set("t.u16", Value::u16(60000));
  w.set("t.i16", Value::i16(-30000));
  w.set("t.u32", Value::u32(4000000000u));
  w.set("t.i32", Value::i32(-2000000000));
  w.set("t.f32", Value::f32(0.1f));
  w.set("t.bool", Value::boolean(true));
  w.set("t.str", Value::str(std::string("nul\0inside\xff", 11)));
  w.set("t.u64", Value::u64(0xfedcba9876543210ull));
  w.set("t.i64", Value::i64(-0x7edcba9876543210ll));
  w.set("t.f64", Value::f64(3.141592653589793));
  w.set("t.strs", Value::str_array({"a", "", "ccc"}));
  w.set("t.f32s", Value::f32_array({1.5f, -2.25f}));
  w.set("t.i32s", Value::i32_array({7, -8, 9}));
  w.set("t.empty", Value::make_array(ValueType::UINT8, {}));
  w.set("t.nested", Value::make_array(ValueType::ARRAY,
                                      {Value::i32_array({1, 2}), Value::i32_array({}),
                                       Value::make_array(ValueType::STRING, {Value::str("x")})}));
  w.set("t.u32", Value::u32(17));  // replaces, keeps position
  w.set("general.alignment", Value::u32(64));

  std::vector<float> f32(12);
  for (size_t k = 0; k < f32.size(); ++k) f32[k] = static_cast<float>(k) * 0.5f - 1.0f;
  std::vector<uint16_t> f16(32 * 3, 0x3c00);
  std::vector<uint8_t> q8(34 * 2 * 2);  // [64, 2] q8_0: 2 blocks per row
  for (size_t k = 0; k < q8.size(); ++k) q8[k] = static_cast<uint8_t>(k * 7);
  std::vector<uint8_t> q4k(144);  // [256] q4_K: one super-block
  for (size_t k = 0; k < q4k.size(); ++k) q4k[k] = static_cast<uint8_t>(255 - k);
  std::vector<int32_t> i32s = {1, -1, 1 << 30};
  ASSERT_TRUE(w.add_tensor("a.f32", GgmlType::F32, {3, 4}, f32.data(), f32.size() * 4).ok());
  ASSERT_TRUE(w.add_tensor("b.f16", GgmlType::F16, {32, 3}, f16.data(), f16.size() * 2).ok());
  ASSERT_TRUE(w.add_tensor("c.q8", GgmlType::Q8_0, {64, 2}, q8.data(), q8.size()).ok());
  ASSERT_TRUE(w.add_tensor("d.q4k", GgmlType::Q4_K, {256, 1, 1, 1}, q4k.data(), q4k.size()).ok());
  ASSERT_TRUE(w.add_tensor("e.i32", GgmlType::I32, {3}, i32s.data(), 12).ok());
  const std::string path = temp_dir() + "/all.gguf";
  ASSERT_TRUE(w.write(path).ok());

  auto r = GgufFile::open(path);
  ASSERT_TRUE(r.ok()) << r.status().message();
  const GgufFile& f = **r;
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.alignment(), 64u);
  EXPECT_EQ(f.data_offset() % 64, 0u);
  ASSERT_EQ(f.metadata().size(), 19u);
  EXPECT_EQ(f.metadata()[5].first, "t.u32");
  EXPECT_EQ(f.find("t.u8")->type, ValueType::UINT8);
  EXPECT_EQ(f.get_uint("t.u8"), 200u);
  EXPECT_EQ(f.find("t.i8")->type, ValueType::INT8);
  EXPECT_EQ(f.get_int("t.i8"), -100);
  EXPECT_EQ(f.get_uint("t.u16"), 60000u);
  EXPECT_EQ(f.find("t.i16")->type, ValueType::INT16);
  EXPECT_EQ(f.get_int("t.i16"), -30000);
  EXPECT_EQ(f.get_uint("t.u32"), 17u);
  EXPECT_EQ(f.get_int("t.i32"), -2000000000);
  EXPECT_FALSE(f.get_uint("t.i32"));  // negative as unsigned
  EXPECT_EQ(f.find("t.f32")->type, ValueType::FLOAT32);
  EXPECT_EQ(f.get_float("t.f32"), static_cast<double>(0.1f));
  EXPECT_EQ(f.get_bool("t.bool"), true);
  EXPECT_EQ(f.get_string("t.str"), std::string("nul\0inside\xff", 11));
  EXPECT_EQ(f.get_uint("t.u64"), 0xfedcba9876543210ull);
  EXPECT_FALSE(f.get_int("t.u64"));  // out of int64 range
  EXPECT_EQ(f.get_int("t.i64"), -0x7edcba9876543210ll);
  EXPECT_EQ(f.get_float("t.f64"), 3.141592653589793);
  EXPECT_EQ(f.get_string_array("t.strs"), (std::vector<std::string>{"a", "", "ccc"}));
  EXPECT_EQ(f.get_float_array("t.f32s"), (std::vector<float>{1.5f, -2.25f}));
  EXPECT_EQ(f.get_int_array("t.i32s"), (std::vector<int64_t>{7, -8, 9}));
  const Value* empty = f.find("t.empty");
  ASSERT_NE(empty, nullptr);
  EXPECT_EQ(empty->array_type, ValueType::UINT8);
  EXPECT_TRUE(empty->array.empty());
  const Value* nested = f.find("t.nested");
  ASSERT_NE(nested, nullptr);
  ASSERT_EQ(nested->array_type, ValueType::ARRAY);
  ASSERT_EQ(nested->array.size(), 3u);
  EXPECT_EQ(nested->array[0].array_type, ValueType::INT32);
  ASSERT_EQ(nested->array[0].array.size(), 2u);
  EXPECT_EQ(nested->array[0].array[1].i, 2);
  EXPECT_TRUE(nested->array[1].array.empty());
  ASSERT_EQ(nested->array[2].array.size(), 1u);
  EXPECT_EQ(nested->array[2].array[0].s, "x");

  ASSERT_EQ(f.tensors().size(), 5u);
  struct Expect {
    const char* name;
    GgmlType type;
    std::vector<uint64_t> ne;
    const void* data;
    size_t bytes;
  };
  const Expect want[] = {{"a.f32", GgmlType::F32, {3, 4}, f32.data(), 48},
                         {"b.f16", GgmlType::F16, {32, 3}, f16.data(), 192},
                         {"c.q8", GgmlType::Q8_0, {64, 2}, q8.data(), 136},
                         {"d.q4k", GgmlType::Q4_K, {256, 1, 1, 1}, q4k.data(), 144},
                         {"e.i32", GgmlType::I32, {3}, i32s.data(), 12}};
  uint64_t expect_offset = 0;
  for (size_t k = 0; k < 5; ++k) {
    const TensorInfo& t = f.tensors()[k];
    EXPECT_EQ(t.name, want[k].name);
    EXPECT_EQ(t.type, want[k].type);
    EXPECT_EQ(t.ne, want[k].ne);
    EXPECT_EQ(t.num_bytes, want[k].bytes);
    EXPECT_EQ(t.offset, expect_offset);                       // ggml's sequential padded layout
    EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data) % 64, 0u);  // mmap is page aligned
    EXPECT_EQ(std::memcmp(t.data, want[k].data, want[k].bytes), 0) << t.name;
    expect_offset += (want[k].bytes + 63) / 64 * 64;
  }
  EXPECT_EQ(f.file_size(), f.data_offset() + expect_offset);
}

TEST(FormatGguf, WriterRejectsBadInput) {
  GgufWriter w;
  float x[4] = {};
  EXPECT_FALSE(w.add_tensor("t", GgmlType::F32, {4}, x, 12).ok());    // wrong byte count
  EXPECT_FALSE(w.add_tensor("t", GgmlType::F32, {0, 4}, x, 0).ok());  // zero dim
  EXPECT_FALSE(w.add_tensor("t", GgmlType::F32, {}, x, 4).ok());      // no dims
  EXPECT_FALSE(w.add_tensor("t", GgmlType::F32, {1, 1, 1, 1, 1}, x, 4).ok());
  EXPECT_FALSE(w.add_tensor("t", GgmlType::Q8_0, {16}, x, 16).ok());  // not a block multiple
  EXPECT_FALSE(w.add_tensor(std::string(64, 'n'), GgmlType::F32, {4}, x, 16).ok());
  EXPECT_FALSE(w.add_tensor("", GgmlType::F32, {4}, x, 16).ok());
  EXPECT_FALSE(w.add_tensor("t", static_cast<GgmlType>(4), {4}, x, 16).ok());
  EXPECT_FALSE(w.add_tensor("t", GgmlType::F32, {1ull << 40, 1ull << 40}, x, 16).ok());
  ASSERT_TRUE(w.add_tensor("t", GgmlType::F32, {4}, x, 16).ok());
  EXPECT_FALSE(w.add_tensor("t", GgmlType::F32, {4}, x, 16).ok());  // duplicate
  const std::string dir = temp_dir();

  GgufWriter bad_array;
  bad_array.set("k", Value::make_array(ValueType::INT32, {Value::i32(1), Value::str("x")}));
  EXPECT_FALSE(bad_array.write(dir + "/a.gguf").ok());
  GgufWriter bad_align;
  bad_align.set("general.alignment", Value::u32(48));
  EXPECT_FALSE(bad_align.write(dir + "/b.gguf").ok());
  GgufWriter bad_range;
  Value v = Value::u8(1);
  v.u = 256;
  bad_range.set("k", v);
  EXPECT_FALSE(bad_range.write(dir + "/c.gguf").ok());
  struct stat st {};
  EXPECT_NE(::stat((dir + "/a.gguf").c_str(), &st), 0);  // nothing left behind
  EXPECT_NE(::stat((dir + "/a.gguf.tmp").c_str(), &st), 0);
  EXPECT_FALSE(w.write(dir + "/no/such/dir/x.gguf").ok());
}

// --- crafted corruption ----------------------------------------------------------------------

TEST(FormatGguf, RejectsCraftedHeaders) {
  expect_error("GG", "too small");
  expect_error("GGML\3\0\0\0", "not a GGUF file");
  expect_error(Bytes().header(0, 0, 1).b, "unsupported GGUF version 1");
  expect_error(Bytes().header(0, 0, 4).b, "unsupported GGUF version 4");
  expect_error(Bytes().header(0, 0, 0x03000000).b, "big-endian");
  expect_error(Bytes().header(0, 0).b.substr(0, 20), "truncated");
  expect_error(Bytes().header(0, 1ull << 60).b, "metadata entries");
  expect_error(Bytes().header(1ull << 40, 0).b, "tensors");
  expect_error(Bytes().header(0, 1).put<uint64_t>(1000).b + std::string(20, 'k'),
               "past the end of the file");
  expect_error(Bytes().header(0, 1).str("").put<uint32_t>(4).put<uint32_t>(0).b, "empty key");
  expect_error(Bytes().header(0, 2).kv_u32("a", 1).kv_u32("a", 2).b, "duplicate metadata key 'a'");
  {  // names from the file cannot break the message into several lines
    auto r = parse(Bytes().header(0, 2).kv_u32("a\nb", 1).kv_u32("a\nb", 2).b, "bad.gguf");
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().message(), "bad.gguf: duplicate metadata key 'a\\x0ab'");
  }
  expect_error(Bytes().header(0, 1).str("k").put<uint32_t>(13).put<uint32_t>(0).b,
               "unknown value type 13");
  expect_error(Bytes().header(0, 1).str("k").put<uint32_t>(7).put<uint8_t>(2).b, "bool value 2");
  expect_error(Bytes()
                   .header(0, 1)
                   .str("k")
                   .put<uint32_t>(9)
                   .put<uint32_t>(4)
                   .put<uint64_t>(1ull << 62)
                   .zeros(64)
                   .b,
               "array of 4611686018427387904");
  expect_error(Bytes()
                   .header(0, 1)
                   .str("k")
                   .put<uint32_t>(9)
                   .put<uint32_t>(8)
                   .put<uint64_t>(2)
                   .str("a")
                   .zeros(7)
                   .b,
               "truncated");
  {
    Bytes deep;
    deep.header(0, 1).str("k").put<uint32_t>(9);
    for (int k = 0; k < 20; ++k) deep.put<uint32_t>(9).put<uint64_t>(1);
    deep.zeros(64);
    expect_error(deep.b, "nests arrays deeper");
  }
  expect_error(Bytes().header(0, 1).kv_u32("general.alignment", 48).b, "general.alignment");
  expect_error(Bytes().header(0, 1).kv_u32("general.alignment", 0).b, "general.alignment");
  expect_error(Bytes().header(0, 1).str("general.alignment").put<uint32_t>(8).str("32").b,
               "general.alignment");
}

TEST(FormatGguf, RejectsCraftedTensorInfos) {
  auto one = [](std::vector<uint64_t> ne, uint32_t type, uint64_t off, size_t data_bytes) {
    return Bytes().header(1, 0).tensor("w", std::move(ne), type, off).pad(32).zeros(data_bytes).b;
  };
  EXPECT_TRUE(parse(one({4, 2}, 0, 0, 32)).ok());
  expect_error(one({}, 0, 0, 32), "0 dimensions");
  expect_error(one({1, 1, 1, 1, 1}, 0, 0, 32), "5 dimensions");
  expect_error(one({4, 0}, 0, 0, 32), "invalid size 0 in dimension 1");
  expect_error(one({1ull << 32, 1ull << 32}, 0, 0, 32), "overflows");
  expect_error(one({1ull << 62, 1}, 0, 0, 32), "byte size overflows");
  expect_error(one({4}, 4, 0, 32), "unknown type id 4");
  expect_error(one({4}, 99, 0, 32), "unknown type id 99");
  expect_error(one({16}, 8, 0, 32), "not a multiple of the block size 32");
  expect_error(one({4}, 0, 16, 64), "not a multiple of the alignment 32");
  expect_error(one({4, 2}, 0, 0, 31), "'w' data [offset 0, 32 bytes] extends past end of file");
  expect_error(one({4}, 0, 1ull << 63, 32), "extends past end of file");
  expect_error(Bytes().header(2, 0).tensor("w", {4}, 0, 0).tensor("w", {4}, 0, 32).b,
               "duplicate tensor name 'w'");
  expect_error(
      Bytes().header(2, 0).tensor("a", {16}, 0, 0).tensor("b", {4}, 0, 32).pad(32).zeros(128).b,
      "tensor 'b' data [offset 32, 16 bytes] overlaps tensor 'a'");
  expect_error(Bytes().header(1, 0).tensor("", {4}, 0, 0).pad(32).zeros(32).b, "empty name");
  // Data section start is aligned: a header of 4+4+8+8+ (8+1+4+8+4+8) = 57 bytes pads to 64.
  auto ok = parse(Bytes().header(1, 0).tensor("w", {8}, 0, 0).pad(32).zeros(32).b);
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  EXPECT_EQ((*ok)->data_offset(), 64u);
  // A different alignment moves the data section.
  auto al = parse(Bytes()
                      .header(1, 1)
                      .kv_u32("general.alignment", 256)
                      .tensor("w", {8}, 0, 0)
                      .pad(256)
                      .zeros(32)
                      .b);
  ASSERT_TRUE(al.ok()) << al.status().message();
  EXPECT_EQ((*al)->alignment(), 256u);
  EXPECT_EQ((*al)->data_offset(), 256u);
}

TEST(FormatGguf, RejectsWrongFormatsAndPaths) {
  const std::string dir = temp_dir();
  auto expect_open_error = [](const std::string& path, const std::string& needle) {
    auto r = GgufFile::open(path);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().message().rfind(path + ": ", 0), 0u) << r.status().message();
    EXPECT_NE(r.status().message().find(needle), std::string::npos) << r.status().message();
  };
  expect_open_error(dir, "is a directory");
  write_bytes(dir + "/empty.gguf", "");
  expect_open_error(dir + "/empty.gguf", "empty file");
  write_bytes(dir + "/config.json", "{\"hidden_size\": 128}\n");
  expect_open_error(dir + "/config.json", "not a GGUF file");
  expect_open_error(dir + "/missing.gguf", "cannot open");
  expect_open_error(shared_path("models/tinystories-656k/model.safetensors"), "not a GGUF file");
  expect_open_error(shared_path("models/stories260K.bin"), "not a GGUF file");
  expect_open_error(shared_path("models/tok512.bin"), "not a GGUF file");
}

// --- fuzz-style corruption of the real model -------------------------------------------------

TEST(FormatGguf, TruncationAnywhereFailsCleanly) {
  const std::string bytes = read_file(shared_path("models/stories260K.gguf"));
  ASSERT_EQ(bytes.size(), 1185376u);
  std::vector<size_t> cuts;
  for (size_t n = 0; n < 14176 + 64; n += 3) cuts.push_back(n);  // all through the header
  std::mt19937_64 rng(1234);
  for (int k = 0; k < 200; ++k) cuts.push_back(14176 + rng() % (bytes.size() - 14176));
  cuts.push_back(bytes.size() - 1);
  for (size_t n : cuts) {
    auto r = parse(bytes.substr(0, n), "cut.gguf");
    ASSERT_FALSE(r.ok()) << "truncated at " << n;
    ASSERT_EQ(r.status().message().rfind("cut.gguf: ", 0), 0u) << r.status().message();
  }
  EXPECT_TRUE(parse(bytes).ok());
}

TEST(FormatGguf, BitFlipsFailCleanlyOrLoad) {
  const std::string orig = read_file(shared_path("models/stories260K.gguf"));
  std::mt19937_64 rng(42);
  int failed = 0;
  for (int k = 0; k < 400; ++k) {
    std::string b = orig;
    // Mostly the header (where flips matter), sometimes anywhere; 1 to 3 flips.
    int flips = 1 + static_cast<int>(rng() % 3);
    for (int j = 0; j < flips; ++j) {
      size_t at = (k % 4 == 0) ? rng() % b.size() : rng() % 14176;
      b[at] = static_cast<char>(b[at] ^ (1 << (rng() % 8)));
    }
    auto r = parse(b, "flip.gguf");
    if (!r.ok()) {
      ++failed;
      ASSERT_EQ(r.status().message().rfind("flip.gguf: ", 0), 0u) << r.status().message();
      continue;
    }
    for (const auto& t : (*r)->tensors()) {  // touch every tensor's bounds
      ASSERT_GE(t.data, reinterpret_cast<const uint8_t*>(b.data()));
      ASSERT_LE(t.data + t.num_bytes, reinterpret_cast<const uint8_t*>(b.data()) + b.size());
    }
  }
  EXPECT_GT(failed, 50);  // a header flip usually breaks something
}

TEST(FormatGguf, RandomBytesFailCleanly) {
  std::mt19937_64 rng(7);
  for (int k = 0; k < 500; ++k) {
    std::string b = Bytes().header(rng() % 4, rng() % 4, 2 + k % 2).b;
    size_t n = rng() % 512;
    for (size_t j = 0; j < n; ++j) {
      // Small values are more likely to look like plausible lengths, types and counts.
      uint64_t r = rng();
      b += static_cast<char>((r & 3) == 0 ? static_cast<char>(r >> 8) : static_cast<char>(r % 6));
    }
    auto r = parse(b, "rand.gguf");
    if (!r.ok()) {
      ASSERT_EQ(r.status().message().rfind("rand.gguf: ", 0), 0u);
    }
  }
}

}  // namespace
}  // namespace hinge::gguf
