#pragma once
/// Backoff: polling without stealing the CPU other ranks need (4 ranks may share 2 cores).
#include <algorithm>
#include <chrono>
#include <thread>

namespace gradsync::detail {

/// Poll a few times back to back, then sleep between polls: 20 us at first, growing by half each
/// time up to 200 us. Reset it (assign {}) after progress.
///
/// No sched_yield: on a machine whose cores run the compute threads, a yielding poller stays
/// runnable and time-shares a core with them (measured with perf over real links: ~0.4 s of CPU
/// per iteration and executor in sched_yield/poll, forward+backward 1.5x slower), while a sleeping
/// one costs a wake-up per poll. The cap bounds how late a completion is noticed: MPI only
/// progresses inside our MPI_Test calls (rendezvous hand-shakes included), so it stays well under
/// the transfer time of a slice (160 kB take 1.3 ms at 1 Gbit/s) and the credit window's other
/// units keep the link busy meanwhile.
class Backoff {
 public:
  static constexpr unsigned spins = 8;
  static constexpr std::chrono::microseconds first_sleep{20};
  static constexpr std::chrono::microseconds max_sleep{200};

  /// How long to wait before the next poll: zero for the first `spins` polls, then growing.
  std::chrono::microseconds next() {
    if (rounds_ < spins) {
      ++rounds_;
      return std::chrono::microseconds{0};
    }
    const auto now = sleep_;
    sleep_ = std::min(sleep_ + sleep_ / 2, max_sleep);
    return now;
  }
  void pause() {
    if (const auto d = next(); d.count() > 0) std::this_thread::sleep_for(d);
  }

 private:
  unsigned rounds_ = 0;
  std::chrono::microseconds sleep_ = first_sleep;
};

}  // namespace gradsync::detail
