#pragma once
// Finite-difference gradient checks: loss = <module(x), r> for a fixed random r, so backward(r)
// gives d loss / d(x, params); central differences in double check sampled entries of each.
// Values go through to_host / from_host, so the same checks run on the device build.
#include <catch2/catch.hpp>

#include <cmath>
#include <random>

#include "gradsync/trainer/module.hpp"

namespace gradsync::trainer::test {

inline Tensor random_tensor(Shape shape, std::uint64_t seed, float lo = -1.0f, float hi = 1.0f) {
  Tensor t(std::move(shape));
  std::vector<float> v(t.size());
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  for (float& x : v) x = u(rng);
  t.from_host(v);
  return t;
}

inline double dot(const Tensor& a, const Tensor& b) {
  const std::vector<float> x = a.to_host(), y = b.to_host();
  double s = 0.0;
  for (std::size_t i = 0; i < x.size(); ++i) s += double(x[i]) * y[i];
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
    auto check = [&](Tensor& target, const Tensor& analytic_tensor, const std::string& what) {
      const std::vector<float> analytic = analytic_tensor.to_host();
      std::vector<float> v = target.to_host();
      const std::size_t n = v.size();
      double scale = 0.0;
      for (float a : analytic) scale = std::max(scale, double(std::fabs(a)));
      auto loss_at = [&](std::size_t i, float value) {
        v[i] = value;
        target.from_host(v);
        return loss();
      };
      for (std::size_t s = 0; s < std::min(samples, n); ++s) {
        const std::size_t i = n <= samples ? s : pick() % n;
        const float old = v[i];
        const double up = loss_at(i, float(old + eps));
        const double down = loss_at(i, float(old - eps));
        v[i] = old;
        target.from_host(v);
        const double numeric = (up - down) / (2 * eps);
        INFO(m.name() << " d/d " << what << "[" << i << "]: analytic " << analytic[i] << " numeric " << numeric);
        REQUIRE(std::fabs(analytic[i] - numeric) <= tolerance * std::max(floor, scale));
        ++checked;
      }
    };
    if (check_input) check(x, dx, "input");
    for (std::size_t k = 0; k < params.size(); ++k) check(params[k]->value, grads[k], params[k]->name);
    return checked;
  }
};

}  // namespace gradsync::trainer::test
