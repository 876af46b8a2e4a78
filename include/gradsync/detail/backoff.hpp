#pragma once
/// Backoff: polling without stealing the CPU other ranks need (4 ranks may share 2 cores).
#include <algorithm>
#include <chrono>
#include <thread>

namespace gradsync::detail {

/// Spin briefly, then yield, then sleep with growing pauses up to 1 ms. MPI only progresses inside
/// our MPI_Test calls, so the pauses stay short while a transfer is likely under way. Reset it
/// (assign {}) after progress.
class Backoff {
 public:
  void pause() {
    ++rounds_;
    if (rounds_ <= 16) return;
    if (rounds_ <= 256) {
      std::this_thread::yield();
      return;
    }
    std::this_thread::sleep_for(sleep_);
    sleep_ = std::min(sleep_ * 2, std::chrono::microseconds(1000));
  }

 private:
  unsigned rounds_ = 0;
  std::chrono::microseconds sleep_{10};
};

}  // namespace gradsync::detail
