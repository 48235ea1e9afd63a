// AddElapsed: adds the seconds between its construction and its destruction to a total, on
// every return path (time spent in a function, summed over calls).
#pragma once

#include <chrono>

namespace hinge {

class AddElapsed {
 public:
  explicit AddElapsed(double* total)
      : total_(total), t0_(std::chrono::steady_clock::now()) {}
  AddElapsed(const AddElapsed&) = delete;
  AddElapsed& operator=(const AddElapsed&) = delete;
  ~AddElapsed() {
    *total_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
  }

 private:
  double* total_;
  std::chrono::steady_clock::time_point t0_;
};

}  // namespace hinge
