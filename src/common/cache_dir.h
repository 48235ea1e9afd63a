// hinge's per-user cache folder (measurements of this machine kept across processes) and the
// small file helpers its users share.
//
// The folder: $HINGE_CACHE_DIR, else $XDG_CACHE_HOME/hinge, else ~/.cache/hinge. What is kept
// there is derived from the machine, never from a prompt or a model's data.
#pragma once

#include <string>

#include "common/status.h"

namespace hinge {

// The cache folder ("" when none can be named: no HINGE_CACHE_DIR, XDG_CACHE_HOME or HOME).
std::string cache_dir();

// The running executable's GNU build ID in hex (changes with every link of changed code), or,
// where the binary has none, "exe-<size>-<mtime>" of /proc/self/exe; "" if neither is known.
// Caches of what the code measured (which kernel is fastest) are keyed on it.
const std::string& build_identity();

// Writes `text` to `path` atomically (a temporary file beside it, then rename), creating the
// folder. Readers see the old file or the new one, never half of one.
Status write_file_atomically(const std::string& path, const std::string& text);

// An exclusive advisory lock (flock) on `path` (created if missing), held while the object
// lives: processes that measure and then cache take it so that only one of them measures.
// Fails open: when the file cannot be opened or locked, locked() is false and nothing waits.
class FileLock {
 public:
  explicit FileLock(const std::string& path);
  ~FileLock();
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;
  bool locked() const { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

}  // namespace hinge
