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
  CHECK(test_util::conservation_error(c, 10'000, 30, 500) < 1e-4);
  const auto g = test_util::gaussian(1000, 1);
  std::vector<float> residual(1000, 0.0f);
  const auto wire = test_util::encode(c, g, {.residual = residual});
  std::vector<float> a(1000), b(1000);
  c.decode(wire, a);
  c.inner.decode(wire, b);  // the plain codec reads it
  CHECK(a == b);
}

TEST_CASE("ErrorFeedback without a residual is the plain codec", "[codec][ef]") {
  const ErrorFeedback<Half> c{{.bypass_below = 0}};
  const auto v = test_util::gaussian(3000, 9);
  CHECK(test_util::encode(c, v) == test_util::encode(c.inner, v));
}
