// 1bitSGD*: each reshaped bucket decodes to the mean of its non-negative and of its negative
// values, and error feedback conserves the gradient: after T iterations
// sum(decoded) + final residual == sum(inputs).
#include <catch2/catch.hpp>

#include <cmath>

#include <gradsync/codec/onebit.hpp>
#include "test_util.hpp"

using namespace gradsync::codec;

TEST_CASE("1-bit quantizes each bucket to the means of its non-negative and negative values", "[codec][onebit]") {
  const OneBit c{.bypass_below = 0};
  const std::size_t n = 64 * 5 + 40;  // a partial last bucket
  auto v = test_util::gaussian(n, 21);
  std::fill(v.begin() + 64, v.begin() + 128, 0.5f);  // a bucket with no negative value
  v[130] = -0.0f;                                     // counts as non-negative
  const auto d = test_util::decode(c, test_util::encode(c, v), n);
  for (std::size_t b0 = 0; b0 < n; b0 += 64) {
    const std::size_t end = std::min(n, b0 + 64);
    double pos = 0, neg = 0;
    int np = 0, nn = 0;
    for (std::size_t i = b0; i < end; ++i) (v[i] >= 0.0f ? (pos += v[i], ++np) : (neg += v[i], ++nn));
    for (std::size_t i = b0; i < end; ++i)
      CHECK(d[i] == Approx(v[i] >= 0.0f ? pos / np : neg / nn).epsilon(1e-5));
  }
  CHECK(c.encoded_bytes(n) == header_bytes + 5 * (8 + 8) + (8 + 8));
}

TEST_CASE("1-bit error feedback conserves the gradient over many iterations", "[codec][onebit]") {
  const OneBit c{.bypass_below = 0};
  CHECK(test_util::conservation_error(c, 20'000, 50, 100) < 1e-4);
  // ... and keeps the residual bounded (not growing with the number of iterations).
  std::vector<float> residual(20'000, 0.0f);
  for (std::size_t t = 0; t < 50; ++t)
    (void)test_util::encode(c, test_util::gaussian(residual.size(), 100 + unsigned(t)), {.residual = residual});
  for (float e : residual) REQUIRE(std::fabs(e) < 20.0f);
}

TEST_CASE("1-bit without a residual quantizes without feedback", "[codec][onebit]") {
  const OneBit c{.bypass_below = 0};
  const auto v = test_util::gaussian(1000, 4);
  std::vector<float> zero(1000, 0.0f);
  CHECK(test_util::encode(c, v) == test_util::encode(c, v, {.residual = zero}));
  std::vector<float> wrong(999);
  std::vector<std::byte> wire(c.encoded_bytes(1000));
  CHECK_THROWS_AS(c.encode(v, wire, {.residual = wrong}), gradsync::UsageError);
}
