#include "gradsync/trainer/optimizer.hpp"
#include <gradsync/core/error.hpp>

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "gradsync/trainer/kernels.hpp"

namespace gradsync::trainer {

Optimizer::Optimizer(const std::vector<Param*>& params, OptimizerConfig config) : config_(config) {
  if (config.momentum < 0.0f || config.momentum >= 1.0f) throw ConfigError("momentum must be in [0, 1)");
  if (config.weight_decay < 0.0f) throw ConfigError("weight decay must be >= 0");
  for (auto* p : params) velocity_.emplace_back(p->value.shape(), 0.0f);
}

void Optimizer::step(Param& p, float lr) {
  Tensor& v = velocity_.at(p.index);
  const float wd = p.decay ? config_.weight_decay : 0.0f;
  float local = 1.0f;
  if (config_.lars && p.decay) {  // layer-wise trust ratio (LARS); biases and BN keep plain SGD
    const double w = std::sqrt(backend::sum_squares(p.value.data(), p.value.size()));
    const double g = std::sqrt(backend::sum_squares(p.grad.data(), p.grad.size()));
    if (w > 0.0 && g > 0.0) local = float(config_.lars_coefficient * w / (g + wd * w));
  }
  backend::for_each(p.value.size(), kernels::SgdUpdate{p.value.data(), p.grad.data(), v.data(), lr, config_.momentum,
                                                       wd, local});
}

LrSchedule::LrSchedule(float base, std::string kind, std::size_t warmup, std::size_t total)
    : base_(base), kind_(std::move(kind)), warmup_(warmup), total_(total) {
  if (std::find(kinds().begin(), kinds().end(), kind_) == kinds().end())
    throw ConfigError("unknown learning-rate schedule '" + kind_ + "' (valid: constant, step, cosine, poly)");
  if (!(base > 0.0f)) throw ConfigError("learning rate must be positive");
}

const std::vector<std::string>& LrSchedule::kinds() {
  static const std::vector<std::string> k{"constant", "step", "cosine", "poly"};
  return k;
}

float LrSchedule::operator()(std::size_t it) const {
  if (it < warmup_) return base_ * float(it + 1) / float(warmup_);
  const double span = double(std::max<std::size_t>(1, total_ - std::min(total_, warmup_)));
  const double p = std::min(1.0, double(it - warmup_) / span);
  if (kind_ == "step") return base_ * float(std::pow(0.1, (p >= 0.5) + (p >= 0.75)));
  if (kind_ == "cosine") return base_ * float(0.5 * (1.0 + std::cos(3.14159265358979 * p)));
  if (kind_ == "poly") return base_ * float((1.0 - p) * (1.0 - p));
  return base_;
}

}  // namespace gradsync::trainer
