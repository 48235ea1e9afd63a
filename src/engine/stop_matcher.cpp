#include "engine/stop_matcher.h"

#include <algorithm>

namespace hinge {

std::string StopMatcher::push(std::string_view text) {
  if (stopped_) return {};
  pending_.append(text);
  if (stops_.empty()) {
    std::string out;
    out.swap(pending_);
    return out;
  }
  // Earliest complete stop string.
  size_t best = std::string::npos;
  for (const auto& s : stops_) {
    const size_t at = pending_.find(s);
    if (at != std::string::npos) best = std::min(best, at);
  }
  if (best != std::string::npos) {
    stopped_ = true;
    std::string out = pending_.substr(0, best);
    pending_.clear();
    return out;
  }
  // Hold back the longest suffix that is a proper prefix of some stop string.
  size_t hold = 0;
  for (const auto& s : stops_) {
    const size_t max_len = std::min(s.size() - 1, pending_.size());
    for (size_t len = max_len; len > hold; --len) {
      if (pending_.compare(pending_.size() - len, len, s, 0, len) == 0) {
        hold = len;
        break;
      }
    }
  }
  std::string out = pending_.substr(0, pending_.size() - hold);
  pending_.erase(0, pending_.size() - hold);
  return out;
}

std::string StopMatcher::flush() {
  if (stopped_) return {};
  std::string out;
  out.swap(pending_);
  return out;
}

}  // namespace hinge
