// TopK: exactly the k largest magnitudes are sent (ties to the lower index), and with a
// residual the unsent part is conserved: sum(decoded) + final residual == sum(inputs).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <numeric>

#include <gradsync/codec/topk.hpp>
#include "test_util.hpp"

using namespace gradsync::codec;

TEST_CASE("TopK sends the k largest magnitudes", "[codec][topk]") {
  const TopK c{.ratio = 0.01f, .bypass_below = 0};
  const std::size_t n = 100'003;
  auto v = test_util::gaussian(n, 8);
  // 500 equal magnitudes where the threshold falls (~0.7% of N(0,1) lie above 2.7): some go, some stay.
  for (std::size_t i = 0; i < 500; ++i) v[200 * i + 7] = (i % 2 ? -1.0f : 1.0f) * 2.7f;
  const std::size_t k = c.kept(n);
  CHECK(k == 1001);
  const auto d = test_util::decode(c, test_util::encode(c, v), n);

  std::vector<std::size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return std::fabs(v[a]) > std::fabs(v[b]); });
  std::vector<float> expected(n, 0.0f);
  for (std::size_t j = 0; j < k; ++j) expected[order[j]] = v[order[j]];
  CHECK(d == expected);
  CHECK(c.encoded_bytes(n) == header_bytes + 8 * k);
}

TEST_CASE("TopK picks ties at the threshold by lowest index", "[codec][topk]") {
  const TopK c{.ratio = 0.5f, .bypass_below = 0};
  const std::vector<float> v{1, -1, 1, 3, 1, -1, 0.5f, 1};
  const auto d = test_util::decode(c, test_util::encode(c, v), v.size());
  CHECK(d == std::vector<float>{1, -1, 1, 3, 0, 0, 0, 0});
}

TEST_CASE("TopK with a residual conserves the gradient", "[codec][topk]") {
  const TopK c{.ratio = 0.05f, .bypass_below = 0};
  CHECK(test_util::conservation_error(c, 20'000, 40, 300) < 1e-4);
}

TEST_CASE("TopK rejects a ratio that is not in 0 < ratio <= 1", "[codec][topk]") {
  for (float r : {0.0f, -0.5f, 1.5f, std::nanf("")}) CHECK_THROWS_AS(TopK{.ratio = r}.encoded_bytes(100'000), gradsync::ConfigError);
}
