// SessionStore: the folder `hinge chat` keeps saved sessions in (--session-dir; default
// $XDG_DATA_HOME/hinge/sessions, else ~/.local/share/hinge/sessions), one NAME.session file per
// /save NAME. Names are 1-64 of [A-Za-z0-9_.-], not starting with '.', so a name can never
// reach outside the folder. The folder is created 0700 on the first save; files are 0600.
//
// Not thread-safe; plain file-system calls.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"

namespace hinge::chat {

class SessionStore {
 public:
  explicit SessionStore(std::string dir) : dir_(std::move(dir)) {}
  // The default folder from the environment; error when neither XDG_DATA_HOME nor HOME is set.
  static StatusOr<std::string> default_dir();

  const std::string& dir() const { return dir_; }
  // The file of a session name; error (saying what names may hold) for a bad one.
  StatusOr<std::string> path_for(const std::string& name) const;
  // Creates the folder (and parents) with mode 0700 when missing.
  Status ensure_dir() const;
  // Every *.session file in the folder (none when it does not exist).
  std::vector<std::string> list() const;

 private:
  std::string dir_;
};

}  // namespace hinge::chat
