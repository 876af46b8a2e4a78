// detail::Backoff: a few polls back to back, then sleeps that grow from first_sleep by half each
// time up to max_sleep. Sleeping lasts at least what was asked, so lower bounds are exact; the one
// upper bound is far above what the cap allows and far below what uncapped growth would take.
// (That spins do not sleep, and that a reset starts over, only an upper bound on short sleeps
// could show: not asserted, a loaded machine would break it.)
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>

#include <gradsync/detail/backoff.hpp>

using gradsync::detail::Backoff;
using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;

namespace {
/// The sleeps of pauses spins+1 .. spins+n, as documented.
std::chrono::microseconds documented_sleeps(int n) {
  std::chrono::microseconds total{0}, sleep = Backoff::first_sleep;
  for (int i = 0; i < n; ++i) {
    total += sleep;
    sleep = std::min(sleep + sleep / 2, Backoff::max_sleep);
  }
  return total;
}
/// How long `n` pauses of `b` take.
clock_type::duration pauses(Backoff& b, int n) {
  const auto t0 = clock_type::now();
  for (int i = 0; i < n; ++i) b.pause();
  return clock_type::now() - t0;
}
}  // namespace

TEST_CASE("backoff sleeps at least the documented schedule once its spins are used up") {
  static_assert(Backoff::first_sleep < Backoff::max_sleep);
  Backoff b;
  const int spins = static_cast<int>(Backoff::spins);
  // The sleeps after the spins: 20, 30, 45, 67, 100, 150, 200, 200, ... us.
  REQUIRE(documented_sleeps(8) == std::chrono::microseconds(20 + 30 + 45 + 67 + 100 + 150 + 200 + 200));
  REQUIRE(pauses(b, spins + 8) >= documented_sleeps(8));
}

TEST_CASE("backoff's sleeps stop growing at max_sleep") {
  Backoff b;
  // 200 sleeps: at most 200 x 200 us = 40 ms with the cap; uncapped, the 40th alone would last
  // 20 us x 1.5^39, over 100 s.
  const auto took = pauses(b, static_cast<int>(Backoff::spins) + 200);
  REQUIRE(took >= documented_sleeps(200));
  REQUIRE(took < 30s);
}
