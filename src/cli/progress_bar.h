// A one-line progress bar on stderr (only when stderr is a terminal; otherwise silent, so logs
// and CI output stay clean).
#pragma once

#include <unistd.h>

#include <cstdio>
#include <string>

namespace hinge {

class ProgressBar {
 public:
  explicit ProgressBar(std::string label)
      : label_(std::move(label)), enabled_(::isatty(STDERR_FILENO) == 1) {}
  ~ProgressBar() { finish(); }

  void update(double fraction) {
    if (!enabled_ || done_) return;
    const int pct = static_cast<int>(fraction * 100.0 + 0.5);
    if (pct == last_pct_) return;
    last_pct_ = pct;
    constexpr int kWidth = 30;
    const int filled = pct * kWidth / 100;
    std::fprintf(stderr, "\r%s [%s%s] %3d%%", label_.c_str(), std::string(filled, '#').c_str(),
                 std::string(kWidth - filled, ' ').c_str(), pct);
    std::fflush(stderr);
  }
  void finish() {
    if (!enabled_ || done_) return;
    done_ = true;
    if (last_pct_ >= 0) std::fprintf(stderr, "\r\033[K");
    std::fflush(stderr);
  }

 private:
  std::string label_;
  bool enabled_;
  bool done_ = false;
  int last_pct_ = -1;
};

}  // namespace hinge
