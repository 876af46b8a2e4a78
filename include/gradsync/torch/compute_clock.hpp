#pragma once
/// ComputeClock: one rank's compute per iteration as the Attachment sees it - the time from one
/// step() to the next, less the time spent waiting for the Synchronizer - for slicing "auto"'s
/// second choice (Attachment::Config::rechoose). LibTorch-free.
///
/// \code
///   ComputeClock clock;
///   clock.step();                                   // at each step()
///   const auto t0 = ComputeClock::Clock::now();
///   sync.wait_for(layer);
///   clock.waited_since(t0);                         // around each wait
///   clock.samples();                                // per iteration closed, seconds
/// \endcode
#include <algorithm>
#include <chrono>
#include <vector>

namespace gradsync::torch {

class ComputeClock {
 public:
  using Clock = std::chrono::steady_clock;

  /// A step() begins: closes the iteration since the last step() (the first closes none).
  void step() {
    const auto now = Clock::now();
    if (started_) samples_.push_back(std::max(seconds(now - last_) - waited_, 0.0));
    started_ = true;
    restart();
  }
  /// Counts the time since `t0` as waiting, not compute.
  void waited_since(Clock::time_point t0) { waited_ += seconds(Clock::now() - t0); }
  /// The current iteration starts now (what came before was not part of it).
  void restart() {
    last_ = Clock::now();
    waited_ = 0;
  }
  /// Compute per iteration closed, seconds, in order.
  const std::vector<double>& samples() const { return samples_; }

 private:
  static double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

  std::vector<double> samples_;
  Clock::time_point last_{};
  double waited_ = 0;
  bool started_ = false;
};

}  // namespace gradsync::torch
