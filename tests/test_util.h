// Helpers shared by the tests: where ../shared lives, reading files, running the CLI.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

namespace hinge::testing {

// The shared data folder (models, vocabularies): $HINGE_SHARED, else the path baked at build time.
inline std::string shared_dir() {
  if (const char* env = std::getenv("HINGE_SHARED"); env && *env) return env;
  return HINGE_SHARED_DIR;
}
inline std::string shared_path(const std::string& rel) { return shared_dir() + "/" + rel; }

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Path of the built `hinge` binary.
inline std::string hinge_binary() { return HINGE_BINARY; }

struct CommandResult {
  int exit_code = -1;
  std::string out;  // stdout only
};

// Runs a shell command, capturing stdout (stderr is left alone unless redirected in `cmd`).
inline CommandResult run_command(const std::string& cmd) {
  CommandResult r;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return r;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  int st = ::pclose(p);
  r.exit_code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

// A fresh temporary directory under $TMPDIR (removed by the OS; tests may leave files there).
inline std::string temp_dir() {
  const char* base = std::getenv("TMPDIR");
  std::string tmpl = std::string(base && *base ? base : "/tmp") + "/hinge-test-XXXXXX";
  char* p = ::mkdtemp(tmpl.data());
  return p ? std::string(p) : std::string("/tmp");
}

}  // namespace hinge::testing
