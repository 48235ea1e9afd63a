// Saved chat sessions, encrypted at rest (`hinge chat`'s /save and /load).
//
// A file is a clear header, then a libsodium secretstream (crypto_secretstream_xchacha20poly1305)
// of length-prefixed chunks:
//
//   header   "HINGESES" | version u32 | key source u32 | salt[16] | Argon2id opslimit u64,
//            memlimit u64 | SessionLayout (KV fingerprint, K/V dtypes, block size, layers, KV
//            heads, head size, block bytes) | key check[32] | secretstream header[24] |
//            digest[32] = BLAKE2b-256 of everything before it          (little-endian)
//   chunks   u32 ciphertext length | ciphertext; every chunk's associated data is the digest,
//            so the header (model, KV format, salt) is authenticated with each chunk
//            1: the conversation (JSON, padded to a multiple of 4 KiB so its length tells
//               little), 2..: KV block bytes in pieces of at most 4 MiB, last: empty, TAG_FINAL
//
// Keys: a file key from a passphrase (Argon2id crypto_pwhash with the file's salt and limits) or
// a 32-byte key file (BLAKE2b keyed with it over the salt); from the file key, crypto_kdf derives
// the stream key and a check key, whose BLAKE2b of a constant is the key check: a wrong key is
// told apart from a damaged file before any chunk is opened. No token, text or anything derived
// from them is in the clear; the header's layout is the model's, not the conversation's.
//
// Opening tells each failure apart (SessionOpenError) with a message that says what to do.
// Key material lives in sodium_malloc'd memory (guard pages, locked, zeroed when freed).
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace hinge::chat {

// Bytes in libsodium's guarded memory, zeroed on destruction. Move-only.
class SecretBytes {
 public:
  SecretBytes() = default;
  explicit SecretBytes(size_t size);  // zero-filled; HINGE_CHECK on allocation failure
  SecretBytes(SecretBytes&& other) noexcept;
  SecretBytes& operator=(SecretBytes&& other) noexcept;
  SecretBytes(const SecretBytes&) = delete;
  SecretBytes& operator=(const SecretBytes&) = delete;
  ~SecretBytes();

  uint8_t* data() { return data_; }
  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  void reset();  // zeroes and frees now

 private:
  uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

enum class KeySource : uint32_t { kPassphrase = 1, kKeyFile = 2 };

// Argon2id cost of new files (each file records its own; opening accepts at most
// kMaxKdfMemory and kMaxKdfOps so a hostile file cannot make us allocate without bound).
struct KdfLimits {
  uint64_t ops = 2;                  // crypto_pwhash_OPSLIMIT_INTERACTIVE
  uint64_t memory = 64ull << 20;     // crypto_pwhash_MEMLIMIT_INTERACTIVE
};
inline constexpr uint64_t kMaxKdfMemory = 256ull << 20;
inline constexpr uint64_t kMaxKdfOps = 16;

// Where a file's keys come from: a passphrase or a key file, held in guarded memory.
class SessionKeyring {
 public:
  static StatusOr<SessionKeyring> from_passphrase(std::string_view passphrase, KdfLimits limits);
  // 32 raw bytes, or 64 hex digits (a trailing newline allowed).
  static StatusOr<SessionKeyring> from_key_file(const std::string& path);
  // From the key bytes themselves (tests).
  static SessionKeyring from_key(std::span<const uint8_t, 32> key);

  KeySource source() const { return source_; }
  const KdfLimits& limits() const { return limits_; }
  // The salt new files are written with (random, one per keyring: a process that saves often
  // derives its file key once).
  const std::array<uint8_t, 16>& write_salt() const { return write_salt_; }
  // The file key for a salt and limits (Argon2id for passphrases: slow by design; the last one
  // is remembered). Errors: limits beyond the caps, out of memory, destroyed keyring.
  Status file_key(std::span<const uint8_t, 16> salt, KdfLimits limits, uint8_t out[32]) const;
  // Zeroes and frees every secret; file_key() fails afterwards.
  void destroy();
  bool destroyed() const { return secret_.empty(); }

 private:
  SessionKeyring() = default;
  KeySource source_ = KeySource::kPassphrase;
  KdfLimits limits_;
  SecretBytes secret_;
  std::array<uint8_t, 16> write_salt_{};
  mutable std::array<uint8_t, 16> cached_salt_{};
  mutable KdfLimits cached_limits_{};
  mutable SecretBytes cached_key_;  // empty: none yet
};

// What the KV bytes of a session depend on: in the clear (so a mismatch error says what
// differs) and authenticated with every chunk.
struct SessionLayout {
  uint64_t kv_fingerprint = 0;
  std::string k_dtype;   // KvDtype names, at most 15 bytes
  std::string v_dtype;
  int32_t block_size = 0;
  int32_t n_layers = 0;
  int32_t n_kv_heads = 0;
  int32_t head_dim = 0;
  int64_t block_bytes = 0;  // one exported block (every KV group)
  bool operator==(const SessionLayout&) const = default;
  std::string describe() const;  // "K f16, V f16, 16-token blocks, 5 layers x 4 KV heads x 8"
};

enum class SessionOpenError {
  kNone,
  kIo,            // cannot read the file
  kNotSession,    // no magic: not a hinge session file
  kVersion,       // a later format version
  kDamaged,       // header digest mismatch (changed or broken header)
  kOtherModel,    // saved with another model or KV format
  kWrongKey,      // key check mismatch: wrong passphrase or key file
  kAltered,       // a chunk failed authentication (changed or corrupted after saving)
  kTruncated,     // the stream ends before its final chunk
};

struct SessionContents {
  std::string conversation;  // JSON
  std::vector<uint8_t> kv;   // exported KV blocks (kv/kv_transfer.h)
};

struct SessionOpenResult {
  SessionOpenError error = SessionOpenError::kNone;
  Status status;             // the message (OK when error == kNone)
  SessionContents contents;  // the caller zeroes it when done (sodium_memzero)
};

// Writes the session atomically (a 0600 temporary file in the same folder, fsync, rename).
Status write_session_file(const std::string& path, const SessionKeyring& keys,
                          const SessionLayout& layout, std::string_view conversation,
                          std::span<const uint8_t> kv);
// Opens and decrypts; `expected` is the running engine's layout.
SessionOpenResult read_session_file(const std::string& path, const SessionKeyring& keys,
                                    const SessionLayout& expected);
// True when the file is a session whose key check `keys` passes (the header alone is read).
bool session_key_matches(const std::string& path, const SessionKeyring& keys);
// Overwrites the file with zeros, syncs and unlinks it (crypto-shredding does the rest: the key
// is destroyed too). Errors: cannot open or unlink.
Status shred_file(const std::string& path);

}  // namespace hinge::chat
