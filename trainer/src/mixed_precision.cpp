#include "gradsync/trainer/mixed_precision.hpp"

#include <algorithm>
#include <utility>

#include "gradsync/trainer/half.hpp"

namespace gradsync::trainer {

MixedPrecision::MixedPrecision(const std::vector<Param*>& params, LossScaler::Config config)
    : scaler_(config), masters_(params.size()) {
  adopt(params);
}

void MixedPrecision::adopt(const std::vector<Param*>& params) {
  for (auto* p : params) {
    masters_.at(p->index) = p->value;
    round_to_half(p->value);
  }
}

void MixedPrecision::swap_masters(const std::vector<Param*>& params) {
  for (auto* p : params) std::swap(p->value, masters_.at(p->index));
}

void MixedPrecision::scale_loss_grad(Tensor& d) const {
  backend::for_each(d.size(), kernels::ScaleToHalf{d.data(), d.data(), scaler_.scale()});
}

bool MixedPrecision::unscale(const std::vector<Param*>& params) {
  // Every tensor's counts go to one buffer, read back once: a device synchronizes once per step.
  constexpr std::size_t row = 4096;
  std::size_t rows = 0;
  for (auto* p : params) rows += (p->grad.size() + row - 1) / row;
  nonfinite_.resize(rows);
  const float inv = 1.0f / scaler_.scale();
  std::size_t at = 0;
  for (auto* p : params) {
    const std::size_t n = p->grad.size(), r = (n + row - 1) / row;
    backend::reduce_rows(r, row, kernels::UnscaleCount{p->grad.data(), n, row, inv}, nonfinite_.data() + at);
    at += r;
  }
  const std::vector<float> counts = to_host(nonfinite_);
  const bool finite = std::all_of(counts.begin(), counts.end(), [](float c) { return c == 0.0f; });
  return scaler_.update(!finite);
}

void MixedPrecision::step(Param& p, Optimizer& optimizer, float lr) {
  Tensor& master = masters_.at(p.index);
  std::swap(p.value, master);
  optimizer.step(p, lr);
  std::swap(p.value, master);
  backend::for_each(p.value.size(), kernels::RoundToHalf{master.data(), p.value.data()});
}

}  // namespace gradsync::trainer
