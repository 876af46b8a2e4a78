// The host backend (backend.hpp): per-thread teams, for_each, gemm, sum_squares.
#include <atomic>
#include <catch2/catch.hpp>
#include <random>
#include <thread>
#include <vector>

#include "gradsync/trainer/backend.hpp"

namespace host = gradsync::trainer::host;

namespace {
constexpr std::size_t kLarge = std::size_t(1) << 22;  // above for_each's serial threshold

std::vector<float> random_floats(std::size_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = d(gen);
  return v;
}
}  // namespace

TEST_CASE("for_each on a team runs every index exactly once", "[trainer][backend]") {
  host::set_threads(3);
  std::vector<std::atomic<int>> hits(kLarge / 64);
  host::for_each(hits.size(), [&](std::size_t i) { hits[i].fetch_add(1, std::memory_order_relaxed); }, 64);
  std::size_t wrong = 0;
  for (auto& h : hits) wrong += h.load() != 1;
  REQUIRE(wrong == 0);
  host::set_threads(1);
}

TEST_CASE("a kernel inside a team's part runs serially on its thread", "[trainer][backend]") {
  host::set_threads(2);
  REQUIRE(host::threads() == 2);
  std::atomic<int> inner_threads{0}, parts{0};
  std::vector<int> inner(64 * 2, 0);
  host::for_each(2, [&](std::size_t t) {
    parts.fetch_add(1);
    inner_threads.fetch_add(host::threads());
    host::for_each(64, [&](std::size_t i) { inner[t * 64 + i] += 1; }, kLarge);  // large: would split if it could
  }, kLarge);
  REQUIRE(parts.load() == 2);
  REQUIRE(inner_threads.load() == 2);  // 1 in each part
  REQUIRE(std::ranges::count(inner, 1) == std::ptrdiff_t(inner.size()));
  REQUIRE(host::threads() == 2);  // back to the team after the region
  host::set_threads(1);
}

TEST_CASE("each thread has its own team size", "[trainer][backend]") {
  host::set_threads(3);
  int other = 0;
  std::thread([&] { other = host::threads(); }).join();
  REQUIRE(other == 1);
  REQUIRE(host::threads() == 3);
  host::set_threads(0);  // clamped
  REQUIRE(host::threads() == 1);
}

TEST_CASE("gemm split over a team matches a double-precision reference", "[trainer][backend]") {
  const std::size_t m = 96, n = 320, k = 200;  // m*n*k above gemm's threshold: split by columns
  const auto a = random_floats(m * k, 1), b = random_floats(k * n, 2);
  for (const bool trans_b : {false, true}) {
    for (const int team : {1, 3}) {
      host::set_threads(team);
      std::vector<float> c(m * n, 1.0f);
      // B as stored is n x k when transposed: its rows are B^T's rows.
      std::vector<float> bs = b;
      if (trans_b)
        for (std::size_t i = 0; i < k; ++i)
          for (std::size_t j = 0; j < n; ++j) bs[j * k + i] = b[i * n + j];
      host::gemm(false, trans_b, m, n, k, 2.0f, a.data(), k, bs.data(), trans_b ? k : n, 0.5f, c.data(), n);
      double worst = 0;
      for (std::size_t i = 0; i < m; ++i)
        for (std::size_t j = 0; j < n; ++j) {
          double ref = 0;
          for (std::size_t p = 0; p < k; ++p) ref += double(a[i * k + p]) * b[p * n + j];
          worst = std::max(worst, std::abs(2.0 * ref + 0.5 - c[i * n + j]));
        }
      CAPTURE(trans_b, team);
      REQUIRE(worst < 1e-3);
    }
  }
  host::set_threads(1);
}

TEST_CASE("sum_squares does not depend on the team size", "[trainer][backend]") {
  const auto x = random_floats(kLarge, 3);
  host::set_threads(1);
  const double one = host::sum_squares(x.data(), x.size());
  host::set_threads(3);
  const double three = host::sum_squares(x.data(), x.size());
  host::set_threads(1);
  REQUIRE(one == three);
  double ref = 0;
  for (float v : x) ref += double(v) * v;
  REQUIRE(one == Approx(ref).epsilon(1e-12));
}
