#include "gradsync/trainer/mixed_precision.hpp"

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

bool MixedPrecision::unscale(const std::vector<std::span<float>>& grads) {
  bool finite = true;
  for (auto g : grads) finite &= scaler_.unscale(g);
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
