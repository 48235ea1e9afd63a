#include "format/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

namespace hinge {

StatusOr<MappedFile> MappedFile::open(const std::string& path, std::string_view kind) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::Errorf("{}: cannot open: {}", path, std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    int e = errno;
    ::close(fd);
    return Status::Errorf("{}: cannot stat: {}", path, std::strerror(e));
  }
  if (S_ISDIR(st.st_mode)) {
    ::close(fd);
    return Status::Errorf("{}: is a directory, not a {}", path, kind);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return Status::Errorf("{}: not a regular file", path);
  }
  if (st.st_size == 0) {
    ::close(fd);
    return Status::Errorf("{}: empty file (0 bytes), not a {}", path, kind);
  }
  const size_t size = static_cast<size_t>(st.st_size);
  void* p = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  int map_errno = errno;
  ::close(fd);  // the mapping stays valid without the descriptor
  if (p == MAP_FAILED) return Status::Errorf("{}: mmap failed: {}", path, std::strerror(map_errno));
  MappedFile m;
  m.data_ = static_cast<const uint8_t*>(p);
  m.size_ = size;
  return m;
}

MappedFile& MappedFile::operator=(MappedFile&& o) noexcept {
  if (this != &o) {
    reset();
    data_ = std::exchange(o.data_, nullptr);
    size_ = std::exchange(o.size_, 0);
  }
  return *this;
}

const uint8_t* MappedFile::release() {
  const uint8_t* p = data_;
  data_ = nullptr;
  size_ = 0;
  return p;
}

void MappedFile::reset() {
  if (data_ != nullptr) ::munmap(const_cast<uint8_t*>(data_), size_);
  data_ = nullptr;
  size_ = 0;
}

}  // namespace hinge
