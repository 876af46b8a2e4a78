// ErrorFeedback<C>: the wire is C's, and the residual conserves the gradient.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <limits>

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

TEST_CASE("ErrorFeedback sends an overflow but keeps it out of the residual", "[codec][ef]") {
  // A loss scaler skips the step of an iteration whose gradients overflowed; a residual that took
  // the Inf in would make every later unit non-finite and every later step skipped.
  const ErrorFeedback<Qsgd<8>> c{{.bypass_below = 0}};
  const auto g = test_util::gaussian(1000, 3);
  std::vector<float> residual(1000, 0.0f);
  test_util::encode(c, g, {.residual = residual});  // a residual of the codec's error
  const std::vector<float> before = residual;
  REQUIRE(std::any_of(before.begin(), before.end(), [](float x) { return x != 0.0f; }));
  auto overflow = g;
  overflow[17] = std::numeric_limits<float>::infinity();
  const auto wire = test_util::encode(c, overflow, {.residual = residual});
  std::vector<float> sent(1000);
  c.decode(wire, sent);
  CHECK(std::any_of(sent.begin(), sent.end(), [](float x) { return !std::isfinite(x); }));
  CHECK(residual == before);
  test_util::encode(c, g, {.residual = residual});  // the next iteration's residual is finite again
  CHECK(std::all_of(residual.begin(), residual.end(), [](float x) { return std::isfinite(x); }));
}
