#include "chat/session_file.h"

#include <fcntl.h>
#include <sodium.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <utility>

#include <fmt/format.h>

#include "common/little_endian.h"
#include "common/sodium_init.h"

namespace hinge::chat {

namespace {

constexpr char kMagic[8] = {'H', 'I', 'N', 'G', 'E', 'S', 'E', 'S'};
constexpr uint32_t kVersion = 1;
constexpr size_t kDtypeField = 16;
constexpr size_t kLayoutBytes = 8 + 2 * kDtypeField + 4 * 4 + 8;
constexpr size_t kFixedBytes = 8 + 4 + 4 + 16 + 8 + 8;  // magic .. memlimit
constexpr size_t kStreamHeader = crypto_secretstream_xchacha20poly1305_HEADERBYTES;
constexpr size_t kCheckOffset = kFixedBytes + kLayoutBytes;
constexpr size_t kStreamOffset = kCheckOffset + 32;
constexpr size_t kDigestOffset = kStreamOffset + kStreamHeader;
constexpr size_t kHeaderBytes = kDigestOffset + 32;
constexpr size_t kPad = 4096;                          // conversation padded to a multiple
constexpr size_t kKvPiece = 4u << 20;                  // KV plaintext per chunk
constexpr size_t kMaxConversation = 64u << 20;
constexpr size_t kAbytes = crypto_secretstream_xchacha20poly1305_ABYTES;
constexpr char kKdfContext[crypto_kdf_CONTEXTBYTES + 1] = "hingeses";
constexpr char kCheckMessage[] = "hinge chat session key check v1";
constexpr char kKeyFileLabel[] = "hinge chat session file key v1";

void put_u32(std::vector<uint8_t>& b, uint32_t v) { append_le(&b, v); }
void put_u64(std::vector<uint8_t>& b, uint64_t v) { append_le(&b, v); }
void put_name(std::vector<uint8_t>& b, const std::string& s) {
  for (size_t i = 0; i < kDtypeField; ++i)
    b.push_back(i < s.size() && i + 1 < kDtypeField ? static_cast<uint8_t>(s[i]) : 0);
}
uint32_t get_u32(const uint8_t* p) { return load_le<uint32_t>(p); }
uint64_t get_u64(const uint8_t* p) { return load_le<uint64_t>(p); }
std::string get_name(const uint8_t* p) {
  size_t n = 0;
  while (n + 1 < kDtypeField && p[n] != 0) ++n;
  std::string s(reinterpret_cast<const char*>(p), n);
  for (char& c : s)
    if (c < 0x21 || c > 0x7e) c = '?';  // hostile bytes never reach a terminal raw
  return s;
}

void put_layout(std::vector<uint8_t>& b, const SessionLayout& l) {
  put_u64(b, l.kv_fingerprint);
  put_name(b, l.k_dtype);
  put_name(b, l.v_dtype);
  put_u32(b, static_cast<uint32_t>(l.block_size));
  put_u32(b, static_cast<uint32_t>(l.n_layers));
  put_u32(b, static_cast<uint32_t>(l.n_kv_heads));
  put_u32(b, static_cast<uint32_t>(l.head_dim));
  put_u64(b, static_cast<uint64_t>(l.block_bytes));
}
SessionLayout get_layout(const uint8_t* p) {
  SessionLayout l;
  l.kv_fingerprint = get_u64(p);
  l.k_dtype = get_name(p + 8);
  l.v_dtype = get_name(p + 8 + kDtypeField);
  const uint8_t* q = p + 8 + 2 * kDtypeField;
  l.block_size = static_cast<int32_t>(get_u32(q));
  l.n_layers = static_cast<int32_t>(get_u32(q + 4));
  l.n_kv_heads = static_cast<int32_t>(get_u32(q + 8));
  l.head_dim = static_cast<int32_t>(get_u32(q + 12));
  l.block_bytes = static_cast<int64_t>(get_u64(q + 16));
  return l;
}

// The stream key and check key of a file key.
struct SubKeys {
  SecretBytes stream{crypto_secretstream_xchacha20poly1305_KEYBYTES};
  SecretBytes check{32};
};
SubKeys derive_subkeys(const uint8_t file_key[32]) {
  SubKeys k;
  crypto_kdf_derive_from_key(k.stream.data(), k.stream.size(), 1, kKdfContext, file_key);
  crypto_kdf_derive_from_key(k.check.data(), k.check.size(), 2, kKdfContext, file_key);
  return k;
}
void key_check_value(const SubKeys& k, uint8_t out[32]) {
  crypto_generichash(out, 32, reinterpret_cast<const uint8_t*>(kCheckMessage),
                     sizeof kCheckMessage - 1, k.check.data(), k.check.size());
}

bool write_all(int fd, const uint8_t* p, size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

// Reads exactly n bytes; returns the count read (less at end of file), -1 on an error.
ssize_t read_full(int fd, uint8_t* p, size_t n) {
  size_t got = 0;
  while (got < n) {
    const ssize_t r = ::read(fd, p + got, n - got);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return -1;
    if (r == 0) break;
    got += static_cast<size_t>(r);
  }
  return static_cast<ssize_t>(got);
}

struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

struct StreamState {
  crypto_secretstream_xchacha20poly1305_state st;
  ~StreamState() { sodium_memzero(&st, sizeof st); }
};

SessionOpenResult fail(SessionOpenError e, std::string message) {
  SessionOpenResult r;
  r.error = e;
  r.status = Status::Error(std::move(message));
  return r;
}

}  // namespace

// --- SecretBytes ---------------------------------------------------------------------------

SecretBytes::SecretBytes(size_t size) : size_(size) {
  ensure_sodium();
  if (size == 0) return;
  data_ = static_cast<uint8_t*>(sodium_malloc(size));
  HINGE_CHECK_MSG(data_ != nullptr, "out of memory for {} bytes of key material", size);
  sodium_memzero(data_, size);
}
SecretBytes::SecretBytes(SecretBytes&& o) noexcept : data_(o.data_), size_(o.size_) {
  o.data_ = nullptr;
  o.size_ = 0;
}
SecretBytes& SecretBytes::operator=(SecretBytes&& o) noexcept {
  if (this != &o) {
    reset();
    data_ = std::exchange(o.data_, nullptr);
    size_ = std::exchange(o.size_, 0);
  }
  return *this;
}
SecretBytes::~SecretBytes() { reset(); }
void SecretBytes::reset() {
  if (data_ != nullptr) sodium_free(data_);  // zeroes first
  data_ = nullptr;
  size_ = 0;
}

// --- SessionKeyring ------------------------------------------------------------------------

StatusOr<SessionKeyring> SessionKeyring::from_passphrase(std::string_view passphrase,
                                                         KdfLimits limits) {
  ensure_sodium();
  if (passphrase.empty()) return Status::Error("the passphrase is empty");
  if (limits.memory < crypto_pwhash_MEMLIMIT_MIN || limits.memory > kMaxKdfMemory ||
      limits.ops < crypto_pwhash_OPSLIMIT_MIN || limits.ops > kMaxKdfOps)
    return Status::Errorf("Argon2id limits out of range: {} passes, {} bytes", limits.ops,
                          limits.memory);
  SessionKeyring k;
  k.source_ = KeySource::kPassphrase;
  k.limits_ = limits;
  k.secret_ = SecretBytes(passphrase.size());
  std::memcpy(k.secret_.data(), passphrase.data(), passphrase.size());
  randombytes_buf(k.write_salt_.data(), k.write_salt_.size());
  return k;
}

SessionKeyring SessionKeyring::from_key(std::span<const uint8_t, 32> key) {
  ensure_sodium();
  SessionKeyring k;
  k.source_ = KeySource::kKeyFile;
  k.secret_ = SecretBytes(32);
  std::memcpy(k.secret_.data(), key.data(), 32);
  randombytes_buf(k.write_salt_.data(), k.write_salt_.size());
  return k;
}

StatusOr<SessionKeyring> SessionKeyring::from_key_file(const std::string& path) {
  ensure_sodium();
  Fd f{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (f.fd < 0)
    return Status::Errorf("--key-file: cannot read {}: {}", path, std::strerror(errno));
  SecretBytes buf(130);
  const ssize_t n = read_full(f.fd, buf.data(), buf.size());
  if (n < 0) return Status::Errorf("--key-file: cannot read {}: {}", path, std::strerror(errno));
  size_t len = static_cast<size_t>(n);
  std::array<uint8_t, 32> key{};
  bool ok = false;
  if (len == 32) {
    std::memcpy(key.data(), buf.data(), 32);
    ok = true;
  } else {
    while (len > 0 && (buf.data()[len - 1] == '\n' || buf.data()[len - 1] == '\r')) --len;
    size_t bin_len = 0;
    ok = len == 64 &&
         sodium_hex2bin(key.data(), key.size(), reinterpret_cast<const char*>(buf.data()), len,
                        nullptr, &bin_len, nullptr) == 0 &&
         bin_len == 32;
  }
  if (!ok) {
    sodium_memzero(key.data(), key.size());
    return Status::Errorf(
        "--key-file: {} must hold 32 bytes, raw or as 64 hex digits (make one with: head -c 32 "
        "/dev/urandom > {})", path, path);
  }
  SessionKeyring k = from_key(key);
  sodium_memzero(key.data(), key.size());
  return k;
}

Status SessionKeyring::file_key(std::span<const uint8_t, 16> salt, KdfLimits limits,
                                uint8_t out[32]) const {
  if (secret_.empty()) return Status::Error("the session key was destroyed (/logout)");
  if (source_ == KeySource::kKeyFile) {
    crypto_generichash_state st;
    crypto_generichash_init(&st, secret_.data(), secret_.size(), 32);
    crypto_generichash_update(&st, reinterpret_cast<const uint8_t*>(kKeyFileLabel),
                              sizeof kKeyFileLabel - 1);
    crypto_generichash_update(&st, salt.data(), salt.size());
    crypto_generichash_final(&st, out, 32);
    sodium_memzero(&st, sizeof st);
    return Status::Ok();
  }
  if (limits.memory < crypto_pwhash_MEMLIMIT_MIN || limits.memory > kMaxKdfMemory ||
      limits.ops < crypto_pwhash_OPSLIMIT_MIN || limits.ops > kMaxKdfOps)
    return Status::Errorf("Argon2id limits out of range: {} passes, {} bytes", limits.ops,
                          limits.memory);
  if (!cached_key_.empty() && std::equal(salt.begin(), salt.end(), cached_salt_.begin()) &&
      cached_limits_.ops == limits.ops && cached_limits_.memory == limits.memory) {
    std::memcpy(out, cached_key_.data(), 32);
    return Status::Ok();
  }
  if (crypto_pwhash(out, 32, reinterpret_cast<const char*>(secret_.data()), secret_.size(),
                    salt.data(), limits.ops, static_cast<size_t>(limits.memory),
                    crypto_pwhash_ALG_ARGON2ID13) != 0)
    return Status::Errorf("Argon2id needs {} MiB and the system refused it",
                          limits.memory >> 20);
  cached_key_ = SecretBytes(32);
  std::memcpy(cached_key_.data(), out, 32);
  std::copy(salt.begin(), salt.end(), cached_salt_.begin());
  cached_limits_ = limits;
  return Status::Ok();
}

void SessionKeyring::destroy() {
  secret_.reset();
  cached_key_.reset();
  sodium_memzero(write_salt_.data(), write_salt_.size());
  sodium_memzero(cached_salt_.data(), cached_salt_.size());
}

std::string SessionLayout::describe() const {
  return fmt::format("K {}, V {}, {}-token blocks, {} layers x {} KV heads x {}, KV fingerprint "
                     "{:016x}", k_dtype, v_dtype, block_size, n_layers, n_kv_heads, head_dim,
                     kv_fingerprint);
}

// --- writing ---------------------------------------------------------------------------------

Status write_session_file(const std::string& path, const SessionKeyring& keys,
                          const SessionLayout& layout, std::string_view conversation,
                          std::span<const uint8_t> kv) {
  if (conversation.size() > kMaxConversation)
    return Status::Errorf("the conversation is {} MiB, more than a session holds ({} MiB)",
                          conversation.size() >> 20, kMaxConversation >> 20);
  SecretBytes file_key(32);
  const auto& salt = keys.write_salt();
  const KdfLimits limits = keys.source() == KeySource::kPassphrase ? keys.limits() : KdfLimits{0, 0};
  HINGE_RETURN_IF_ERROR(keys.file_key(salt, limits, file_key.data()));
  const SubKeys sub = derive_subkeys(file_key.data());

  std::vector<uint8_t> header;
  header.reserve(kHeaderBytes);
  header.insert(header.end(), kMagic, kMagic + 8);
  put_u32(header, kVersion);
  put_u32(header, static_cast<uint32_t>(keys.source()));
  header.insert(header.end(), salt.begin(), salt.end());
  put_u64(header, limits.ops);
  put_u64(header, limits.memory);
  put_layout(header, layout);
  header.resize(kStreamOffset);
  key_check_value(sub, header.data() + kCheckOffset);
  header.resize(kDigestOffset);
  StreamState st;
  crypto_secretstream_xchacha20poly1305_init_push(&st.st, header.data() + kStreamOffset,
                                                  sub.stream.data());
  header.resize(kHeaderBytes);
  crypto_generichash(header.data() + kDigestOffset, 32, header.data(), kDigestOffset, nullptr, 0);
  const uint8_t* ad = header.data() + kDigestOffset;

  const std::filesystem::path target(path);
  const std::string tmp = fmt::format("{}.tmp{}", path, ::getpid());
  Fd f{::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600)};
  if (f.fd < 0) return Status::Errorf("cannot create {}: {}", tmp, std::strerror(errno));
  bool ok = write_all(f.fd, header.data(), header.size());
  std::vector<uint8_t> cipher;
  auto push = [&](const uint8_t* m, size_t n, uint8_t tag) {
    cipher.resize(4 + n + kAbytes);
    unsigned long long clen = 0;
    crypto_secretstream_xchacha20poly1305_push(&st.st, cipher.data() + 4, &clen, m, n, ad, 32,
                                               tag);
    for (int i = 0; i < 4; ++i) cipher[static_cast<size_t>(i)] = static_cast<uint8_t>(clen >> (8 * i));
    ok = ok && write_all(f.fd, cipher.data(), 4 + static_cast<size_t>(clen));
  };
  {
    const size_t padded = (conversation.size() / kPad + 1) * kPad;
    std::vector<uint8_t> plain(padded, ' ');
    std::memcpy(plain.data(), conversation.data(), conversation.size());
    push(plain.data(), padded, crypto_secretstream_xchacha20poly1305_TAG_MESSAGE);
    sodium_memzero(plain.data(), plain.size());
  }
  for (size_t at = 0; at < kv.size() && ok; at += kKvPiece)
    push(kv.data() + at, std::min(kKvPiece, kv.size() - at),
         crypto_secretstream_xchacha20poly1305_TAG_MESSAGE);
  push(nullptr, 0, crypto_secretstream_xchacha20poly1305_TAG_FINAL);
  ok = ok && ::fsync(f.fd) == 0;
  const int saved_errno = errno;
  ::close(f.fd);
  f.fd = -1;
  if (!ok || ::rename(tmp.c_str(), path.c_str()) != 0) {
    const int e = ok ? errno : saved_errno;
    ::unlink(tmp.c_str());
    return Status::Errorf("cannot write {}: {}", path, std::strerror(e));
  }
  const std::string dir = target.has_parent_path() ? target.parent_path().string() : ".";
  Fd d{::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC)};
  if (d.fd >= 0) ::fsync(d.fd);
  return Status::Ok();
}

// --- reading ---------------------------------------------------------------------------------

namespace {

struct Header {
  std::array<uint8_t, kHeaderBytes> bytes{};
  KeySource source = KeySource::kPassphrase;
  KdfLimits limits;
  SessionLayout layout;
};

// Reads and checks the clear header (magic, version, digest, key source).
SessionOpenResult read_header(int fd, const std::string& path, Header* h) {
  const ssize_t n = read_full(fd, h->bytes.data(), h->bytes.size());
  if (n < 0) return fail(SessionOpenError::kIo, fmt::format("cannot read {}: {}", path, std::strerror(errno)));
  const uint8_t* b = h->bytes.data();
  if (static_cast<size_t>(n) < 8 || std::memcmp(b, kMagic, 8) != 0)
    return fail(SessionOpenError::kNotSession, fmt::format("{} is not a hinge chat session", path));
  if (static_cast<size_t>(n) < kHeaderBytes)
    return fail(SessionOpenError::kTruncated,
                fmt::format("{} is truncated (its header is incomplete)", path));
  if (get_u32(b + 8) != kVersion)
    return fail(SessionOpenError::kVersion,
                fmt::format("{} is a version {} session; this hinge reads version {}", path,
                            get_u32(b + 8), kVersion));
  uint8_t digest[32];
  crypto_generichash(digest, 32, b, kDigestOffset, nullptr, 0);
  if (sodium_memcmp(digest, b + kDigestOffset, 32) != 0)
    return fail(SessionOpenError::kDamaged,
                fmt::format("{} is damaged: its header was changed or corrupted", path));
  const uint32_t source = get_u32(b + 12);
  if (source != static_cast<uint32_t>(KeySource::kPassphrase) &&
      source != static_cast<uint32_t>(KeySource::kKeyFile))
    return fail(SessionOpenError::kDamaged, fmt::format("{} is damaged: unknown key source", path));
  h->source = static_cast<KeySource>(source);
  h->limits = {get_u64(b + 32), get_u64(b + 40)};
  h->layout = get_layout(b + kFixedBytes);
  return {};
}

std::string source_name(KeySource s) {
  return s == KeySource::kPassphrase ? "a passphrase" : "a key file";
}

// Checks the key against the header; fills the subkeys.
SessionOpenResult check_key(const Header& h, const std::string& path, const SessionKeyring& keys,
                            SubKeys* sub) {
  if (h.source != keys.source())
    return fail(SessionOpenError::kWrongKey,
                fmt::format("{} was saved with {}, not {}", path, source_name(h.source),
                            source_name(keys.source())));
  SecretBytes file_key(32);
  const std::span<const uint8_t, 16> salt(h.bytes.data() + 16, 16);
  if (Status st = keys.file_key(salt, h.limits, file_key.data()); !st.ok())
    return fail(SessionOpenError::kDamaged, path + ": " + st.message());
  *sub = derive_subkeys(file_key.data());
  uint8_t check[32];
  key_check_value(*sub, check);
  if (sodium_memcmp(check, h.bytes.data() + kCheckOffset, 32) != 0)
    return fail(SessionOpenError::kWrongKey,
                fmt::format("wrong {} for {}", keys.source() == KeySource::kPassphrase
                                                   ? "passphrase" : "key file", path));
  return {};
}

}  // namespace

SessionOpenResult read_session_file(const std::string& path, const SessionKeyring& keys,
                                    const SessionLayout& expected) {
  Fd f{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (f.fd < 0)
    return fail(SessionOpenError::kIo, fmt::format("cannot open {}: {}", path, std::strerror(errno)));
  Header h;
  if (auto r = read_header(f.fd, path, &h); r.error != SessionOpenError::kNone) return r;
  if (!(h.layout == expected))
    return fail(SessionOpenError::kOtherModel,
                fmt::format("{} was saved with another model or KV format ({}); this engine has "
                            "{}: load it with the same -m and --kv-dtype",
                            path, h.layout.describe(), expected.describe()));
  SubKeys sub;
  if (auto r = check_key(h, path, keys, &sub); r.error != SessionOpenError::kNone) return r;

  StreamState st;
  if (crypto_secretstream_xchacha20poly1305_init_pull(&st.st, h.bytes.data() + kStreamOffset,
                                                      sub.stream.data()) != 0)
    return fail(SessionOpenError::kAltered, fmt::format("{} is damaged or altered", path));
  const uint8_t* ad = h.bytes.data() + kDigestOffset;
  SessionOpenResult out;
  std::vector<uint8_t> cipher;
  std::vector<uint8_t> plain;
  int64_t offset = static_cast<int64_t>(kHeaderBytes);
  for (int chunk = 0;; ++chunk) {
    uint8_t len_bytes[4];
    const ssize_t n = read_full(f.fd, len_bytes, 4);
    if (n < 0) return fail(SessionOpenError::kIo, fmt::format("cannot read {}: {}", path, std::strerror(errno)));
    if (n < 4)
      return fail(SessionOpenError::kTruncated,
                  fmt::format("{} is truncated at byte {} (it ends before its last chunk)", path,
                              offset + n));
    const size_t clen = get_u32(len_bytes);
    const size_t max = (chunk == 0 ? kMaxConversation + kPad : kKvPiece) + kAbytes;
    if (clen < kAbytes || clen > max)
      return fail(SessionOpenError::kAltered,
                  fmt::format("{} is damaged or altered at byte {}", path, offset));
    cipher.resize(clen);
    const ssize_t got = read_full(f.fd, cipher.data(), clen);
    if (got < 0) return fail(SessionOpenError::kIo, fmt::format("cannot read {}: {}", path, std::strerror(errno)));
    if (static_cast<size_t>(got) < clen)
      return fail(SessionOpenError::kTruncated,
                  fmt::format("{} is truncated at byte {}", path, offset + 4 + got));
    plain.resize(clen - kAbytes);
    unsigned long long mlen = 0;
    uint8_t tag = 0;
    if (crypto_secretstream_xchacha20poly1305_pull(&st.st, plain.data(), &mlen, &tag,
                                                   cipher.data(), clen, ad, 32) != 0) {
      sodium_memzero(plain.data(), plain.size());
      return fail(SessionOpenError::kAltered,
                  fmt::format("{} is damaged or altered: chunk {} at byte {} fails "
                              "authentication", path, chunk + 1, offset));
    }
    offset += 4 + static_cast<int64_t>(clen);
    const bool final = tag == crypto_secretstream_xchacha20poly1305_TAG_FINAL;
    if (chunk == 0) {
      if (final) return fail(SessionOpenError::kAltered, fmt::format("{} is altered: no conversation", path));
      size_t end = static_cast<size_t>(mlen);
      while (end > 0 && plain[end - 1] == ' ') --end;
      out.contents.conversation.assign(reinterpret_cast<const char*>(plain.data()), end);
    } else {
      out.contents.kv.insert(out.contents.kv.end(), plain.begin(),
                             plain.begin() + static_cast<ptrdiff_t>(mlen));
    }
    sodium_memzero(plain.data(), plain.size());
    if (final) break;
  }
  uint8_t extra = 0;
  if (read_full(f.fd, &extra, 1) != 0) {
    sodium_memzero(out.contents.kv.data(), out.contents.kv.size());
    sodium_memzero(out.contents.conversation.data(), out.contents.conversation.size());
    return fail(SessionOpenError::kAltered,
                fmt::format("{} is altered: bytes after its last chunk (at byte {})", path, offset));
  }
  return out;
}

bool session_key_matches(const std::string& path, const SessionKeyring& keys) {
  Fd f{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (f.fd < 0) return false;
  Header h;
  if (read_header(f.fd, path, &h).error != SessionOpenError::kNone) return false;
  SubKeys sub;
  return check_key(h, path, keys, &sub).error == SessionOpenError::kNone;
}

Status shred_file(const std::string& path) {
  {
    Fd f{::open(path.c_str(), O_WRONLY | O_CLOEXEC)};
    if (f.fd < 0) return Status::Errorf("cannot open {}: {}", path, std::strerror(errno));
    struct stat sb{};
    if (::fstat(f.fd, &sb) == 0) {
      const std::vector<uint8_t> zeros(64 << 10, 0);
      for (off_t left = sb.st_size; left > 0;) {
        const size_t n = static_cast<size_t>(std::min<off_t>(left, static_cast<off_t>(zeros.size())));
        if (!write_all(f.fd, zeros.data(), n)) break;
        left -= static_cast<off_t>(n);
      }
      ::fsync(f.fd);
    }
  }
  if (::unlink(path.c_str()) != 0)
    return Status::Errorf("cannot delete {}: {}", path, std::strerror(errno));
  return Status::Ok();
}

}  // namespace hinge::chat
