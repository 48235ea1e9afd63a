// Read-only memory mapping of a whole file (PROT_READ, MAP_PRIVATE), shared by the format readers.
// Rejects directories, non-regular files and empty files with a message naming the path.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"

namespace hinge {

class MappedFile {
 public:
  // `kind` names what the caller expected ("GGUF file"), used in messages:
  // "x.bin: is a directory, not a GGUF file".
  static StatusOr<MappedFile> open(const std::string& path, std::string_view kind);

  MappedFile() = default;
  MappedFile(MappedFile&& o) noexcept { *this = std::move(o); }
  MappedFile& operator=(MappedFile&& o) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile() { reset(); }

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  // Gives up ownership: the caller must munmap(data, size) itself.
  const uint8_t* release();

 private:
  void reset();
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace hinge
