#pragma once
// What the examples share, so that each one shows only its own idea:
//   check(condition, what)  the examples check their own results: a failed check throws (assert()
//                           would vanish from a Release build) and the program exits non-zero
//   on_ranks(n, fn)         fn(rank, transport) on n threads, one in-process rank each; rethrows
//                           the first rank's exception once all have ended
//   run(body)               main's body: returns 0, or prints the error and returns 1
//   UnitOrder               the order rank 0 ran units in, made independent of thread timing
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <exception>
#include <functional>
#include <mutex>
#include <numeric>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <gradsync/core/statistics.hpp>
#include <gradsync/core/unit.hpp>
#include <gradsync/transport/in_process.hpp>

namespace example {

inline void check(bool condition, const std::string& what) {
  if (!condition) throw std::runtime_error("check failed: " + what);
}

template <class F>
void on_ranks(int n, F fn) {
  gradsync::transport::InProcessGroup group(n);
  std::vector<std::exception_ptr> errors(n);
  {
    std::vector<std::jthread> threads;
    for (int r = 0; r < n; ++r)
      threads.emplace_back([&, r] {
        try {
          fn(r, group.rank(r));
        } catch (...) {
          errors[r] = std::current_exception();
        }
      });
  }  // joins
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
}

/// Records the order in which rank 0 ran units, and makes it depend on the priority alone. Rank 0
/// decides each unit among those ready on every rank, and the threads of a backward pass race
/// with its first decisions; so rank 0's one executor (Options::inflight_units = 1) waits in
/// Options::on_unit, after each iteration's first unit, until every rank has called
/// handed_over() for that iteration. Every later choice then sees every unit ready: the order is
/// the priority's (most urgent key first, ties in the order units became ready).
class UnitOrder {
 public:
  explicit UnitOrder(int ranks) : ranks_(ranks) {}
  /// Rank 0's Options::on_unit.
  std::function<void(const gradsync::UnitEvent&)> on_unit() {
    return [this](const gradsync::UnitEvent& e) {
      std::unique_lock lock(mutex_);
      const bool first = ran_.empty() || iteration_of_last_ != e.iteration;
      ran_.push_back(e.unit);
      iteration_of_last_ = e.iteration;
      // (Bounded: a rank that stopped early fails the example's checks instead of hanging it.)
      if (first) cv_.wait_for(lock, std::chrono::seconds(60), [&] { return handed_over_ >= ranks_ * (e.iteration + 1); });
    };
  }
  /// Each rank, after handing over every layer of an iteration.
  void handed_over() {
    {
      std::lock_guard lock(mutex_);
      ++handed_over_;
    }
    cv_.notify_all();
  }
  /// The units rank 0 ran, in order (read after the ranks have finished).
  const std::vector<std::uint32_t>& units() const { return ran_; }

  /// The order a priority giving unit u the key key(u) promises for `units` of one layer each,
  /// handed over last layer first: most urgent (lowest) key first, then the order they became ready.
  template <class Key>
  static std::vector<std::uint32_t> promised(const std::vector<gradsync::Unit>& units, Key key) {
    std::vector<std::uint32_t> order(units.size());
    std::iota(order.begin(), order.end(), 0u);
    std::ranges::stable_sort(order, [&](std::uint32_t a, std::uint32_t b) {
      const auto ka = key(units[a]), kb = key(units[b]);
      return ka != kb ? ka < kb : units[a].first_layer() > units[b].first_layer();
    });
    return order;
  }
  /// Whether every iteration ran the units in `promised` order after its first unit (decided
  /// before the backward pass was complete, so it may be any).
  bool follows(const std::vector<std::uint32_t>& promised) const {
    const std::size_t n = promised.size();
    if (n == 0 || ran_.size() % n != 0) return false;
    for (std::size_t at = 0; at < ran_.size(); at += n) {
      std::vector<std::uint32_t> want{ran_[at]};
      for (std::uint32_t u : promised)
        if (u != ran_[at]) want.push_back(u);
      if (!std::equal(want.begin(), want.end(), ran_.begin() + static_cast<std::ptrdiff_t>(at))) return false;
    }
    return true;
  }

 private:
  int ranks_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::int64_t handed_over_ = 0, iteration_of_last_ = -1;
  std::vector<std::uint32_t> ran_;
};

template <class F>
int run(F body) {
  try {
    body();
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}

}  // namespace example
