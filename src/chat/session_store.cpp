#include "chat/session_store.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <system_error>

#include <fmt/format.h>

namespace hinge::chat {

namespace {
constexpr const char* kSuffix = ".session";
}

StatusOr<std::string> SessionStore::default_dir() {
  if (const char* x = std::getenv("XDG_DATA_HOME"); x != nullptr && x[0] == '/')
    return std::string(x) + "/hinge/sessions";
  if (const char* h = std::getenv("HOME"); h != nullptr && h[0] != '\0')
    return std::string(h) + "/.local/share/hinge/sessions";
  return Status::Error("neither XDG_DATA_HOME nor HOME is set: pass --session-dir DIR");
}

StatusOr<std::string> SessionStore::path_for(const std::string& name) const {
  const bool ok_chars = std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '_' || c == '-' || c == '.';
  });
  if (name.empty() || name.size() > 64 || !ok_chars || name[0] == '.')
    return Status::Error(
        "a session name is 1-64 letters, digits, '_', '-' or '.', not starting with '.'");
  return dir_ + "/" + name + kSuffix;
}

Status SessionStore::ensure_dir() const {
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  if (ec) return Status::Errorf("cannot create the session folder {}: {}", dir_, ec.message());
  // Only the folder we own is tightened; create_directories made it with the umask.
  if (::chmod(dir_.c_str(), 0700) != 0)
    return Status::Errorf("cannot make {} private (chmod 700): {}", dir_, std::strerror(errno));
  return Status::Ok();
}

std::vector<std::string> SessionStore::list() const {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir_, ec)) {
    const std::string name = e.path().filename().string();
    if (e.is_regular_file(ec) && name.size() > std::strlen(kSuffix) &&
        name.compare(name.size() - std::strlen(kSuffix), std::string::npos, kSuffix) == 0)
      out.push_back(e.path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace hinge::chat
