// Finds stop strings in streamed text. Text that might be the start of a stop string is held
// back until it is known not to be one, so a stop string never leaks into the output.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace hinge {

class StopMatcher {
 public:
  explicit StopMatcher(std::vector<std::string> stops) : stops_(std::move(stops)) {}

  // Appends `text`; returns the part that is safe to emit now. Sets stopped() when a stop string
  // completed (the returned text then ends right before it).
  std::string push(std::string_view text);
  // Releases held-back text at the end of generation (nothing if stopped).
  std::string flush();
  bool stopped() const { return stopped_; }

 private:
  std::vector<std::string> stops_;
  std::string pending_;
  bool stopped_ = false;
};

}  // namespace hinge
