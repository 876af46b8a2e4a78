#pragma once
/// Undecided: how many units this rank handed over that no decision has taken yet. No unit can be
/// decided before it is ready on this rank, so while that count is zero the chooser sleeps until
/// gradient_ready hands over more, instead of polling the transport every 20-200 us through a
/// forward pass (a wake-up each, taken from the compute threads).
#include <atomic>
#include <cstddef>
#include <cstdint>

#include "control.hpp"

namespace gradsync::schedule {

class Undecided {
 public:
  /// `n` more units handed over (gradient_ready's thread): wakes a sleeping chooser.
  void handed_over(std::size_t n) {
    handed_over_.fetch_add(n);
    handed_over_.notify_all();
  }
  /// One more decision taken; its index, the same on every rank. The chooser's, under its lock.
  std::uint64_t decided() { return decided_++; }
  /// While every unit handed over is decided, sleeps until more are (or `control` stops); false
  /// when there was no need. `sleeping()` runs before each sleep. The chooser's, under its lock.
  template <class OnSleep>
  bool sleep_while_none(const Control& control, OnSleep&& sleeping) {
    bool slept = false;
    for (;;) {
      const std::uint64_t handed = handed_over_.load();
      if (handed != decided_ || control.stopping()) return slept;
      sleeping();
      handed_over_.wait(handed);
      slept = true;
    }
  }
  /// Wakes a sleeping chooser after Control::stop() (it then sees the stop).
  void wake() { handed_over(1); }

 private:
  std::atomic<std::uint64_t> handed_over_{0};
  std::uint64_t decided_ = 0;
};

}  // namespace gradsync::schedule
