#pragma once
// Vectorized activations on host rows (Eigen's packet logistic and tanh): libm's scalar expf and
// tanhf took 45% of the LSTM's step. Accurate to a few ulp, which the gradient checks allow.
#include <cstddef>

// GCC 12's AVX-512 headers warn -Wmaybe-uninitialized inside Eigen (GCC bug 105593): Eigen's code only.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <Eigen/Core>
#pragma GCC diagnostic pop

namespace gradsync::trainer::host {

/// x[i] = 1 / (1 + exp(-x[i])) for i in [0, n).
inline void logistic(float* x, std::size_t n) {
  Eigen::Map<Eigen::ArrayXf> v(x, Eigen::Index(n));
  v = v.logistic();
}

/// y[i] = tanh(x[i]) for i in [0, n); y may be x.
inline void tanh(const float* x, float* y, std::size_t n) {
  Eigen::Map<Eigen::ArrayXf>(y, Eigen::Index(n)) = Eigen::Map<const Eigen::ArrayXf>(x, Eigen::Index(n)).tanh();
}

}  // namespace gradsync::trainer::host
