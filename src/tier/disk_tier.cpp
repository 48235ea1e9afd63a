#include "tier/disk_tier.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

namespace hinge::tier {

namespace fs = std::filesystem;

namespace {

constexpr const char* kSuffix = ".kvb";

bool is_block_file(const std::string& f) {
  if (f.size() != 32 + 4 || f.compare(32, 4, kSuffix) != 0) return false;
  return std::all_of(f.begin(), f.begin() + 32,
                     [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

// The whole file, or an error (absent, unreadable).
Status read_file(const std::string& path, std::vector<uint8_t>* out, size_t max_bytes) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::Errorf("{}", std::strerror(errno));
  out->clear();
  struct stat st {};
  if (::fstat(fd, &st) == 0 && st.st_size > 0 && static_cast<size_t>(st.st_size) <= max_bytes)
    out->reserve(static_cast<size_t>(st.st_size));
  uint8_t buf[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int e = errno;
      ::close(fd);
      return Status::Errorf("{}", std::strerror(e));
    }
    if (n == 0) break;
    out->insert(out->end(), buf, buf + n);
    if (out->size() > max_bytes) break;  // not one of ours: refused by the sealer
  }
  ::close(fd);
  return Status::Ok();
}

Status write_file(const std::string& path, std::span<const uint8_t> bytes) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return Status::Errorf("{}: {}", path, std::strerror(errno));
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int e = errno;
      ::close(fd);
      ::unlink(path.c_str());
      return Status::Errorf("{}: {}", path, std::strerror(e));
    }
    done += static_cast<size_t>(n);
  }
  if (::close(fd) != 0) {
    ::unlink(path.c_str());
    return Status::Errorf("{}: {}", path, std::strerror(errno));
  }
  return Status::Ok();
}

}  // namespace

DiskTier::DiskTier(const DiskTierOptions& options, std::shared_ptr<const BlockSealer> sealer)
    : options_(options), sealer_(std::move(sealer)), lru_(options.capacity_bytes) {
  c_.capacity_bytes = options.capacity_bytes;
}

StatusOr<std::unique_ptr<DiskTier>> DiskTier::open(const DiskTierOptions& options,
                                                   std::shared_ptr<const BlockSealer> sealer) {
  if (options.dir.empty()) return Status::Error("--kv-disk: give a directory");
  if (options.capacity_bytes <= 0) return Status::Error("--kv-disk-size: give a size, e.g. 20GiB");
  if (options.capacity_bytes < sealer->blob_bytes())
    return Status::Errorf("--kv-disk-size: {} bytes hold no block ({} bytes each)",
                          options.capacity_bytes, sealer->blob_bytes());
  std::error_code ec;
  fs::create_directories(options.dir, ec);
  if (ec) return Status::Errorf("--kv-disk {}: cannot create: {}", options.dir, ec.message());
  fs::permissions(options.dir, fs::perms::owner_all, fs::perm_options::replace, ec);
  if (::access(options.dir.c_str(), W_OK | X_OK) != 0)
    return Status::Errorf("--kv-disk {}: not writable: {}", options.dir, std::strerror(errno));
  std::unique_ptr<DiskTier> t(new DiskTier(options, std::move(sealer)));
  // Index what an earlier run left, oldest modified first (the LRU's order across restarts).
  struct Found {
    fs::file_time_type mtime;
    std::string name;
    int64_t bytes;
  };
  std::vector<Found> found;
  for (const auto& e : fs::directory_iterator(options.dir, ec)) {
    const std::string f = e.path().filename().string();
    if (f.size() > 4 && f.compare(f.size() - 4, 4, ".tmp") == 0 && f.rfind("kvb-", 0) == 0) {
      fs::remove(e.path(), ec);  // a write cut short
      continue;
    }
    if (!is_block_file(f) || !e.is_regular_file(ec)) continue;
    found.push_back({e.last_write_time(ec), f.substr(0, 32), static_cast<int64_t>(e.file_size(ec))});
  }
  std::sort(found.begin(), found.end(), [](const Found& a, const Found& b) { return a.mtime < b.mtime; });
  std::vector<uint8_t> head;
  for (const Found& f : found) {
    // The tier group from the header (for purges); a file that is not a block is removed.
    head.clear();
    std::ifstream in(t->path_of(f.name), std::ios::binary);
    head.resize(256);
    in.read(reinterpret_cast<char*>(head.data()), static_cast<std::streamsize>(head.size()));
    head.resize(static_cast<size_t>(in.gcount()));
    auto group = BlockSealer::peek_group(head);
    if (!group.ok()) {
      fs::remove(t->path_of(f.name), ec);
      ++t->c_.rejected;
      continue;
    }
    t->remove_files(t->lru_.insert(f.name, f.bytes, *group));
  }
  return t;
}

std::string DiskTier::path_of(const std::string& name) const {
  return options_.dir + "/" + name + kSuffix;
}

void DiskTier::remove_files(const std::vector<std::string>& names) {
  for (const std::string& n : names) {
    ::unlink(path_of(n).c_str());
    ++c_.evictions;
  }
}

Status DiskTier::put(const kv::TierBlockKey& key, std::span<const uint8_t> bytes, double ttl_s) {
  const std::string name = sealer_->name(key);
  uint64_t tmp_id = 0;
  {
    std::lock_guard lock(mu_);
    if (lru_.touch(name)) return Status::Ok();  // held already (the same content)
    tmp_id = ++tmp_counter_;
  }
  std::vector<uint8_t> blob;
  // The disk keeps blocks until the LRU drops them, unless the tenant has a TTL.
  sealer_->seal(key, bytes, &blob, BlockSealer::expiry_after(ttl_s));
  const std::string tmp = options_.dir + "/kvb-" + std::to_string(::getpid()) + "-" +
                          std::to_string(tmp_id) + ".tmp";
  Status st = write_file(tmp, blob);
  if (st.ok() && ::rename(tmp.c_str(), path_of(name).c_str()) != 0) {
    st = Status::Errorf("rename: {}", std::strerror(errno));
    ::unlink(tmp.c_str());
  }
  std::lock_guard lock(mu_);
  if (!st.ok()) {
    ++c_.put_errors;
    return st;
  }
  ++c_.puts;
  remove_files(lru_.insert(name, static_cast<int64_t>(blob.size()), key.group));
  return Status::Ok();
}

StatusOr<bool> DiskTier::get(const kv::TierBlockKey& key, std::vector<uint8_t>* out) {
  const std::string name = sealer_->name(key);
  {
    std::lock_guard lock(mu_);
    if (!lru_.contains(name)) {
      ++c_.misses;
      return false;
    }
  }
  std::vector<uint8_t> blob;
  const Status read = read_file(path_of(name), &blob, static_cast<size_t>(sealer_->blob_bytes()) + 1);
  int64_t expires_at = 0;
  Status opened = read.ok() ? sealer_->open(key, blob, out, &expires_at) : read;
  std::lock_guard lock(mu_);
  if (opened.ok() && BlockSealer::expired(expires_at)) {
    // Past its tenant's TTL: a miss, and the file goes.
    ++c_.evictions;
    ++c_.misses;
    out->clear();
    lru_.erase(name);
    ::unlink(path_of(name).c_str());
    return false;
  }
  if (!opened.ok()) {
    // Unreadable, truncated, tampered or foreign: a miss, and the file goes.
    ++c_.rejected;
    lru_.erase(name);
    ::unlink(path_of(name).c_str());
    return false;
  }
  lru_.touch(name);
  ++c_.hits;
  return true;
}

bool DiskTier::may_contain(const kv::TierBlockKey& key) const {
  const std::string name = sealer_->name(key);
  std::lock_guard lock(mu_);
  return lru_.contains(name);
}

int64_t DiskTier::forget_group(uint64_t group) {
  std::lock_guard lock(mu_);
  const std::vector<std::string> names = lru_.erase_group(group);
  for (const std::string& n : names) ::unlink(path_of(n).c_str());
  c_.purged += static_cast<int64_t>(names.size());
  return static_cast<int64_t>(names.size());
}

kv::KvTierCounters DiskTier::counters() const {
  std::lock_guard lock(mu_);
  kv::KvTierCounters c = c_;
  c.entries = lru_.size();
  c.bytes = lru_.bytes();
  return c;
}

}  // namespace hinge::tier
