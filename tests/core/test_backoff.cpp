// detail::Backoff: a few polls back to back, then sleeps that grow from first_sleep by half each
// time up to 200 us. next() gives the schedule exactly; pause() sleeps it (sleeping lasts at least
// what was asked, so only its lower bound is asserted: a loaded machine stretches any sleep).
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <vector>

#include <gradsync/detail/backoff.hpp>

using gradsync::detail::Backoff;
using namespace std::chrono_literals;
using us = std::chrono::microseconds;

namespace {
std::vector<us> schedule(Backoff& b, int n) {
  std::vector<us> out;
  for (int i = 0; i < n; ++i) out.push_back(b.next());
  return out;
}
}  // namespace

TEST_CASE("backoff: spins first, then sleeps growing by half up to 200 us") {
  static_assert(Backoff::first_sleep < Backoff::max_sleep);
  Backoff b;
  std::vector<us> expected(Backoff::spins, us{0});
  for (long s : {20, 30, 45, 67, 100, 150, 200, 200, 200}) expected.push_back(us{s});
  CHECK(schedule(b, static_cast<int>(expected.size())) == expected);
}

TEST_CASE("backoff starts over when assigned a fresh one") {
  Backoff b;
  schedule(b, static_cast<int>(Backoff::spins) + 40);
  CHECK(b.next() == Backoff::max_sleep);
  b = {};
  CHECK(schedule(b, static_cast<int>(Backoff::spins) + 2).back() == 30us);
}

TEST_CASE("backoff's pause sleeps at least what next() gives") {
  Backoff b, twin;
  const int n = static_cast<int>(Backoff::spins) + 8;
  us documented{0};
  for (int i = 0; i < n; ++i) documented += twin.next();
  REQUIRE(documented == us(20 + 30 + 45 + 67 + 100 + 150 + 200 + 200));
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < n; ++i) b.pause();
  REQUIRE(std::chrono::steady_clock::now() - t0 >= documented);
}
