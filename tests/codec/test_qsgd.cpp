// QSGD: unbiased (mean of 2,000 independent encodings within 4 standard errors of every input
// element), variance equal to its exact value and within the paper's bounds, deterministic
// in the RNG key, and packed to exactly Bits per element.
//
// Bounds checked, per bucket b of d elements with scale M_b and s levels (so summed):
//   2-norm (QSGD paper, Lemma 3.1):  E||Q(v) - v||^2 <= min(d / s^2, sqrt(d) / s) * ||v||^2
//   max-norm (ours, same argument):  E||Q(v) - v||^2 <= min(d / (4 s^2) * M^2, M * ||v||_1 / s)
// both following from the exact per-element variance (M/s)^2 * p(1-p) with p the fractional
// part of |v_i| s / M, and p(1-p) <= min(1/4, |v_i| s / M).
#include <catch2/catch.hpp>

#include <cmath>

#include <gradsync/codec/qsgd.hpp>
#include "test_util.hpp"

using namespace gradsync::codec;

namespace {

template <unsigned Bits>
void check_statistics(QsgdNorm norm) {
  constexpr std::size_t bucket = 128, n = 2 * bucket + 44, reps = 2000;  // two full buckets and a partial one
  constexpr double s = Qsgd<Bits>::levels;
  const Qsgd<Bits> q{.bucket = bucket, .norm = norm, .bypass_below = 0};
  auto v = test_util::gaussian(n, 11);
  v[5] = 0.0f;
  v[6] = -0.0f;

  std::vector<double> sum(n);
  double mse = 0.0;
  for (std::size_t r = 0; r < reps; ++r) {
    const auto d = test_util::decode(q, test_util::encode(q, v, {.seed = 99, .iteration = r, .unit = 4}), n);
    for (std::size_t i = 0; i < n; ++i) {
      sum[i] += d[i];
      mse += (double(d[i]) - v[i]) * (double(d[i]) - v[i]);
    }
  }
  mse /= reps;

  double exact_var = 0.0, paper_bound = 0.0;
  for (std::size_t b0 = 0; b0 < n; b0 += bucket) {
    const std::size_t len = std::min(bucket, n - b0);
    double max = 0.0, l1 = 0.0, l2sq = 0.0;
    for (std::size_t i = b0; i < b0 + len; ++i) {
      max = std::max(max, std::fabs(double(v[i])));
      l1 += std::fabs(double(v[i]));
      l2sq += double(v[i]) * v[i];
    }
    const double scale = norm == QsgdNorm::l2 ? std::sqrt(l2sq) : max;
    const double d = double(bucket);
    paper_bound += norm == QsgdNorm::l2 ? std::min(d / (s * s), std::sqrt(d) / s) * l2sq
                                        : std::min(d / (4 * s * s) * max * max, max * l1 / s);
    for (std::size_t i = b0; i < b0 + len; ++i) {
      const double r = std::fabs(double(v[i])) * s / scale, p = r - std::floor(r);
      const double var = (scale / s) * (scale / s) * p * (1 - p);
      exact_var += var;
      const double se = std::sqrt(var / reps);
      // 4 standard errors, plus float rounding of the scale and one count of slack for tiny p
      // (a Bernoulli count with a mean near 0 is far from normal).
      const double tol = 4 * se + 1e-6 * std::fabs(v[i]) + (scale / s) / reps;
      INFO("element " << i << " value " << v[i] << " mean " << sum[i] / reps << " tolerance " << tol);
      CHECK(std::fabs(sum[i] / reps - v[i]) <= tol);
    }
  }
  INFO("measured E||Q(v)-v||^2 = " << mse << ", exact " << exact_var << ", bound " << paper_bound);
  CHECK(mse <= paper_bound);
  CHECK(mse == Approx(exact_var).epsilon(0.1));
}

}  // namespace

TEMPLATE_TEST_CASE_SIG("QSGD is unbiased and its variance is within the paper's bound", "[codec][qsgd]",
                       ((unsigned Bits), Bits), 2, 4, 8, 16) {
  SECTION("max-norm") { check_statistics<Bits>(QsgdNorm::max); }
  SECTION("2-norm") { check_statistics<Bits>(QsgdNorm::l2); }
}

TEMPLATE_TEST_CASE_SIG("QSGD packs Bits per element plus one float per bucket", "[codec][qsgd]",
                       ((unsigned Bits), Bits), 2, 4, 8, 16) {
  const Qsgd<Bits> q{.bypass_below = 0};
  const std::size_t b = q.bucket;
  CHECK(q.encoded_bytes(10 * b) == header_bytes + 10 * (4 + b * Bits / 8));
  CHECK(q.encoded_bytes(b + 1) == header_bytes + (4 + b * Bits / 8) + (4 + 128 * Bits / 8));
  CHECK(Qsgd<Bits>::default_bucket == (Bits == 2 ? 128u : Bits == 16 ? 8192u : 512u));
}

TEST_CASE("QSGD draws depend on the key only, each element within one level of its input", "[codec][qsgd]") {
  const Qsgd<4> q{.bypass_below = 0};
  const auto v = test_util::gaussian(5000, 3);
  const EncodeContext ctx{.seed = 1, .iteration = 2, .unit = 3, .stream = 4};
  const auto a = test_util::encode(q, v, ctx);
  CHECK(a == test_util::encode(q, v, ctx));
  for (auto other : {EncodeContext{.seed = 2, .iteration = 2, .unit = 3, .stream = 4},
                     EncodeContext{.seed = 1, .iteration = 3, .unit = 3, .stream = 4},
                     EncodeContext{.seed = 1, .iteration = 2, .unit = 4, .stream = 4},
                     EncodeContext{.seed = 1, .iteration = 2, .unit = 3, .stream = 5}})
    CHECK(a != test_util::encode(q, v, other));

  const auto d = test_util::decode(q, a, v.size());
  for (std::size_t b0 = 0; b0 < v.size(); b0 += q.bucket) {
    float max = 0.0f;
    for (std::size_t i = b0; i < std::min(v.size(), b0 + q.bucket); ++i) max = std::max(max, std::fabs(v[i]));
    const float step = max / Qsgd<4>::levels;
    for (std::size_t i = b0; i < std::min(v.size(), b0 + q.bucket); ++i) {
      CHECK(std::fabs(d[i] - v[i]) <= step * 1.0001f);
      CHECK((d[i] == 0.0f || std::signbit(d[i]) == std::signbit(v[i])));
    }
  }
}

TEST_CASE("QSGD of an all-zero bucket decodes to zeros - the extreme of a bucket is exact", "[codec][qsgd]") {
  const Qsgd<2> q{.bypass_below = 0};
  std::vector<float> v(300, 0.0f);
  v[200] = -3.0f;  // the max of the second bucket: decodes exactly (level s with probability 1)
  const auto d = test_util::decode(q, test_util::encode(q, v, {.seed = 5}), v.size());
  for (std::size_t i = 0; i < v.size(); ++i) CHECK(d[i] == v[i]);
}

TEST_CASE("QSGD rejects a bucket that is not a multiple of 128", "[codec][qsgd]") {
  const Qsgd<8> q{.bucket = 100, .bypass_below = 0};
  CHECK_THROWS_AS(q.encoded_bytes(1000), gradsync::ConfigError);
}

TEST_CASE("QSGD buckets are independent: any execution order (thread count) gives the same bytes", "[codec][qsgd]") {
  const Qsgd<8> q{.bypass_below = 0};
  const auto v = test_util::gaussian(5 * q.bucket + 77, 6);
  const EncodeContext ctx{.seed = 8, .iteration = 1};
  const auto wire = test_util::encode(q, v, ctx);
  std::vector<std::byte> reversed(wire.size());
  std::copy_n(wire.begin(), header_bytes, reversed.begin());
  const detail::QsgdEncodeKernel<8> kernel{v.data(), reversed.data() + header_bytes, v.size(), q.bucket, false,
                                           detail::stream_key(ctx)};
  for (std::size_t b = detail::bucket_count(v.size(), q.bucket); b-- > 0;) kernel(b);  // last bucket first
  CHECK(reversed == wire);
}
