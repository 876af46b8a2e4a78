// ErrorFeedback<C>: the wire is C's, and the residual conserves the gradient.
#include <catch2/catch.hpp>

#include <cmath>

#include <gradsync/codec/error_feedback.hpp>
#include <gradsync/codec/half.hpp>
#include <gradsync/codec/qsgd.hpp>
#include "test_util.hpp"

using namespace gradsync::codec;

TEST_CASE("ErrorFeedback<Qsgd<2>> conserves the gradient and speaks Qsgd<2>'s wire", "[codec][ef]") {
  const ErrorFeedback<Qsgd<2>> c{{.bypass_below = 0}};
  STATIC_REQUIRE(c.name() == "ef+qsgd2");
  const std::size_t n = 10'000, iterations = 30;
  std::vector<float> residual(n, 0.0f);
  std::vector<double> sent(n, 0.0), given(n, 0.0);
  for (std::size_t t = 0; t < iterations; ++t) {
    const auto g = test_util::gaussian(n, 500 + unsigned(t));
    const auto wire = test_util::encode(c, g, {.seed = 1, .iteration = t, .residual = residual});
    const auto d = test_util::decode(c.inner, wire, n);  // the plain codec reads it
    for (std::size_t i = 0; i < n; ++i) {
      sent[i] += d[i];
      given[i] += g[i];
    }
  }
  double worst = 0.0;
  for (std::size_t i = 0; i < n; ++i) worst = std::max(worst, std::fabs(sent[i] + residual[i] - given[i]));
  CHECK(worst < 1e-4);
}

TEST_CASE("ErrorFeedback without a residual is the plain codec", "[codec][ef]") {
  const ErrorFeedback<Half> c{{.bypass_below = 0}};
  const auto v = test_util::gaussian(3000, 9);
  CHECK(test_util::encode(c, v) == test_util::encode(c.inner, v));
}
