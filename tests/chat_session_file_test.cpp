// Encrypted chat session files (chat/session_file.h): round trips with a key and a passphrase;
// every single flipped byte and every truncation is an error of the right kind, never a
// success or a crash; a wrong key, another layout and trailing bytes are told apart; nothing
// of the plaintext is in the file; key files are parsed strictly; shred_file removes.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <array>
#include <string>

#include "chat/session_file.h"
#include "test_util.h"

namespace hinge::chat {
namespace {

using hinge::testing::read_file;
using hinge::testing::temp_dir;

SessionLayout layout() {
  return {.kv_fingerprint = 0x1234abcd5678ef00ull, .k_dtype = "int8", .v_dtype = "f16",
          .block_size = 16, .n_layers = 5, .n_kv_heads = 4, .head_dim = 8, .block_bytes = 64};
}

SessionKeyring key(uint8_t fill) {
  std::array<uint8_t, 32> k{};
  k.fill(fill);
  return SessionKeyring::from_key(k);
}

void write(const std::string& path, const std::string& bytes) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  std::fwrite(bytes.data(), 1, bytes.size(), f);
  std::fclose(f);
}

const std::string kConversation = R"({"turns":[["the secret marker Qwzxv","a reply"]]})";

std::vector<uint8_t> kv_bytes(size_t n) {
  std::vector<uint8_t> kv(n);
  for (size_t i = 0; i < n; ++i) kv[i] = static_cast<uint8_t>(i * 7 + 3);
  return kv;
}

TEST(SessionFile, RoundTripWithAKeyHidesThePlaintext) {
  const std::string dir = temp_dir();
  const std::string path = dir + "/a.session";
  const SessionKeyring k = key(1);
  const auto kv = kv_bytes(64 * 70000);  // several 4 MiB chunks
  ASSERT_TRUE(write_session_file(path, k, layout(), kConversation, kv).ok());
  struct stat sb{};
  ASSERT_EQ(::stat(path.c_str(), &sb), 0);
  EXPECT_EQ(sb.st_mode & 0777, 0600u);
  const std::string blob = read_file(path);
  EXPECT_EQ(blob.find("Qwzxv"), std::string::npos);
  EXPECT_EQ(blob.find("turns"), std::string::npos);
  EXPECT_EQ(blob.find(std::string(reinterpret_cast<const char*>(kv.data() + 100), 32)),
            std::string::npos);

  SessionOpenResult r = read_session_file(path, k, layout());
  ASSERT_EQ(r.error, SessionOpenError::kNone) << r.status.message();
  EXPECT_EQ(r.contents.conversation, kConversation);
  EXPECT_EQ(r.contents.kv, kv);
  EXPECT_TRUE(session_key_matches(path, k));
  EXPECT_FALSE(session_key_matches(path, key(2)));
}

TEST(SessionFile, PassphraseKeysAndWrongOnes) {
  const std::string path = temp_dir() + "/p.session";
  const KdfLimits cheap{1, 1u << 20};
  auto k = SessionKeyring::from_passphrase("correct horse", cheap).value();
  ASSERT_TRUE(write_session_file(path, k, layout(), kConversation, kv_bytes(64)).ok());
  // A new keyring from the same passphrase (another process) opens it.
  auto again = SessionKeyring::from_passphrase("correct horse", cheap).value();
  EXPECT_EQ(read_session_file(path, again, layout()).error, SessionOpenError::kNone);
  auto wrong = SessionKeyring::from_passphrase("correct horsf", cheap).value();
  SessionOpenResult r = read_session_file(path, wrong, layout());
  EXPECT_EQ(r.error, SessionOpenError::kWrongKey);
  EXPECT_NE(r.status.message().find("wrong passphrase"), std::string::npos);
  // A key file does not open a passphrase file, and says why.
  r = read_session_file(path, key(1), layout());
  EXPECT_EQ(r.error, SessionOpenError::kWrongKey);
  EXPECT_NE(r.status.message().find("saved with a passphrase"), std::string::npos);
  // A destroyed keyring derives nothing.
  again.destroy();
  EXPECT_NE(read_session_file(path, again, layout()).error, SessionOpenError::kNone);
  EXPECT_FALSE(SessionKeyring::from_passphrase("", cheap).ok());
  EXPECT_FALSE(SessionKeyring::from_passphrase("x", {1, kMaxKdfMemory * 2}).ok());
}

TEST(SessionFile, AnotherLayoutIsToldApartAndNamed) {
  const std::string path = temp_dir() + "/l.session";
  ASSERT_TRUE(write_session_file(path, key(1), layout(), kConversation, {}).ok());
  SessionLayout other = layout();
  other.k_dtype = "fp8";
  SessionOpenResult r = read_session_file(path, key(1), other);
  EXPECT_EQ(r.error, SessionOpenError::kOtherModel);
  EXPECT_NE(r.status.message().find("K int8"), std::string::npos) << r.status.message();
  EXPECT_NE(r.status.message().find("K fp8"), std::string::npos);
  other = layout();
  other.kv_fingerprint ^= 1;
  EXPECT_EQ(read_session_file(path, key(1), other).error, SessionOpenError::kOtherModel);
}

TEST(SessionFile, EveryFlippedByteAndEveryTruncationIsAnError) {
  const std::string dir = temp_dir();
  const std::string path = dir + "/f.session";
  const SessionKeyring k = key(5);
  ASSERT_TRUE(write_session_file(path, k, layout(), kConversation, kv_bytes(300)).ok());
  const std::string blob = read_file(path);
  const std::string bad = dir + "/bad.session";
  int altered = 0, damaged = 0;
  for (size_t i = 0; i < blob.size(); ++i) {
    std::string b = blob;
    b[i] = static_cast<char>(b[i] ^ (1 << (i % 8)));
    write(bad, b);
    const SessionOpenResult r = read_session_file(bad, k, layout());
    ASSERT_NE(r.error, SessionOpenError::kNone) << "byte " << i << " flipped still opens";
    ASSERT_FALSE(r.status.ok());
    altered += r.error == SessionOpenError::kAltered || r.error == SessionOpenError::kTruncated;
    damaged += r.error == SessionOpenError::kDamaged || r.error == SessionOpenError::kNotSession ||
               r.error == SessionOpenError::kVersion;
  }
  EXPECT_GT(damaged, 150);   // the header (200 bytes)
  EXPECT_GT(altered, 4000);  // the encrypted chunks
  for (size_t n = 0; n < blob.size(); n += 7) {
    write(bad, blob.substr(0, n));
    const SessionOpenResult r = read_session_file(bad, k, layout());
    ASSERT_NE(r.error, SessionOpenError::kNone) << "truncated to " << n << " still opens";
    if (n >= 200) {
      EXPECT_EQ(r.error, SessionOpenError::kTruncated) << n;
    }
  }
  write(bad, blob + "x");
  const SessionOpenResult r = read_session_file(bad, k, layout());
  EXPECT_EQ(r.error, SessionOpenError::kAltered);
  EXPECT_NE(r.status.message().find("after its last chunk"), std::string::npos);
  write(bad, "not a session at all");
  EXPECT_EQ(read_session_file(bad, k, layout()).error, SessionOpenError::kNotSession);
  EXPECT_EQ(read_session_file(dir + "/missing.session", k, layout()).error, SessionOpenError::kIo);
}

TEST(SessionFile, KeyFilesAreParsedStrictly) {
  const std::string dir = temp_dir();
  std::string raw(32, '\0');
  for (int i = 0; i < 32; ++i) raw[static_cast<size_t>(i)] = static_cast<char>(i * 9);
  write(dir + "/raw", raw);
  std::string hex;
  for (unsigned char c : raw) hex += fmt::format("{:02x}", c);
  write(dir + "/hex", hex + "\n");
  auto a = SessionKeyring::from_key_file(dir + "/raw");
  auto b = SessionKeyring::from_key_file(dir + "/hex");
  ASSERT_TRUE(a.ok() && b.ok());
  const std::string path = dir + "/k.session";
  ASSERT_TRUE(write_session_file(path, *a, layout(), kConversation, {}).ok());
  EXPECT_EQ(read_session_file(path, *b, layout()).error, SessionOpenError::kNone);
  for (const std::string& bad : {std::string(31, 'a'), std::string(33, 'a'), hex.substr(0, 63),
                                 "zz" + hex.substr(2)}) {
    write(dir + "/bad", bad);
    auto k = SessionKeyring::from_key_file(dir + "/bad");
    ASSERT_FALSE(k.ok());
    EXPECT_NE(k.status().message().find("must hold 32 bytes"), std::string::npos);
  }
  EXPECT_FALSE(SessionKeyring::from_key_file(dir + "/none").ok());
}

TEST(SessionFile, ShredRemovesTheFile) {
  const std::string path = temp_dir() + "/s.session";
  ASSERT_TRUE(write_session_file(path, key(1), layout(), kConversation, kv_bytes(100)).ok());
  ASSERT_TRUE(shred_file(path).ok());
  struct stat sb{};
  EXPECT_NE(::stat(path.c_str(), &sb), 0);
  EXPECT_FALSE(shred_file(path).ok());
}

}  // namespace
}  // namespace hinge::chat
