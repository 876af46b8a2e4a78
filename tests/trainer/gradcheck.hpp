#pragma once
// Finite-difference gradient checks: loss = <module(x), r> for a fixed random r, so backward(r)
// gives d loss / d(x, params); central differences in double check sampled entries of each.
#include <catch2/catch.hpp>

#include <cmath>
#include <random>

#include "gradsync/trainer/module.hpp"

namespace gradsync::trainer::test {

inline Tensor random_tensor(Shape shape, std::uint64_t seed, float lo = -1.0f, float hi = 1.0f) {
  Tensor t(std::move(shape));
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  for (std::size_t i = 0; i < t.size(); ++i) t[i] = u(rng);
  return t;
}

inline double dot(const Tensor& a, const Tensor& b) {
  double s = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) s += double(a[i]) * b[i];
  return s;
}

struct GradCheck {
  double eps = 1e-2;       ///< step of the central difference (float forward: not too small)
  double tolerance = 2e-2; ///< |analytic - numeric| <= tolerance * max(floor, largest |gradient| of the tensor)
  double floor = 1e-3;     ///< raise for deep models: float rounding in the loss is absolute noise
  std::size_t samples = 24;
  bool check_input = true;

  /// Returns the number of entries checked; REQUIREs each one.
  std::size_t run(Module& m, Tensor x, std::uint64_t seed = 7) const {
    Context ctx{.training = true};
    Tensor y = m.forward(x, ctx);
    Tensor r = random_tensor(y.shape(), seed + 1);
    Tensor dx = m.backward(r, ctx);
    std::vector<Param*> params;
    m.collect_params(params);
    std::vector<Tensor> grads;
    for (auto* p : params) grads.push_back(p->grad);
    auto loss = [&] { Context c{.training = true}; return dot(m.forward(x, c), r); };
    std::size_t checked = 0;
    std::mt19937_64 pick(seed);
    auto check = [&](float* v, std::size_t n, const Tensor& analytic, const std::string& what) {
      double scale = 0.0;
      for (std::size_t i = 0; i < analytic.size(); ++i) scale = std::max(scale, double(std::fabs(analytic[i])));
      for (std::size_t s = 0; s < std::min(samples, n); ++s) {
        const std::size_t i = n <= samples ? s : pick() % n;
        const float old = v[i];
        v[i] = float(old + eps);
        const double up = loss();
        v[i] = float(old - eps);
        const double down = loss();
        v[i] = old;
        const double numeric = (up - down) / (2 * eps);
        INFO(m.name() << " d/d " << what << "[" << i << "]: analytic " << analytic[i] << " numeric " << numeric);
        REQUIRE(std::fabs(analytic[i] - numeric) <= tolerance * std::max(floor, scale));
        ++checked;
      }
    };
    if (check_input) check(x.data(), x.size(), dx, "input");
    for (std::size_t k = 0; k < params.size(); ++k)
      check(params[k]->value.data(), params[k]->value.size(), grads[k], params[k]->name);
    return checked;
  }
};

}  // namespace gradsync::trainer::test
