#include "common/cache_dir.h"

#include <elf.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <link.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

namespace hinge {

std::string cache_dir() {
  if (const char* d = std::getenv("HINGE_CACHE_DIR"); d != nullptr && d[0] != '\0') return d;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x != nullptr && x[0] == '/')
    return std::string(x) + "/hinge";
  if (const char* h = std::getenv("HOME"); h != nullptr && h[0] != '\0')
    return std::string(h) + "/.cache/hinge";
  return "";
}

namespace {

// The NT_GNU_BUILD_ID note of the main program (the first object dl_iterate_phdr reports).
int find_build_id(struct dl_phdr_info* info, size_t, void* data) {
  auto* out = static_cast<std::string*>(data);
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_NOTE) continue;
    const auto* p = reinterpret_cast<const uint8_t*>(info->dlpi_addr + ph.p_vaddr);
    const uint8_t* end = p + ph.p_memsz;
    while (p + sizeof(ElfW(Nhdr)) <= end) {
      ElfW(Nhdr) nh;
      std::memcpy(&nh, p, sizeof(nh));
      const uint8_t* name = p + sizeof(nh);
      const uint8_t* desc = name + ((nh.n_namesz + 3u) & ~3u);
      const uint8_t* next = desc + ((nh.n_descsz + 3u) & ~3u);
      if (next > end) break;
      if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 && std::memcmp(name, "GNU", 4) == 0) {
        for (uint32_t b = 0; b < nh.n_descsz; ++b) *out += fmt::format("{:02x}", desc[b]);
        return 1;
      }
      p = next;
    }
  }
  return 1;  // only the main program
}

}  // namespace

const std::string& build_identity() {
  static const std::string id = [] {
    std::string s;
    dl_iterate_phdr(find_build_id, &s);
    if (!s.empty()) return s;
    struct stat st {};
    if (::stat("/proc/self/exe", &st) == 0)
      return fmt::format("exe-{}-{}", static_cast<long long>(st.st_size),
                         static_cast<long long>(st.st_mtime));
    return std::string();
  }();
  return id;
}

Status write_file_atomically(const std::string& path, const std::string& text) {
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  if (ec) return Status::Errorf("cannot create the folder of {}: {}", path, ec.message());
  const std::string tmp = fmt::format("{}.{}.tmp", path, ::getpid());
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << text;
    if (!out) {
      std::filesystem::remove(tmp, ec);
      return Status::Errorf("cannot write {}", tmp);
    }
  }
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::filesystem::remove(tmp, ec);
    return Status::Errorf("cannot write {}", path);
  }
  return Status::Ok();
}

FileLock::FileLock(const std::string& path) {
  if (path.empty()) return;
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) return;
  int rc;
  do rc = ::flock(fd_, LOCK_EX);
  while (rc != 0 && errno == EINTR);
  if (rc != 0) {
    ::close(fd_);
    fd_ = -1;
  }
}

FileLock::~FileLock() {
  if (fd_ >= 0) ::close(fd_);  // closing releases the lock
}

}  // namespace hinge
