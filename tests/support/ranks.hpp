#pragma once
// Test support: run a function on N in-process ranks and gather results on the main thread
// (Catch2 assertions are not thread-safe, so ranks return values and tests assert after join).
#include <chrono>
#include <cmath>
#include <cstdint>
#include <exception>
#include <functional>
#include <thread>
#include <vector>

#include <gradsync/core/layout.hpp>
#include <gradsync/transport/in_process.hpp>

namespace testing {

/// Runs fn(rank, transport) on `n` threads of one InProcessGroup; rethrows the first exception.
template <class R>
std::vector<R> run_ranks(int n, const std::function<R(int, gradsync::transport::Transport&)>& fn,
                         std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
  gradsync::transport::InProcessGroup group(n, timeout);
  std::vector<R> results(n);
  std::vector<std::exception_ptr> errors(n);
  {
    std::vector<std::jthread> threads;
    for (int r = 0; r < n; ++r)
      threads.emplace_back([&, r] {
        try {
          results[r] = fn(r, group.rank(r));
        } catch (...) {
          errors[r] = std::current_exception();
        }
      });
  }
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
  return results;
}

/// Deterministic pseudo-random gradient value in [-1, 1) for (rank, layer, iteration, index).
inline float grad_value(int rank, std::size_t layer, int iteration, std::size_t i) {
  std::uint64_t x = (static_cast<std::uint64_t>(rank) << 48) ^ (static_cast<std::uint64_t>(layer) << 32) ^
                    (static_cast<std::uint64_t>(iteration) << 24) ^ i;
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  x ^= x >> 31;
  return static_cast<float>(static_cast<double>(x >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

/// The layout most tests use: uneven sizes, a 1-element layer, one larger than several slices.
inline gradsync::ModelLayout uneven_layout() {
  return gradsync::ModelLayout{{"conv1.weight", 1728}, {"conv1.bias", 1}, {"bn1.weight", 64},
                               {"conv2.weight", 9000}, {"conv2.bias", 7}, {"fc.weight", 2570},
                               {"fc.bias", 10}};
}

}  // namespace testing
