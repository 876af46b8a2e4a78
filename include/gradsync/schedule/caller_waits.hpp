#pragma once
/// CallerWaits: the caller's waits in progress (wait_for; gradient_ready, which waits for the
/// previous iteration's use of its span; the destructor), so the watchdog's thread (watchdog.hpp)
/// sees the one that has lasted the timeout. Any thread.
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <mutex>
#include <optional>
#include <vector>

namespace gradsync::schedule {

class CallerWaits {
 public:
  using clock = std::chrono::steady_clock;
  struct Wait {
    clock::time_point since;
    const char* who;
    std::size_t index;
  };

  CallerWaits() { waits_.reserve(8); }  // the caller's threads: steady-state waits allocate nothing

  /// Registers `wait`, which lives on its caller's stack, until remove(wait).
  void add(const Wait& wait) {
    std::lock_guard lock(mutex_);
    waits_.push_back(&wait);
  }
  void remove(const Wait& wait) {
    std::lock_guard lock(mutex_);
    std::erase(waits_, &wait);
  }

  /// The oldest wait, once it has lasted `timeout`.
  std::optional<Wait> overdue(std::chrono::milliseconds timeout) const {
    std::lock_guard lock(mutex_);
    const auto oldest = std::ranges::min_element(waits_, {}, &Wait::since);
    if (oldest == waits_.end() || clock::now() - (*oldest)->since < timeout) return std::nullopt;
    return **oldest;
  }

 private:
  mutable std::mutex mutex_;
  std::vector<const Wait*> waits_;
};

}  // namespace gradsync::schedule
